package watch

import (
	"sort"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
)

// visibility: immediate. A watch opened in a session with this option also shows that
// session's own uncommitted changes, marked Uncommitted. It keeps what it has shown of
// each node the open transaction touched; when the transaction commits, the committed
// change set is reported relative to what was shown (nothing twice), and when it rolls
// back, events take the shown changes back.

// onTx queues a session transaction event for the watcher's goroutine.
func (w *watcher) onTx(ev engine.TxEvent) {
	w.mu.Lock()
	w.txq = append(w.txq, ev)
	w.mu.Unlock()
	w.signal(w.wake)
}

// applyTx handles the queued transaction events. It reports false when the stream ended.
func (w *watcher) applyTx() bool {
	w.mu.Lock()
	q := w.txq
	w.txq = nil
	w.mu.Unlock()
	for _, ev := range q {
		var evs []herald.Event
		var err error
		switch {
		case !ev.Ended:
			evs, err = w.showUncommitted(ev.Changes)
		case ev.Committed:
			// The commit's change set arrives through the log; apply reconciles there.
			w.commitSeq = ev.Seq
			continue
		default:
			evs, err = w.revert()
		}
		if err != nil {
			return w.fail(err)
		}
		for i := range evs {
			if !w.send(&evs[i]) {
				return false
			}
		}
	}
	return true
}

// shownOrCommitted returns what the client currently sees of node id: the shown
// uncommitted state, or the committed one.
func (w *watcher) shownOrCommitted(tx *graph.Tx, id herald.NodeID, before *herald.Node) (*row, error) {
	if r, ok := w.shown[id]; ok {
		return r, nil
	}
	return w.q.One(tx, before, time.Time{})
}

// showUncommitted reports the transaction's net changes so far against what was shown.
func (w *watcher) showUncommitted(changes []herald.Change) ([]herald.Event, error) {
	var evs []herald.Event
	err := w.svc.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		touched := map[herald.NodeID]bool{}
		for _, ch := range changes {
			if ch.Kind != herald.NodeChange {
				continue
			}
			n := ch.NodeAfter
			if n == nil {
				n = ch.NodeBefore
			}
			touched[n.ID] = true
			was, err := w.shownOrCommitted(tx, n.ID, ch.NodeBefore)
			if err != nil {
				return err
			}
			now, err := w.q.One(tx, ch.NodeAfter, time.Time{})
			if err != nil {
				return err
			}
			if ev, ok := w.diff(was, now, true); ok {
				evs = append(evs, ev)
			}
			w.shown[n.ID] = now
		}
		// Nodes the transaction touched before but no longer changes (set back): show
		// their committed state again.
		for _, id := range w.shownIDs() {
			was := w.shown[id]
			if touched[id] {
				continue
			}
			now, err := w.q.One(tx, tx.Graph().Node(id), time.Time{})
			if err != nil {
				return err
			}
			if ev, ok := w.diff(was, now, true); ok {
				evs = append(evs, ev)
			}
			delete(w.shown, id)
		}
		return nil
	})
	return evs, err
}

// revert takes back every shown uncommitted change (the transaction rolled back).
func (w *watcher) revert() ([]herald.Event, error) {
	var evs []herald.Event
	err := w.svc.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		for _, id := range w.shownIDs() {
			was := w.shown[id]
			now, err := w.q.One(tx, tx.Graph().Node(id), time.Time{})
			if err != nil {
				return err
			}
			if ev, ok := w.diff(was, now, false); ok {
				evs = append(evs, ev)
			}
		}
		return nil
	})
	w.shown = map[herald.NodeID]*row{}
	w.commitSeq = 0
	return evs, err
}

// diff is the event that turns was into now (both nil: none).
func (w *watcher) diff(was, now *row, uncommitted bool) (herald.Event, bool) {
	ev := herald.Event{Seq: w.cursor, Tick: w.tick, Uncommitted: uncommitted}
	switch {
	case was == nil && now == nil:
		return ev, false
	case was == nil:
		ev.Type, ev.Match = herald.EventAdded, now.Value
	case now == nil:
		ev.Type, ev.Match = herald.EventRemoved, was.Value
	case herald.Compare(was.Value, now.Value) != 0:
		ev.Type, ev.Match, ev.Prev = herald.EventChanged, now.Value, was.Value
	default:
		return ev, false
	}
	return ev, true
}

// shownIDs returns the nodes with shown uncommitted state, in id order, so the events
// that concern them come out in a stable order.
func (w *watcher) shownIDs() []herald.NodeID {
	ids := make([]herald.NodeID, 0, len(w.shown))
	for id := range w.shown {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
