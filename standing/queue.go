package standing

import (
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/eval"
)

// Info is what consume mode's queues need of a match: its ordering keys, fairness key
// and weight, and when it becomes available.
type Info struct {
	Keys        []herald.Value
	FairKey     string
	Weight      int
	AvailableAt time.Time
}

// plainInfo is the queue data of a match of a query with no keys, fairness or
// available_at: shared, since it never changes.
var plainInfo = &Info{Weight: 1}

// Match decides a consume query around node n in tx: whether n matches as its subject
// (nil when it does not), and if so its queue data and the binding row (nil for a query
// that needs none: every node of the type matches and Project binds n itself).
func (q *Query) Match(tx *graph.Tx, n *herald.Node, intr func() error) (*Info, eval.Row, error) {
	if n == nil || n.Type != q.typ {
		return nil, nil, nil
	}
	if q.seedOnly {
		return plainInfo, nil, nil
	}
	ctx := q.Context()
	ctx.Node = tx.Node
	ctx.Interrupt = intr
	var row eval.Row
	_, err := q.seeded.RunSeeded(tx, ctx, n, func(r eval.Row) error {
		if row == nil {
			row = append(eval.Row(nil), r...)
		}
		return nil
	})
	if err != nil || row == nil {
		return nil, nil, err
	}
	info, err := q.info(ctx, row)
	return info, row, err
}

// Each runs the whole pattern in tx, within intr, and calls found once per subject it
// binds, with the queue data of its first binding that evaluates; skip leaves subjects
// out. A binding whose ordering, fairness or scheduling expressions fail goes to failed
// with its subject ("" when it failed before one was bound); it never holds up the
// others.
func (q *Query) Each(tx *graph.Tx, intr func() error, skip func(herald.NodeID) bool, found func(*herald.Node, *Info), failed func(herald.NodeID, error)) error {
	ctx := q.Context()
	ctx.Node = tx.Node
	ctx.Interrupt = intr
	slot := q.subjectSlot
	seen := map[herald.NodeID]bool{}
	_, err := q.plan.RunLenient(tx, ctx, func(row eval.Row) error {
		n := row[slot].Node
		if n == nil || seen[n.ID] || skip(n.ID) {
			return nil
		}
		info, err := q.info(ctx, row)
		if err != nil {
			failed(n.ID, err)
			return nil
		}
		seen[n.ID] = true
		found(n, info)
		return nil
	}, func(row eval.Row, err error) {
		var id herald.NodeID
		if n := row[slot].Node; n != nil {
			id = n.ID
		}
		failed(id, err)
	})
	return err
}

func (q *Query) info(ctx *eval.Context, row eval.Row) (*Info, error) {
	if q.order == nil && q.fairness == nil && q.weight == nil && q.availableAt == nil {
		return plainInfo, nil
	}
	m := &Info{Weight: 1}
	for _, k := range q.order {
		v, err := k.fn(ctx, row)
		if err != nil {
			return nil, err
		}
		m.Keys = append(m.Keys, v)
	}
	if q.fairness != nil {
		v, err := q.fairness(ctx, row)
		if err != nil {
			return nil, err
		}
		if v.Kind() == herald.KindString {
			m.FairKey = v.AsString()
		} else if !v.IsNull() {
			m.FairKey = v.String()
		}
	}
	if q.weight != nil {
		v, err := q.weight(ctx, row)
		if err != nil {
			return nil, err
		}
		if v.Kind() == herald.KindInt && v.AsInt() > 0 {
			m.Weight = int(v.AsInt())
		}
	}
	if q.availableAt != nil {
		v, err := q.availableAt(ctx, row)
		if err != nil {
			return nil, err
		}
		if v.Kind() == herald.KindTimestamp {
			m.AvailableAt = v.AsTime()
		}
	}
	return m, nil
}

// ProjectMatch returns the consume match value of n's binding row: the RETURN, or the
// subject node itself for `RETURN v`. A nil row is the plain queue's (see Match), where
// n is the one binding: it is bound in scratch, a row of one slot the caller owns.
func (q *Query) ProjectMatch(tx *graph.Tx, n *herald.Node, row, scratch eval.Row) (herald.Value, error) {
	if row == nil {
		if q.whole {
			return eval.NodeValue(n)
		}
		row = scratch
		row[0].Node = n
		defer func() { row[0].Node = nil }()
	}
	if q.whole {
		return eval.NodeValue(row[q.subjectSlot].Node)
	}
	ctx := &noContext // variables and their attributes read the row alone
	if !q.rowOnly {
		ctx = q.Context()
		ctx.Node = tx.Node
	}
	if q.proj.Plain() {
		m, vals := herald.NewMapOf(q.proj.Columns) // the map and its values in one allocation
		if err := q.proj.SingleInto(ctx, row, vals); err != nil {
			return herald.Null, err
		}
		return m, nil
	}
	vals, err := q.proj.Single(ctx, row)
	if err != nil {
		return herald.Null, err
	}
	return herald.MapOf(q.proj.Columns, vals), nil
}

// noContext is the evaluation context of projections that read nothing but the row;
// they never write it, so every such projection shares it.
var noContext eval.Context

// Lazy reports whether a consume group can read its backlog from the type's arrival
// index as it goes, instead of queueing every match up front: the pattern is the
// subject alone, ordered by arrival, without fairness keys.
func (q *Query) Lazy() bool {
	return q.alone && q.order == nil && q.fairness == nil
}
