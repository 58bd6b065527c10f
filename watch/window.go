package watch

import (
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/eval"
)

// windows is a windowed watch's state: its recent matches, when the current window
// closes, and the timer that closes it.
type windows struct {
	entries []winEntry
	end     time.Time
	timer   herald.Timer
}

// winEntry is a match added or changed at a time, kept for the windows that cover it:
// its key and its variables as of then.
type winEntry struct {
	at   time.Time
	key  string
	bind eval.Row
}

// recordNode is record for a single-node watch: the match is the node n.
func (w *watcher) recordNode(ev herald.Event, n *herald.Node, at time.Time) {
	if n == nil {
		return
	}
	w.record(ev, w.q.SingleRow(n), at)
}

// record keeps a windowed watch's events for its windows instead of sending them. at is
// the time of the commit that made the event (not when the stream got to it), so an
// event falls into the window of its commit however late it is processed.
func (w *watcher) record(ev herald.Event, bind eval.Row, at time.Time) {
	if at.IsZero() {
		at = w.svc.clock.Now()
	}
	if bind != nil && (ev.Type == herald.EventAdded || ev.Type == herald.EventChanged) {
		w.win.entries = append(w.win.entries, winEntry{at: at, key: w.q.Key(bind), bind: bind})
	}
}

// closeWindow reports the window that ends at end: the matches added or changed in
// [end-size, end), each once with its latest value.
func (w *watcher) closeWindow(end time.Time) bool {
	q := w.q
	start := end.Add(-q.Opts.WinSize)
	latest := map[string]eval.Row{}
	var order []string
	for _, e := range w.win.entries {
		if !e.at.Before(start) && e.at.Before(end) {
			if _, ok := latest[e.key]; !ok {
				order = append(order, e.key)
			}
			latest[e.key] = e.bind
		}
	}
	// Keep only what a later window can still cover.
	keep := w.win.entries[:0]
	for _, e := range w.win.entries {
		if !e.at.Before(end.Add(q.Opts.WinSlide - q.Opts.WinSize)) {
			keep = append(keep, e)
		}
	}
	w.win.entries = keep
	rows := make([]eval.Row, 0, len(order))
	for _, k := range order {
		rows = append(rows, latest[k])
	}

	var evs []herald.Event
	err := w.svc.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		ctx := q.Context()
		ctx.Node = tx.Node
		if q.Aggregate() {
			col := q.Projection().NewCollector()
			for _, r := range rows {
				if err := col.Add(ctx, r); err != nil {
					return err
				}
			}
			out, err := col.Rows(ctx)
			if err != nil {
				return err
			}
			for _, vals := range out {
				evs = append(evs, herald.Event{Type: herald.EventWindow, Match: herald.Map(q.Projection().Columns, vals), Seq: w.cursor, Tick: w.tick})
			}
			return nil
		}
		batch := make([]herald.Value, 0, len(rows))
		for _, r := range rows {
			v, _, err := q.Project(ctx, r)
			if err != nil {
				return err
			}
			batch = append(batch, v)
		}
		evs = append(evs, herald.Event{Type: herald.EventWindow, Match: herald.List(batch...), Seq: w.cursor, Tick: w.tick})
		return nil
	})
	if err != nil {
		return w.fail(err)
	}
	if len(evs) > 0 {
		evs[len(evs)-1].Last = true
	}
	for i := range evs {
		if !w.send(&evs[i]) {
			return false
		}
	}
	return true
}
