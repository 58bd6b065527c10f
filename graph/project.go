package graph

import (
	"sort"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

type orderKey struct {
	col  int       // output column, or -1
	fn   eval.Func // evaluated on the binding row when col < 0
	desc bool
}

// Projection is a compiled RETURN clause with ORDER BY, LIMIT and OFFSET.
type Projection struct {
	Columns  []string
	items    []eval.Func
	aggs     []*eval.Agg
	isAgg    bool
	keyItems []int
	order    []orderKey
	limit    eval.Func
	offset   eval.Func
	distinct bool
	nslots   int
}

// ExprText renders an expression as canonical source, used for column names.
func ExprText(e ast.Expr) string { return printer.String(e) }

// CompileProjection compiles ret (and the optional ORDER BY / LIMIT / OFFSET) in scope.
func CompileProjection(ret *ast.ReturnClause, orderBy []*ast.OrderItem, limit, offset ast.Expr, scope *eval.Scope, file *token.File) (*Projection, error) {
	c := &eval.Compiler{Scope: scope, File: file, AllowAggs: true}
	p := &Projection{distinct: ret.Distinct, nslots: scope.Len()}
	texts := make([]string, len(ret.Items))
	for i, it := range ret.Items {
		before := len(c.Aggs)
		f, err := c.Compile(it.X)
		if err != nil {
			return nil, err
		}
		p.items = append(p.items, f)
		texts[i] = ExprText(it.X)
		name := texts[i]
		if it.Alias != nil {
			name = it.Alias.Name
		}
		p.Columns = append(p.Columns, name)
		if len(c.Aggs) > before {
			p.isAgg = true
		} else {
			p.keyItems = append(p.keyItems, i)
		}
	}
	p.aggs = c.Aggs
	plain := &eval.Compiler{Scope: scope, File: file}
	for _, o := range orderBy {
		k := orderKey{col: -1, desc: o.Dir == token.DESC}
		text := ExprText(o.X)
		if id, ok := o.X.(*ast.Ident); ok {
			for i, it := range ret.Items {
				if it.Alias != nil && it.Alias.Name == id.Name {
					k.col = i
				}
			}
		}
		if k.col < 0 {
			for i, t := range texts {
				if t == text {
					k.col = i
					break
				}
			}
		}
		if k.col < 0 {
			if p.isAgg || p.distinct {
				return nil, c.Error(herald.CodeInvalidQuery, o.Pos(), "ORDER BY %s must name a returned column when RETURN aggregates or is DISTINCT", text)
			}
			f, err := plain.Compile(o.X)
			if err != nil {
				return nil, err
			}
			k.fn = f
		}
		p.order = append(p.order, k)
	}
	var err error
	if limit != nil {
		if p.limit, err = plain.Compile(limit); err != nil {
			return nil, err
		}
	}
	if offset != nil {
		if p.offset, err = plain.Compile(offset); err != nil {
			return nil, err
		}
	}
	return p, nil
}

type outRow struct {
	vals []herald.Value
	keys []herald.Value // ORDER BY keys evaluated on the binding row
}

type group struct {
	first eval.Row
	accs  []*eval.Accumulator
}

// Collector gathers the rows of one query run.
type Collector struct {
	p      *Projection
	rows   []outRow
	groups map[string]*group
	gorder []string
}

// Single projects one binding row. A plain projection (no aggregate, LIMIT or OFFSET;
// DISTINCT and ORDER BY leave one row as it is) evaluates its items directly, without
// the Collector that a query's many rows need.
func (p *Projection) Single(ctx *eval.Context, row eval.Row) ([]herald.Value, error) {
	if p.Plain() {
		vals := make([]herald.Value, len(p.items))
		if err := p.SingleInto(ctx, row, vals); err != nil {
			return nil, err
		}
		return vals, nil
	}
	col := p.NewCollector()
	if err := col.Add(ctx, row); err != nil {
		return nil, err
	}
	rows, err := col.Rows(ctx)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, herald.Errorf(herald.CodeEvaluation, "the projection of one binding left no row")
	}
	return rows[0], nil
}

// Plain reports whether p has no aggregate, LIMIT or OFFSET: one binding row projects
// to one row (SingleInto).
func (p *Projection) Plain() bool { return !p.isAgg && p.limit == nil && p.offset == nil }

// SingleInto projects one binding row of a plain projection (Plain) into vals, one value
// per column.
func (p *Projection) SingleInto(ctx *eval.Context, row eval.Row, vals []herald.Value) error {
	for i, f := range p.items {
		v, err := f(ctx, row)
		if err != nil {
			return err
		}
		vals[i] = v
	}
	return nil
}

// NewCollector starts collecting rows for p.
func (p *Projection) NewCollector() *Collector {
	return &Collector{p: p, groups: map[string]*group{}}
}

// Add takes one binding row (which it copies if it keeps it).
func (cl *Collector) Add(ctx *eval.Context, row eval.Row) error {
	p := cl.p
	if p.isAgg {
		var kb []byte
		for _, i := range p.keyItems {
			v, err := p.items[i](ctx, row)
			if err != nil {
				return err
			}
			kb = v.AppendBinary(kb)
		}
		g := cl.groups[string(kb)]
		if g == nil {
			g = &group{first: append(eval.Row(nil), row...)}
			for _, a := range p.aggs {
				g.accs = append(g.accs, eval.NewAccumulator(a))
			}
			cl.groups[string(kb)] = g
			cl.gorder = append(cl.gorder, string(kb))
		}
		for _, acc := range g.accs {
			if err := acc.Add(ctx, row); err != nil {
				return herald.Errorf(herald.CodeEvaluation, "%v", err)
			}
		}
		return nil
	}
	out := outRow{vals: make([]herald.Value, len(p.items))}
	for i, f := range p.items {
		v, err := f(ctx, row)
		if err != nil {
			return err
		}
		out.vals[i] = v
	}
	for _, k := range p.order {
		if k.fn != nil {
			v, err := k.fn(ctx, row)
			if err != nil {
				return err
			}
			out.keys = append(out.keys, v)
		}
	}
	cl.rows = append(cl.rows, out)
	return nil
}

// Rows finishes the run: aggregates, DISTINCT, ORDER BY, OFFSET and LIMIT.
func (cl *Collector) Rows(ctx *eval.Context) ([][]herald.Value, error) {
	p := cl.p
	if p.isAgg {
		if len(cl.gorder) == 0 && len(p.keyItems) == 0 {
			g := &group{first: nil}
			for _, a := range p.aggs {
				g.accs = append(g.accs, eval.NewAccumulator(a))
			}
			cl.groups[""] = g
			cl.gorder = append(cl.gorder, "")
		}
		for _, k := range cl.gorder {
			g := cl.groups[k]
			aggs := make([]herald.Value, len(g.accs))
			for i, acc := range g.accs {
				aggs[i] = acc.Result()
			}
			gctx := *ctx
			gctx.Aggs = aggs
			row := g.first
			if row == nil {
				row = make(eval.Row, p.nslots)
			}
			out := outRow{vals: make([]herald.Value, len(p.items))}
			for i, f := range p.items {
				v, err := f(&gctx, row)
				if err != nil {
					return nil, err
				}
				out.vals[i] = v
			}
			cl.rows = append(cl.rows, out)
		}
	}
	rows := cl.rows
	if p.distinct {
		seen := map[string]bool{}
		kept := rows[:0]
		for _, r := range rows {
			var kb []byte
			for _, v := range r.vals {
				kb = v.AppendBinary(kb)
			}
			if !seen[string(kb)] {
				seen[string(kb)] = true
				kept = append(kept, r)
			}
		}
		rows = kept
	}
	if len(p.order) > 0 {
		sort.SliceStable(rows, func(i, j int) bool {
			ki := 0
			for _, k := range p.order {
				var a, b herald.Value
				if k.col >= 0 {
					a, b = rows[i].vals[k.col], rows[j].vals[k.col]
				} else {
					a, b = rows[i].keys[ki], rows[j].keys[ki]
					ki++
				}
				c := herald.Compare(a, b)
				if c == 0 {
					continue
				}
				if k.desc {
					return c > 0
				}
				return c < 0
			}
			return false
		})
	}
	off, lim, err := cl.bounds(ctx)
	if err != nil {
		return nil, err
	}
	if off > len(rows) {
		off = len(rows)
	}
	rows = rows[off:]
	if lim >= 0 && lim < len(rows) {
		rows = rows[:lim]
	}
	out := make([][]herald.Value, len(rows))
	for i, r := range rows {
		out[i] = r.vals
	}
	return out, nil
}

func (cl *Collector) bounds(ctx *eval.Context) (off, lim int, err error) {
	lim = -1
	get := func(f eval.Func, what string) (int, error) {
		v, err := f(ctx, nil)
		if err != nil {
			return 0, err
		}
		if v.Kind() != herald.KindInt || v.AsInt() < 0 {
			return 0, herald.Errorf(herald.CodeEvaluation, "%s must be a non-negative Int, got %s", what, v)
		}
		return int(v.AsInt()), nil
	}
	if cl.p.offset != nil {
		if off, err = get(cl.p.offset, "OFFSET"); err != nil {
			return
		}
	}
	if cl.p.limit != nil {
		if lim, err = get(cl.p.limit, "LIMIT"); err != nil {
			return
		}
	}
	return off, lim, nil
}
