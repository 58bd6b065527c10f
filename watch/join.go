package watch

import (
	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/standing"
)

// Join patterns (and single-node patterns whose conditions read other nodes) are
// decided by running them before and after each commit that concerns them
// (standing.Query.Around and Diff) on the stream's view of the graph at its position
// (past.go); identical watches share the result.

// joinResult is a commit's events for a join watch, shared by identical watches.
type joinResult struct {
	evs   []herald.Event
	binds []eval.Row
}

// applyJoin decides cs for a join watch on the graph just before and just after it.
func (w *watcher) applyJoin(cs *herald.ChangeSet) ([]herald.Event, []eval.Row, error) {
	p := w.past
	if !w.q.Relevant(cs) {
		p.advance(cs.Seq)
		return nil, nil, nil
	}
	key := cacheKey{share: w.shareID, seq: cs.Seq, join: true}
	if w.shareID != 0 {
		if v, ok := w.svc.cache.get(key); ok {
			p.advance(cs.Seq)
			r := v.(joinResult)
			return append([]herald.Event(nil), r.evs...), r.binds, nil
		}
	}
	ids, full := w.q.Touched(cs)
	// The change sets between the last one applied and cs that the stream did not get
	// read nothing the pattern reads (the dispatch index makes the same test as
	// standing.Query.Reads): skip them rather than take them in.
	p.advance(cs.Seq - 1)
	var before, after map[string]standing.Row
	err := w.withPast(p, func(g *graph.Graph) error {
		run := func() (map[string]standing.Row, error) {
			intr := w.interrupt()
			if full {
				return w.q.Matches(p.view(g), cs.Time, intr)
			}
			return w.q.Around(p.view(g), ids, cs.Time, intr)
		}
		var err error
		p.advance(cs.Seq - 1)
		if before, err = run(); err != nil {
			return err
		}
		p.advance(cs.Seq)
		after, err = run()
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	evs, binds := w.q.Diff(before, after, cs.Seq, cs.Tick)
	markLast(evs)
	if w.shareID != 0 {
		w.svc.cache.put(key, joinResult{evs: append([]herald.Event(nil), evs...), binds: binds})
	}
	return evs, binds, nil
}
