package watch

import (
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/eval"
)

// winEntry is a match added or changed at a time, kept for the windows that cover it.
type winEntry struct {
	at   time.Time
	node *herald.Node
}

// record keeps a windowed watch's events for its windows instead of sending them.
func (w *watcher) record(ev herald.Event, n *herald.Node) {
	if ev.Type == herald.EventAdded || ev.Type == herald.EventChanged {
		w.win = append(w.win, winEntry{at: w.svc.clock.Now(), node: n})
	}
}

// closeWindow reports the window that ends at end: the matches added or changed in
// [end-size, end), each once with its latest value.
func (w *watcher) closeWindow(end time.Time) bool {
	sp := w.sp
	start := end.Add(-sp.winSize)
	latest := map[herald.NodeID]*herald.Node{}
	var order []herald.NodeID
	for _, e := range w.win {
		if !e.at.Before(start) && e.at.Before(end) {
			if _, ok := latest[e.node.ID]; !ok {
				order = append(order, e.node.ID)
			}
			latest[e.node.ID] = e.node
		}
	}
	// Keep only what a later window can still cover.
	keep := w.win[:0]
	for _, e := range w.win {
		if !e.at.Before(end.Add(sp.winSlide - sp.winSize)) {
			keep = append(keep, e)
		}
	}
	w.win = keep

	var evs []herald.Event
	err := w.svc.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		ctx := sp.ctx()
		ctx.Node = tx.Node
		slot := sp.slots[0]
		rows := make([]eval.Row, 0, len(order))
		for _, id := range order {
			r := make(eval.Row, sp.plan.Scope.Len())
			r[slot].Node = latest[id]
			rows = append(rows, r)
		}
		if sp.aggregate {
			col := sp.proj.NewCollector()
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
				evs = append(evs, herald.Event{Type: herald.EventWindow, Match: herald.Map(sp.proj.Columns, vals), Seq: w.cursor, Tick: w.tick})
			}
			return nil
		}
		batch := make([]herald.Value, 0, len(rows))
		for _, r := range rows {
			v, _, err := sp.project(ctx, r)
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
	for _, ev := range evs {
		if !w.send(ev) {
			return false
		}
	}
	return true
}
