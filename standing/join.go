package standing

import (
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
)

// Running and diffing joins. A pattern of several elements (or a single-node one whose
// conditions read other nodes) is decided by seeded evaluation: a commit can only add,
// remove or change matches that bind a node it touched (or an endpoint of an edge it
// touched), so the pattern is run seeded on each such node, once on the graph just
// before the commit and once just after, and the two results are compared. A commit
// that touches a node the conditions read by id, or a pattern that cannot be seeded,
// runs in full instead.

// seedPlan is the pattern planned around one of its node variables.
type seedPlan struct {
	typ  string // the variable's type; "" for an endpoint variable of any type
	plan *graph.Plan
}

// compileSeeds plans the pattern around each of its node variables, when every edge
// atom binds at least one of them (a commit touching an edge then touches a node a
// match binds). Otherwise q.seeds stays nil and the pattern runs in full.
func (q *Query) compileSeeds(where ast.Expr) error {
	pattern := q.Stmt.Pattern
	typed := map[string]string{}
	var names []string
	edgeVars := map[string]bool{}
	for _, el := range pattern.Elems {
		switch x := el.(type) {
		case *ast.NodePattern:
			if _, ok := typed[x.Var.Name]; !ok {
				names = append(names, x.Var.Name)
			}
			typed[x.Var.Name] = x.Type.Name
		case *ast.EdgePattern:
			if x.Var != nil {
				edgeVars[x.Var.Name] = true
			}
		}
	}
	seedable := true
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	for _, el := range pattern.Elems {
		x, ok := el.(*ast.EdgePattern)
		if !ok {
			continue
		}
		binds := false
		for _, a := range x.Args {
			id, ok := a.(*ast.Ident)
			if !ok || id.Name == "_" || edgeVars[id.Name] {
				continue
			}
			binds = true
			if !seen[id.Name] {
				seen[id.Name] = true
				names = append(names, id.Name)
			}
			if _, ok := typed[id.Name]; !ok {
				q.anyType = true
			}
		}
		seedable = seedable && binds
	}
	if !seedable {
		return nil
	}
	for _, n := range names {
		p, err := graph.CompileSeeded(pattern, where, nil, n, q.File)
		if err != nil {
			return err
		}
		q.seeds = append(q.seeds, seedPlan{typ: typed[n], plan: p})
	}
	return nil
}

// Touched lists the nodes a commit can have changed matches through, and whether the
// pattern must be run in full for it.
func (q *Query) Touched(cs *herald.ChangeSet) (ids []herald.NodeID, full bool) {
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
			id := NodeOf(ch).ID
			if q.refs[id] {
				full = true
			}
			add(id)
		case herald.EdgeChange:
			e := EdgeOf(ch)
			if !q.types[e.Type] {
				continue
			}
			for _, id := range e.Endpoints {
				add(id)
			}
		}
	}
	return ids, full || q.seeds == nil
}

// Reads reports whether a change can matter to the pattern: a node or edge of one of
// its types (any node when a variable has no type), or a node read by id. It is the
// same test the Index makes, so a query sees every change set that has one.
func (q *Query) Reads(ch herald.Change) bool {
	switch ch.Kind {
	case herald.NodeChange:
		if q.anyType || q.refs[NodeOf(ch).ID] {
			return true
		}
		types, n := ChangeTypes(ch)
		for _, t := range types[:n] {
			if q.types[t] {
				return true
			}
		}
	case herald.EdgeChange:
		return q.types[EdgeOf(ch).Type]
	}
	return false
}

// Relevant reports whether cs has a change the pattern reads.
func (q *Query) Relevant(cs *herald.ChangeSet) bool {
	for _, ch := range cs.Changes {
		if q.Reads(ch) {
			return true
		}
	}
	return false
}

// Around runs the pattern seeded on each of ids in tx: every match that binds one of
// them, by key.
func (q *Query) Around(tx *graph.Tx, ids []herald.NodeID, at time.Time, intr func() error) (map[string]Row, error) {
	ctx := q.EvalContext(tx, at, intr)
	out := map[string]Row{}
	for _, id := range ids {
		n := tx.Node(id)
		if n == nil {
			continue
		}
		for _, sd := range q.seeds {
			if sd.typ != "" && sd.typ != n.Type {
				continue
			}
			_, err := sd.plan.RunSeeded(tx, ctx, n, func(r eval.Row) error { return q.collect(ctx, out, r) })
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Diff turns the matches before and after a commit into events at the commit's
// position: removals first, then additions and changes, each in the query's ordering.
// binds holds, per event, the match's variables after the commit (nil for removals).
func (q *Query) Diff(before, after map[string]Row, seq, tick uint64) (evs []herald.Event, binds []eval.Row) {
	for _, r := range q.Sorted(before) {
		if _, ok := after[r.Key]; !ok {
			evs = append(evs, herald.Event{Type: herald.EventRemoved, Match: r.Value, Seq: seq, Tick: tick})
			binds = append(binds, nil)
		}
	}
	for _, r := range q.Sorted(after) {
		old, ok := before[r.Key]
		switch {
		case !ok:
			evs = append(evs, herald.Event{Type: herald.EventAdded, Match: r.Value, Seq: seq, Tick: tick})
			binds = append(binds, r.Bind)
		case herald.Compare(old.Value, r.Value) != 0:
			evs = append(evs, herald.Event{Type: herald.EventChanged, Match: r.Value, Prev: old.Value, Seq: seq, Tick: tick})
			binds = append(binds, r.Bind)
		}
	}
	return evs, binds
}

// NodeOf returns a node change's node: its image before, or after when it is new.
func NodeOf(ch herald.Change) *herald.Node {
	if ch.NodeBefore != nil {
		return ch.NodeBefore
	}
	return ch.NodeAfter
}

// EdgeOf returns an edge change's edge: its image before, or after when it is new.
func EdgeOf(ch herald.Change) *herald.Edge {
	if ch.EdgeBefore != nil {
		return ch.EdgeBefore
	}
	return ch.EdgeAfter
}
