package watch

import (
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/eval"
)

// Join patterns (and single-node patterns whose conditions read other nodes) are
// decided by seeded evaluation: a commit can only add, remove or change matches that
// bind a node it touched (or an endpoint of an edge it touched), so the pattern is run
// seeded on each such node, once on the graph just before the commit and once just
// after, and the two results are compared. A commit that touches a node the conditions
// read by id (`#p0.status`), or a pattern that cannot be seeded, runs in full instead.

// seedPlan is the pattern planned around one of its node variables.
type seedPlan struct {
	typ  string // the variable's type; "" for an endpoint variable of any type
	plan *graph.Plan
}

// touched lists the nodes a commit can have changed matches through, and whether the
// pattern must be run in full for it.
func (s *spec) touched(cs *herald.ChangeSet) (ids []herald.NodeID, full bool) {
	seen := map[herald.NodeID]bool{}
	add := func(id herald.NodeID) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, ch := range cs.Changes {
		switch ch.Kind {
		case herald.NodeChange:
			id := nodeOf(ch).ID
			if s.refs[id] {
				full = true
			}
			add(id)
		case herald.EdgeChange:
			e := edgeOf(ch)
			if !s.types[e.Type] {
				continue
			}
			for _, id := range e.Endpoints {
				add(id)
			}
		}
	}
	return ids, full || s.seeds == nil
}

// reads reports whether a change can matter to the pattern: a node or edge of one of
// its types (any node when a variable has no type), or a node read by id. It is the
// same test the dispatch index makes, so a stream sees every change set that has one.
func (s *spec) reads(ch herald.Change) bool {
	switch ch.Kind {
	case herald.NodeChange:
		if s.anyType || s.refs[nodeOf(ch).ID] {
			return true
		}
		types, n := changeTypes(ch)
		for _, t := range types[:n] {
			if s.types[t] {
				return true
			}
		}
	case herald.EdgeChange:
		return s.types[edgeOf(ch).Type]
	}
	return false
}

// relevant reports whether cs has a change the pattern reads.
func (s *spec) relevant(cs *herald.ChangeSet) bool {
	for _, ch := range cs.Changes {
		if s.reads(ch) {
			return true
		}
	}
	return false
}

// around runs the pattern seeded on each of ids in tx: every match that binds one of
// them, by key.
func (s *spec) around(tx *graph.Tx, ids []herald.NodeID, at time.Time, intr func() error) (map[string]row, error) {
	ctx := s.evalCtx(tx, at, intr)
	out := map[string]row{}
	for _, id := range ids {
		n := tx.Node(id)
		if n == nil {
			continue
		}
		for _, sd := range s.seeds {
			if sd.typ != "" && sd.typ != n.Type {
				continue
			}
			_, err := sd.plan.RunSeeded(tx, ctx, n, func(r eval.Row) error { return s.collect(ctx, out, r) })
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// diff turns the matches before and after a commit into events at the commit's
// position: removals first, then additions and changes, each in the watch's ordering.
// binds holds, per event, the match's variables after the commit (nil for removals).
func (s *spec) diff(before, after map[string]row, seq, tick uint64) (evs []herald.Event, binds []eval.Row) {
	for _, r := range s.sorted(before) {
		if _, ok := after[r.key]; !ok {
			evs = append(evs, herald.Event{Type: herald.EventRemoved, Match: r.value, Seq: seq, Tick: tick})
			binds = append(binds, nil)
		}
	}
	for _, r := range s.sorted(after) {
		old, ok := before[r.key]
		switch {
		case !ok:
			evs = append(evs, herald.Event{Type: herald.EventAdded, Match: r.value, Seq: seq, Tick: tick})
			binds = append(binds, r.bind)
		case herald.Compare(old.value, r.value) != 0:
			evs = append(evs, herald.Event{Type: herald.EventChanged, Match: r.value, Prev: old.value, Seq: seq, Tick: tick})
			binds = append(binds, r.bind)
		}
	}
	return evs, binds
}

// joinResult is a commit's events for a join watch, shared by identical watches.
type joinResult struct {
	evs   []herald.Event
	binds []eval.Row
}

// applyJoin decides cs for a join watch on the graph just before and just after it.
func (w *watcher) applyJoin(cs *herald.ChangeSet) ([]herald.Event, []eval.Row, error) {
	p := w.past
	if !w.sp.relevant(cs) {
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
	ids, full := w.sp.touched(cs)
	// The change sets between the last one applied and cs that the stream did not get
	// read nothing the pattern reads (the dispatch index makes the same test as
	// spec.reads): skip them rather than take them in.
	p.advance(cs.Seq - 1)
	var before, after map[string]row
	err := w.withPast(p, func(g *graph.Graph) error {
		run := func() (map[string]row, error) {
			intr := w.interrupt()
			if full {
				return w.sp.matches(p.view(g), cs.Time, intr)
			}
			return w.sp.around(p.view(g), ids, cs.Time, intr)
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
	evs, binds := w.sp.diff(before, after, cs.Seq, cs.Tick)
	markLast(evs)
	if w.shareID != 0 {
		w.svc.cache.put(key, joinResult{evs: append([]herald.Event(nil), evs...), binds: binds})
	}
	return evs, binds, nil
}
