package graph

import (
	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/token"
)

type stepKind uint8

const (
	stepNode stepKind = iota + 1
	stepEdge
)

type access uint8

const (
	accessBound    access = iota + 1 // variable already bound: check only
	accessID                         // lookup by id
	accessAttr                       // equality index on an attribute
	accessScan                       // scan every node of the type
	accessAdj                        // edges through a bound endpoint
	accessEdgeScan                   // scan every edge of the type
)

type edgeArg struct {
	slot  int       // variable slot, or -1
	konst eval.Func // constant node id (#ref, $param), or nil
	typ   string    // the type a node pattern gives the variable ("" when none does)
}

type step struct {
	kind    stepKind
	typ     string
	slot    int // node variable (node step) or edge variable (edge step, -1 when unbound)
	access  access
	key     eval.Func // id or attribute value for accessID/accessAttr
	attr    string
	args    []edgeArg
	via     int // for accessAdj: index into args of the endpoint used
	filters []eval.Func
}

// Plan is a compiled pattern with its WHERE clause, ready to run against a Tx.
type Plan struct {
	Scope   *eval.Scope
	steps   []step
	pre     []eval.Func // conjuncts without variables
	desc    string
	prebind map[int]*herald.Node
	seed    int // slot bound by RunSeeded, or -1
}

// Describe names how the plan reads its first pattern element, e.g. "index Job.priority".
func (p *Plan) Describe() string { return p.desc }

// Compile plans pattern (with where, which may be nil) against a scope. Variables in
// outer that the pattern does not bind are visible to WHERE and actions as pre-bound
// nodes (session variables).
func Compile(pattern *ast.Pattern, where ast.Expr, outer map[string]*herald.Node, file *token.File) (*Plan, error) {
	return compile(pattern, where, outer, "", file)
}

// CompileSeeded plans pattern for evaluation around one node: the node variable seed is
// bound by RunSeeded instead of being searched for. Consume and watch mode use it to
// decide whether a changed node matches.
func CompileSeeded(pattern *ast.Pattern, where ast.Expr, outer map[string]*herald.Node, seed string, file *token.File) (*Plan, error) {
	return compile(pattern, where, outer, seed, file)
}

func compile(pattern *ast.Pattern, where ast.Expr, outer map[string]*herald.Node, seed string, file *token.File) (*Plan, error) {
	c := &eval.Compiler{Scope: eval.NewScope(), File: file}
	p := &Plan{Scope: c.Scope, prebind: map[int]*herald.Node{}, seed: -1}
	type elem struct {
		node *ast.NodePattern
		edge *ast.EdgePattern
		done bool
	}
	var elems []*elem
	nodeType := map[string]string{}
	bound := map[int]bool{}

	// Declare the node bindings first, so pattern variables shadow session variables
	// wherever in the pattern they appear.
	for _, el := range pattern.Elems {
		if x, ok := el.(*ast.NodePattern); ok {
			if t, ok := nodeType[x.Var.Name]; ok && t != x.Type.Name {
				return nil, c.Error(herald.CodeInvalidQuery, x.Pos(), "variable %s is bound to both %s and %s", x.Var.Name, t, x.Type.Name)
			}
			nodeType[x.Var.Name] = x.Type.Name
			c.Scope.Declare(x.Var.Name, eval.NodeVar)
		}
	}
	for _, el := range pattern.Elems {
		switch x := el.(type) {
		case *ast.NodePattern:
			elems = append(elems, &elem{node: x})
		case *ast.EdgePattern:
			if x.Var != nil {
				if _, kind, ok := c.Scope.Lookup(x.Var.Name); ok {
					what := "bound twice"
					if kind == eval.NodeVar {
						what = "already a node variable"
					}
					return nil, c.Error(herald.CodeInvalidQuery, x.Var.Pos(), "variable %s is %s", x.Var.Name, what)
				}
				c.Scope.Declare(x.Var.Name, eval.EdgeVar)
			}
			for _, a := range x.Args {
				if id, ok := a.(*ast.Ident); ok && id.Name != "_" {
					if _, k, ok := c.Scope.Lookup(id.Name); ok && k == eval.EdgeVar {
						return nil, c.Error(herald.CodeInvalidQuery, id.Pos(), "edge variable %s used as an endpoint", id.Name)
					}
					if _, _, ok := c.Scope.Lookup(id.Name); !ok {
						if n, ok := outer[id.Name]; ok {
							bound[c.Scope.Declare(id.Name, eval.NodeVar)] = true
							p.prebind[c.Scope.Len()-1] = n
							continue
						}
						c.Scope.Declare(id.Name, eval.NodeVar)
					}
				}
			}
			elems = append(elems, &elem{edge: x})
		}
	}
	// The seed may be any node variable, an edge endpoint the pattern does not declare
	// included.
	if seed != "" {
		slot, kind, ok := c.Scope.Lookup(seed)
		if !ok || kind != eval.NodeVar {
			return nil, c.Error(herald.CodeInvalidQuery, pattern.Pos(), "the pattern does not bind node variable %s", seed)
		}
		bound[slot] = true
		p.seed = slot
	}
	// Session variables referenced only from WHERE (or from later actions).
	for name, n := range outer {
		if _, _, ok := c.Scope.Lookup(name); !ok {
			slot := c.Scope.Declare(name, eval.NodeVar)
			bound[slot] = true
			p.prebind[slot] = n
		}
	}

	// Split WHERE into conjuncts, each with the slots it needs.
	type conj struct {
		expr  ast.Expr
		slots []int
		used  bool
		fn    eval.Func
	}
	var conjs []*conj
	var split func(e ast.Expr)
	split = func(e ast.Expr) {
		if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.AND {
			split(b.X)
			split(b.Y)
			return
		}
		if pe, ok := e.(*ast.ParenExpr); ok {
			split(pe.X)
			return
		}
		conjs = append(conjs, &conj{expr: e})
	}
	if where != nil {
		if eval.HasAggregate(where) {
			return nil, c.Error(herald.CodeInvalidQuery, where.Pos(), "aggregates are not allowed in WHERE")
		}
		split(where)
	}
	for _, cj := range conjs {
		fn, err := c.Compile(cj.expr)
		if err != nil {
			return nil, err
		}
		cj.fn = fn
		for _, name := range eval.Vars(cj.expr) {
			if slot, _, ok := c.Scope.Lookup(name); ok {
				cj.slots = append(cj.slots, slot)
			}
		}
	}
	ready := func(cj *conj) bool {
		for _, s := range cj.slots {
			if !bound[s] {
				return false
			}
		}
		return true
	}
	for _, cj := range conjs {
		if ready(cj) {
			cj.used = true
			p.pre = append(p.pre, cj.fn)
		}
	}

	// keyFor looks for a conjunct `v.attr = expr` (or `v = expr`, `v.id = expr`) whose other
	// side needs only bound variables.
	keyFor := func(slot int) (attr string, fn eval.Func, ok bool) {
		for _, cj := range conjs {
			b, isBin := cj.expr.(*ast.BinaryExpr)
			if !isBin || b.Op != token.EQL {
				continue
			}
			for _, side := range [2][2]ast.Expr{{b.X, b.Y}, {b.Y, b.X}} {
				a, other := attrOf(c.Scope, side[0], slot)
				if a == "" {
					continue
				}
				_ = other
				okOther := true
				for _, name := range eval.Vars(side[1]) {
					if s, _, found := c.Scope.Lookup(name); !found || !bound[s] || s == slot {
						okOther = false
					}
				}
				if !okOther {
					continue
				}
				// The same operand semantics as WHERE's `=`: a bare node variable is its id.
				f, err := c.Operand(side[1])
				if err != nil {
					continue
				}
				return a, f, true
			}
		}
		return "", nil, false
	}

	for remaining := len(elems); remaining > 0; remaining-- {
		best, bestCost := -1, 1<<30
		var bestStep step
		for i, el := range elems {
			if el.done {
				continue
			}
			var st step
			cost := 0
			if el.node != nil {
				slot, _, _ := c.Scope.Lookup(el.node.Var.Name)
				st = step{kind: stepNode, typ: el.node.Type.Name, slot: slot}
				switch attr, fn, ok := keyFor(slot); {
				case bound[slot]:
					st.access, cost = accessBound, 0
				case ok && attr == "id":
					st.access, st.key, cost = accessID, fn, 1
				case ok:
					st.access, st.key, st.attr, cost = accessAttr, fn, attr, 2
				default:
					st.access, cost = accessScan, 4
				}
			} else {
				e := el.edge
				st = step{kind: stepEdge, typ: e.Type.Name, slot: -1, via: -1}
				if e.Var != nil {
					st.slot, _, _ = c.Scope.Lookup(e.Var.Name)
				}
				for j, a := range e.Args {
					arg := edgeArg{slot: -1}
					switch x := a.(type) {
					case *ast.Ident:
						if x.Name != "_" {
							arg.slot, _, _ = c.Scope.Lookup(x.Name)
							arg.typ = nodeType[x.Name]
						}
					default:
						fn, err := c.Compile(a)
						if err != nil {
							return nil, err
						}
						arg.konst = fn
					}
					if st.via < 0 && (arg.konst != nil || (arg.slot >= 0 && bound[arg.slot])) {
						st.via = j
					}
					st.args = append(st.args, arg)
				}
				if st.via >= 0 {
					st.access, cost = accessAdj, 3
				} else {
					st.access, cost = accessEdgeScan, 5
				}
			}
			if cost < bestCost {
				best, bestCost, bestStep = i, cost, st
			}
		}
		elems[best].done = true
		st := bestStep
		if st.kind == stepNode {
			bound[st.slot] = true
		} else {
			if st.slot >= 0 {
				bound[st.slot] = true
			}
			for _, a := range st.args {
				if a.slot >= 0 {
					bound[a.slot] = true
				}
			}
		}
		for _, cj := range conjs {
			if !cj.used && ready(cj) {
				cj.used = true
				st.filters = append(st.filters, cj.fn)
			}
		}
		if len(p.steps) == 0 {
			p.desc = describe(st)
		}
		p.steps = append(p.steps, st)
	}
	for _, cj := range conjs {
		if !cj.used {
			// Only possible for variables nothing binds.
			return nil, c.Error(herald.CodeUnknownVariable, cj.expr.Pos(), "WHERE uses a variable the pattern does not bind")
		}
	}
	return p, nil
}

// attrOf reports the attribute that e reads from the node variable in slot: "id" for
// `v` or `v.id`, the attribute name for `v.attr`, "" otherwise.
func attrOf(s *eval.Scope, e ast.Expr, slot int) (string, ast.Expr) {
	switch x := e.(type) {
	case *ast.Ident:
		if sl, k, ok := s.Lookup(x.Name); ok && sl == slot && k == eval.NodeVar {
			return "id", x
		}
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			if sl, k, ok := s.Lookup(id.Name); ok && sl == slot && k == eval.NodeVar {
				return x.Sel.Name, x
			}
		}
	case *ast.ParenExpr:
		return attrOf(s, x.X, slot)
	}
	return "", nil
}

func describe(st step) string {
	switch st.access {
	case accessBound:
		return "bound " + st.typ
	case accessID:
		return "id " + st.typ
	case accessAttr:
		return "index " + st.typ + "." + st.attr
	case accessScan:
		return "scan " + st.typ
	case accessAdj:
		return "adjacency " + st.typ
	}
	return "scan edges " + st.typ
}

// Run enumerates the matches of p in tx, calling fn with each complete row (which fn must
// not retain; copy it). It returns the number of candidate bindings examined.
func (p *Plan) Run(tx *Tx, ctx *eval.Context, fn func(eval.Row) error) (scanned int, err error) {
	return p.RunSeeded(tx, ctx, nil, fn)
}

// RunSeeded is Run for a plan made by CompileSeeded: seed is the node bound to the seed
// variable (nil matches nothing).
func (p *Plan) RunSeeded(tx *Tx, ctx *eval.Context, seed *herald.Node, fn func(eval.Row) error) (scanned int, err error) {
	return p.run(tx, ctx, seed, fn, nil)
}

// SeedOnly reports whether the plan binds nothing but its seed and tests nothing but
// the seed's type: every node of that type is its one binding. Consume mode's queue
// shape (one node type, no WHERE) is such a plan, and skips running it per message.
func (p *Plan) SeedOnly() bool {
	if p.seed < 0 || len(p.pre) > 0 || len(p.prebind) > 0 || p.Scope.Len() != 1 || len(p.steps) != 1 {
		return false
	}
	st := &p.steps[0]
	return st.kind == stepNode && st.access == accessBound && st.slot == p.seed && len(st.filters) == 0
}

// RunLenient is Run, except that a condition that fails to evaluate (a division by zero,
// say) rejects only the binding at hand: bad hears of it, with the row as bound so far,
// and the enumeration goes on. Standing queries use it, so that one bad node cannot
// hold up the others.
func (p *Plan) RunLenient(tx *Tx, ctx *eval.Context, fn func(eval.Row) error, bad func(eval.Row, error)) (scanned int, err error) {
	return p.run(tx, ctx, nil, fn, bad)
}

func (p *Plan) run(tx *Tx, ctx *eval.Context, seed *herald.Node, fn func(eval.Row) error, bad func(eval.Row, error)) (scanned int, err error) {
	row := make(eval.Row, p.Scope.Len())
	for slot, n := range p.prebind {
		row[slot].Node = n
	}
	if p.seed >= 0 {
		if seed == nil {
			return 0, nil
		}
		row[p.seed].Node = seed
	}
	for _, f := range p.pre {
		ok, err := f(ctx, row)
		if err != nil && bad != nil {
			bad(row, err)
			return 0, nil
		}
		if err != nil || !eval.Truthy(ok) {
			return 0, err
		}
	}
	r := &runner{p: p, tx: tx, ctx: ctx, fn: fn, row: row, bad: bad}
	err = r.step(0)
	return r.scanned, err
}

type runner struct {
	p       *Plan
	tx      *Tx
	ctx     *eval.Context
	fn      func(eval.Row) error
	bad     func(eval.Row, error) // RunLenient: a binding whose conditions failed
	row     eval.Row
	scanned int
}

func (r *runner) step(i int) error {
	if i == len(r.p.steps) {
		return r.fn(r.row)
	}
	st := &r.p.steps[i]
	if st.kind == stepNode {
		return r.nodeStep(i, st)
	}
	return r.edgeStep(i, st)
}

func (r *runner) filtersPass(st *step) (bool, error) {
	for _, f := range st.filters {
		v, err := f(r.ctx, r.row)
		if err != nil && r.bad != nil {
			r.bad(r.row, err)
			return false, nil
		}
		if err != nil || !eval.Truthy(v) {
			return false, err
		}
	}
	return true, nil
}

// InterruptEvery is how many bindings a scan makes between asks of Context.Interrupt.
const InterruptEvery = 4096

// count counts one binding scanned and, every InterruptEvery, asks whether to stop.
func (r *runner) count() error {
	r.scanned++
	if r.scanned%InterruptEvery == 0 && r.ctx.Interrupt != nil {
		return r.ctx.Interrupt()
	}
	return nil
}

func (r *runner) tryNode(i int, st *step, n *herald.Node) error {
	if err := r.count(); err != nil {
		return err
	}
	if n == nil || n.Type != st.typ {
		return nil
	}
	r.row[st.slot].Node = n
	ok, err := r.filtersPass(st)
	if err == nil && ok {
		err = r.step(i + 1)
	}
	r.row[st.slot].Node = nil
	return err
}

func (r *runner) nodeStep(i int, st *step) error {
	if r.ctx.CanRead != nil {
		if err := r.ctx.CanRead(st.typ); err != nil {
			return err
		}
	}
	switch st.access {
	case accessBound:
		n := r.row[st.slot].Node
		if err := r.count(); err != nil {
			return err
		}
		if n == nil || n.Type != st.typ {
			return nil
		}
		ok, err := r.filtersPass(st)
		if err != nil || !ok {
			return err
		}
		return r.step(i + 1)
	case accessID:
		v, err := st.key(r.ctx, r.row)
		if err != nil || v.Kind() != herald.KindString {
			return err
		}
		return r.tryNode(i, st, r.tx.Node(herald.NodeID(v.AsString())))
	case accessAttr:
		v, err := st.key(r.ctx, r.row)
		if err != nil {
			return err
		}
		for _, id := range r.tx.NodesByAttr(st.typ, st.attr, v) {
			if err := r.tryNode(i, st, r.tx.Node(id)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, id := range r.tx.NodesOfType(st.typ) {
		if err := r.tryNode(i, st, r.tx.Node(id)); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) argID(a edgeArg) (herald.NodeID, bool, error) {
	if a.konst != nil {
		v, err := a.konst(r.ctx, r.row)
		if err != nil || v.Kind() != herald.KindString {
			return "", false, err
		}
		return herald.NodeID(v.AsString()), true, nil
	}
	if a.slot >= 0 {
		if n := r.row[a.slot].Node; n != nil {
			return n.ID, true, nil
		}
	}
	return "", false, nil
}

func (r *runner) edgeStep(i int, st *step) error {
	if r.ctx.CanRead != nil {
		if err := r.ctx.CanRead(st.typ); err != nil {
			return err
		}
	}
	var keys []herald.EdgeKey
	if st.access == accessAdj {
		id, ok, err := r.argID(st.args[st.via])
		if err != nil || !ok {
			return err
		}
		keys = r.tx.Incident(id)
	} else {
		keys = r.tx.EdgesOfType(st.typ)
	}
	for _, k := range keys {
		e := r.tx.Edge(k)
		if err := r.count(); err != nil {
			return err
		}
		if e == nil || e.Type != st.typ || len(e.Endpoints) != len(st.args) {
			continue
		}
		if err := r.bindArgs(i, st, e, 0); err != nil {
			return err
		}
	}
	return nil
}

// bindArgs checks or binds endpoint j.. of e, then continues with the next step.
func (r *runner) bindArgs(i int, st *step, e *herald.Edge, j int) error {
	if j == len(st.args) {
		if st.slot >= 0 {
			r.row[st.slot].Edge = e
			defer func() { r.row[st.slot].Edge = nil }()
		}
		ok, err := r.filtersPass(st)
		if err != nil || !ok {
			return err
		}
		return r.step(i + 1)
	}
	a := st.args[j]
	end := e.Endpoints[j]
	if a.konst == nil && a.slot < 0 { // `_`
		return r.bindArgs(i, st, e, j+1)
	}
	if a.konst != nil {
		id, ok, err := r.argID(a)
		if err != nil || !ok || id != end {
			return err // a constant that is not a node id matches nothing
		}
		return r.bindArgs(i, st, e, j+1)
	}
	if id, ok, _ := r.argID(a); ok {
		if id != end {
			return nil
		}
		return r.bindArgs(i, st, e, j+1)
	}
	n := r.tx.Node(end)
	if n == nil || (a.typ != "" && n.Type != a.typ) {
		return nil // the variable's node pattern would refuse it
	}
	if r.ctx.CanRead != nil {
		if err := r.ctx.CanRead(n.Type); err != nil {
			return err
		}
	}
	r.row[a.slot].Node = n
	err := r.bindArgs(i, st, e, j+1)
	r.row[a.slot].Node = nil
	return err
}
