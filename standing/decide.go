package standing

import (
	"sort"
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/eval"
)

// Deciding and projecting matches. Watch mode turns each match into a Row, keyed by the
// ids its variables bind and projected at once; consume mode decides a message and
// queues it by its Info, and projects it only when it is leased, so that a queued
// message holds no copy of its payload.

// Row is one current match of a watch-mode query: its key (the ids its variables
// bind), its variables (kept when a trigger or window needs them), its projected value
// and its ordering keys.
type Row struct {
	Key   string
	Bind  eval.Row
	Value herald.Value
	Order []herald.Value
}

// Project turns a binding row into the match value and its ordering keys.
func (q *Query) Project(ctx *eval.Context, r eval.Row) (herald.Value, []herald.Value, error) {
	var keys []herald.Value
	for _, k := range q.order {
		v, err := k.fn(ctx, r)
		if err != nil {
			return herald.Null, nil, err
		}
		keys = append(keys, v)
	}
	if q.whole {
		v, err := eval.NodeValue(r[q.slots[0]].Node)
		return v, keys, err
	}
	vals, err := q.proj.Single(ctx, r)
	if err != nil {
		return herald.Null, nil, err
	}
	return herald.Map(q.proj.Columns, vals), keys, nil
}

// Key names a binding: the ids bound to the pattern's variables.
func (q *Query) Key(r eval.Row) string {
	var b strings.Builder
	for i, slot := range q.slots {
		if i > 0 {
			b.WriteByte(0)
		}
		switch {
		case r[slot].Node != nil:
			b.WriteString(string(r[slot].Node.ID))
		case r[slot].Edge != nil:
			b.WriteString(string(r[slot].Edge.Key()))
		}
	}
	return b.String()
}

// EvalContext is the context of an evaluation in tx: now() is at, the time of the
// commit being decided (zero: the clock's now), so that replaying a commit later gives
// the same result; intr (nil: none) bounds the evaluation (engine.Engine.Interrupt).
func (q *Query) EvalContext(tx *graph.Tx, at time.Time, intr func() error) *eval.Context {
	ctx := q.Context()
	ctx.Node = tx.Node
	ctx.Interrupt = intr
	if !at.IsZero() {
		ctx.Now = at.UTC()
	}
	return ctx
}

// Matches runs the whole pattern in tx: every current match by key.
func (q *Query) Matches(tx *graph.Tx, at time.Time, intr func() error) (map[string]Row, error) {
	ctx := q.EvalContext(tx, at, intr)
	out := map[string]Row{}
	_, err := q.plan.Run(tx, ctx, func(r eval.Row) error { return q.collect(ctx, out, r) })
	return out, err
}

// collect adds binding r to out under its key, projected (the first binding of a key
// wins).
func (q *Query) collect(ctx *eval.Context, out map[string]Row, r eval.Row) error {
	k := q.Key(r)
	if _, dup := out[k]; dup {
		return nil
	}
	v, ord, err := q.Project(ctx, r)
	if err != nil {
		return err
	}
	out[k] = Row{Key: k, Value: v, Order: ord, Bind: q.keep(r)}
	return nil
}

// One decides a single-node query on one node image (nil: no match).
func (q *Query) One(tx *graph.Tx, n *herald.Node, at time.Time) (*Row, error) {
	if n == nil || n.Type != q.typ {
		return nil, nil
	}
	ctx := q.EvalContext(tx, at, nil)
	var out *Row
	_, err := q.seeded.RunSeeded(tx, ctx, n, func(r eval.Row) error {
		if out != nil {
			return nil
		}
		v, ord, err := q.Project(ctx, r)
		if err != nil {
			return err
		}
		out = &Row{Key: string(n.ID), Value: v, Order: ord, Bind: q.keep(r)}
		return nil
	})
	return out, err
}

// Sorted returns rows in the query's ordering (its attribute keys, then key).
func (q *Query) Sorted(m map[string]Row) []Row {
	out := make([]Row, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		for k, o := range q.order {
			if c := herald.Compare(out[i].Order[k], out[j].Order[k]); c != 0 {
				if o.desc {
					return c > 0
				}
				return c < 0
			}
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// keep copies a binding row when the query has a trigger or a window that will need it.
func (q *Query) keep(r eval.Row) eval.Row {
	if q.onMatch == nil && q.Opts.WinSize == 0 {
		return nil
	}
	return append(eval.Row(nil), r...)
}

// SingleRow returns a binding row of a single-node query that binds n, as a windowed
// watch records a node's match.
func (q *Query) SingleRow(n *herald.Node) eval.Row {
	r := make(eval.Row, q.plan.Scope.Len())
	r[q.slots[0]].Node = n
	return r
}
