package standing

import (
	"sort"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// Query is a WATCH statement compiled for its mode: what it matches, how it decides
// and projects a node, how its matches are ordered, and its options. A Query is
// immutable once compiled: its exported fields are read, never written, so the opens
// of one statement share it (Core.Open), however many streams run it.
type Query struct {
	// Text is the canonical statement: in watch mode as written, with its handle; in
	// consume mode without it (a handle names a stream, not the group's watch).
	Text string
	// Ident is what members of a consume group agree on: the text and the values of its
	// $params.
	Ident   string
	Mode    option.Mode
	Opts    option.Set
	Stmt    *ast.WatchStmt // the statement compiled, read-only
	File    *token.File    // resolves the statement's positions
	Params  map[string]herald.Value
	Actor   herald.NodeID // #self and current_actor()
	Session string        // current_session()

	vars        []string // node and edge variables of the pattern, in order: the match key
	slots       []int
	alone       bool   // the pattern is one node binding
	single      bool   // decided on change images: alone, and reads no node by id (watch mode)
	subject     string // the first node variable: a consume match's message
	typ         string // its type
	subjectSlot int
	types       map[string]bool // node and edge types the pattern mentions
	plan        *graph.Plan     // unseeded, WHERE and filter included: the full match
	seeded      *graph.Plan     // the same, seeded on the subject
	seeds       []seedPlan      // seeded on each node variable (watch-mode joins; nil: run in full)
	anyType     bool            // a node variable has no type: any node change may matter
	proj        *graph.Projection
	whole       bool // RETURN of the bare subject: the match is the node itself
	rowOnly     bool // the projection reads the binding row alone (readsRowOnly)
	seedOnly    bool // every node of the subject type matches, with plain queue data
	aggregate   bool
	silent      bool       // no RETURN: only trigger failures are reported
	onMatch     []ast.Stmt // ON MATCH DO
	selfRef     bool       // the statement reads #self
	// refs are nodes the conditions read by id (`#p0.status`): in watch mode a change
	// to one wakes the query, which then re-runs (it is not decided on images alone).
	refs map[herald.NodeID]bool
	// eq is the index entry of a watch-mode single-node pattern whose WHERE requires
	// v.attr = a constant: only changes of nodes with that value concern it.
	eq    *EqKey
	order []orderKey
	// Consume mode's queue data.
	fairness, weight, availableAt eval.Func
	clock                         herald.Clock
	canRead                       func(string) error
}

type orderKey struct {
	fn   eval.Func
	desc bool
}

// Source is what a Query is compiled from: a parsed WATCH and what it runs with.
type Source struct {
	Stmt    *ast.WatchStmt
	File    *token.File
	Mode    option.Mode
	Params  map[string]herald.Value
	Actor   herald.NodeID
	Session string
	Clock   herald.Clock
	// CanRead is the eval.Context.CanRead of every evaluation (nil: no check), see
	// Reads.
	CanRead func(string) error
}

// Compile compiles src into a Query, or says why the statement cannot run in its mode.
func Compile(src Source) (*Query, error) {
	q := &Query{Mode: src.Mode, Stmt: src.Stmt, File: src.File, Params: src.Params, Actor: src.Actor,
		Session: src.Session, clock: src.Clock, canRead: src.CanRead, types: map[string]bool{}}
	if src.Mode == option.Consume {
		return q, q.compileConsume()
	}
	return q, q.compileWatch()
}

func (q *Query) errAt(code herald.Code, pos token.Pos, format string, args ...any) error {
	return eval.ErrorAt(q.File, code, pos, format, args...)
}

// options decodes the statement's options for its mode.
func (q *Query) options() error {
	set, oerr := option.Decode(q.Stmt, q.Mode)
	if oerr != nil {
		code := herald.CodeInvalidQuery
		switch oerr.Kind {
		case option.Unsupported:
			code = herald.CodeNotImplemented
		case option.Syntax:
			code = herald.CodeSyntax
		}
		return q.errAt(code, oerr.Pos, "%s", oerr.Msg)
	}
	q.Opts = *set
	return nil
}

// compileWatch compiles a watch-mode statement.
func (q *Query) compileWatch() error {
	w := q.Stmt
	q.Text = printer.String(w)
	if w.OnMatch != nil {
		q.onMatch = w.OnMatch.Actions
	}
	if err := q.options(); err != nil {
		return err
	}
	ret := w.Return
	if ret == nil {
		if w.OnMatch == nil {
			return q.errAt(herald.CodeInvalidQuery, w.Pos(), "a watch needs RETURN (or ON MATCH DO)")
		}
		// A trigger-only watch still identifies its matches; it sends no match events.
		q.silent = true
		ret = &ast.ReturnClause{Items: []*ast.ReturnItem{{X: &ast.Ident{Name: firstVar(w)}}}}
	}
	for _, it := range ret.Items {
		if eval.HasAggregate(it.X) {
			if q.Opts.WinSize == 0 {
				return q.errAt(herald.CodeInvalidQuery, it.Pos(), "aggregates in a watch need a window: [window: tumbling(d)] or sliding(size, slide)")
			}
			q.aggregate = true
		}
	}
	q.readPattern()
	q.single = q.alone
	where := q.where()
	q.refs = nodeRefs(where, w.Return, q.Actor)
	if len(q.refs) > 0 {
		// The outcome depends on other nodes too: re-run and diff like a join.
		q.single = false
	}
	if q.single && w.Where != nil {
		q.eq = equalityKey(w.Where, q.subject, q.typ, q.Context, q.File)
	}
	if err := q.compilePlans(where, q.single); err != nil {
		return err
	}
	if !q.single {
		if err := q.compileSeeds(where); err != nil {
			return err
		}
	}
	var err error
	if q.proj, err = graph.CompileProjection(ret, nil, nil, nil, q.plan.Scope, q.File); err != nil {
		return err
	}
	if q.Opts.Immediate && (!q.single || q.Session == "" || q.Opts.WinSize > 0 || q.Opts.PerTick) {
		return q.errAt(herald.CodeNotImplemented, w.Pos(), "visibility: immediate needs a session, a single-node pattern, and no window or deliver_on: tick")
	}
	q.whole = q.alone && bareSubject(ret, q.subject)
	return q.compileOrder()
}

// compileConsume compiles a consume-mode statement.
func (q *Query) compileConsume() error {
	w := q.Stmt
	// The handle names the stream, not the watch: members of a group bind their own.
	bare := *w
	bare.Handle = nil
	q.Text = printer.String(&bare)
	q.Ident = identity(q.Text, q.Params)
	q.selfRef = readsSelf(w)
	if w.OnMatch != nil {
		return q.errAt(herald.CodeNotImplemented, w.OnMatch.Pos(), "ON MATCH DO triggers arrive with watch mode")
	}
	q.readPattern()
	if q.subject == "" {
		return q.errAt(herald.CodeInvalidQuery, w.Pattern.Pos(), "a consume watch needs a node variable: its first one is the message (the subject)")
	}
	if err := q.options(); err != nil {
		return err
	}
	if err := q.compilePlans(q.where(), true); err != nil {
		return err
	}
	if err := q.compileQueueData(); err != nil {
		return err
	}
	if w.Return == nil {
		return q.errAt(herald.CodeInvalidQuery, w.Pos(), "a consume watch needs RETURN")
	}
	var err error
	if q.proj, err = graph.CompileProjection(w.Return, nil, nil, nil, q.plan.Scope, q.File); err != nil {
		return err
	}
	for _, it := range w.Return.Items {
		if eval.HasAggregate(it.X) {
			return q.errAt(herald.CodeInvalidQuery, it.Pos(), "aggregates need a window, which is watch mode")
		}
	}
	q.whole = bareSubject(w.Return, q.subject)
	q.seedOnly = q.seeded.SeedOnly() && q.order == nil && q.fairness == nil && q.weight == nil && q.availableAt == nil
	q.rowOnly = readsRowOnly(w.Return)
	return nil
}

// readPattern reads the pattern's variables, types and subject.
func (q *Query) readPattern() {
	pattern := q.Stmt.Pattern
	for _, el := range pattern.Elems {
		switch x := el.(type) {
		case *ast.NodePattern:
			if q.subject == "" {
				q.subject, q.typ = x.Var.Name, x.Type.Name
			}
			q.types[x.Type.Name] = true
			q.vars = append(q.vars, x.Var.Name)
		case *ast.EdgePattern:
			q.types[x.Type.Name] = true
			if x.Var != nil {
				q.vars = append(q.vars, x.Var.Name)
			}
			for _, a := range x.Args {
				if id, ok := a.(*ast.Ident); ok && id.Name != "_" {
					q.vars = append(q.vars, id.Name)
				}
			}
		}
	}
	q.vars = dedupe(q.vars)
	q.alone = len(pattern.Elems) == 1 && q.subject != ""
}

// where is the statement's WHERE and its filter option, joined by AND.
func (q *Query) where() ast.Expr {
	where, filter := q.Stmt.Where, q.Opts.Filter
	switch {
	case filter == nil:
		return where
	case where == nil:
		return filter
	}
	return &ast.BinaryExpr{X: &ast.ParenExpr{X: where}, Op: token.AND, Y: &ast.ParenExpr{X: filter}}
}

// compilePlans plans the pattern in full and, with seeded, around its subject.
func (q *Query) compilePlans(where ast.Expr, seeded bool) error {
	var err error
	if q.plan, err = graph.Compile(q.Stmt.Pattern, where, nil, q.File); err != nil {
		return err
	}
	for _, v := range q.vars {
		slot, _, _ := q.plan.Scope.Lookup(v)
		q.slots = append(q.slots, slot)
	}
	q.subjectSlot, _, _ = q.plan.Scope.Lookup(q.subject)
	if seeded {
		q.seeded, err = graph.CompileSeeded(q.Stmt.Pattern, where, nil, q.subject, q.File)
	}
	return err
}

// compileOrder compiles the keys of `ordering: attribute(…)` in the pattern's scope.
func (q *Query) compileOrder() error {
	c := &eval.Compiler{Scope: q.plan.Scope, File: q.File}
	for _, k := range q.Opts.OrderKeys {
		f, err := c.Compile(k.X)
		if err != nil {
			return err
		}
		q.order = append(q.order, orderKey{fn: f, desc: k.Dir == token.DESC})
	}
	return nil
}

// compileQueueData compiles what consume mode queues a match by: its ordering keys,
// fairness key, weight and available_at, in the order the options give them.
func (q *Query) compileQueueData() error {
	c := &eval.Compiler{Scope: q.seeded.Scope, File: q.File}
	for _, ol := range q.Stmt.Options {
		for _, o := range ol.Options {
			var dst *eval.Func
			switch o.Name.Name {
			case "fairness":
				dst = &q.fairness
			case "weight":
				dst = &q.weight
			case "available_at":
				dst = &q.availableAt
			case "ordering":
				if err := q.compileOrder(); err != nil {
					return err
				}
				continue
			default:
				continue
			}
			f, err := c.Compile(o.Value)
			if err != nil {
				return err
			}
			*dst = f
		}
	}
	return nil
}

// Context returns a fresh evaluation context of the query: its parameters, actor and
// session, now() as the clock reads it, and its read check.
func (q *Query) Context() *eval.Context {
	return &eval.Context{Params: q.Params, Now: q.clock.Now().UTC(), Actor: q.Actor, Session: q.Session, CanRead: q.canRead}
}

// Single reports whether the query is decided on change images alone: its pattern is
// one node binding and its conditions read no other node by id (watch mode).
func (q *Query) Single() bool { return q.single }

// Alone reports whether the pattern is its subject alone (one node binding).
func (q *Query) Alone() bool { return q.alone }

// Subject returns the pattern's first node variable and its type.
func (q *Query) Subject() (name, typ string) { return q.subject, q.typ }

// Types returns the node and edge types the pattern mentions; the map is not to be
// changed.
func (q *Query) Types() map[string]bool { return q.types }

// Refs returns the nodes watch mode re-runs the query for (read by id); not to be
// changed.
func (q *Query) Refs() map[herald.NodeID]bool { return q.refs }

// Eq returns the value index entry of the query, or nil.
func (q *Query) Eq() *EqKey { return q.eq }

// AnyType reports whether a node variable of the pattern has no type.
func (q *Query) AnyType() bool { return q.anyType }

// Plan returns the unseeded plan: its scope lays out the binding rows.
func (q *Query) Plan() *graph.Plan { return q.plan }

// Projection returns the compiled RETURN.
func (q *Query) Projection() *graph.Projection { return q.proj }

// Aggregate reports whether RETURN has aggregates (a windowed watch).
func (q *Query) Aggregate() bool { return q.aggregate }

// Silent reports whether the query has no RETURN (a trigger-only watch).
func (q *Query) Silent() bool { return q.silent }

// OnMatch returns the trigger's actions (nil: none).
func (q *Query) OnMatch() []ast.Stmt { return q.onMatch }

// Ordered reports whether the query orders by attribute keys.
func (q *Query) Ordered() bool { return q.order != nil }

// OrderDesc reports whether the i-th ordering key is descending.
func (q *Query) OrderDesc(i int) bool { return q.order[i].desc }

// OrderKeys is how many ordering keys the query has.
func (q *Query) OrderKeys() int { return len(q.order) }

// Describe shows the statement and its parameters for an error message.
func (q *Query) Describe() string {
	if len(q.Params) == 0 {
		return q.Text
	}
	parts := make([]string, 0, len(q.Params))
	for _, n := range sortedNames(q.Params) {
		parts = append(parts, "$"+n+" = "+q.Params[n].String())
	}
	return q.Text + " with " + joinComma(parts)
}

// identity is a statement's text with its parameters' values, in the order of their
// names.
func identity(text string, params map[string]herald.Value) string {
	b := []byte(text)
	for _, n := range sortedNames(params) {
		b = append(b, 0)
		b = append(b, n...)
		b = append(b, 0)
		b = params[n].AppendBinary(b)
	}
	return string(b)
}

func sortedNames(params map[string]herald.Value) []string {
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func joinComma(parts []string) string {
	out := ""
	for i, p := range parts {
		if i > 0 {
			out += ", "
		}
		out += p
	}
	return out
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	out := xs[:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// firstVar names the pattern's first variable.
func firstVar(w *ast.WatchStmt) string {
	for _, el := range w.Pattern.Elems {
		if n, ok := el.(*ast.NodePattern); ok {
			return n.Var.Name
		}
	}
	for _, el := range w.Pattern.Elems {
		if e, ok := el.(*ast.EdgePattern); ok && e.Var != nil {
			return e.Var.Name
		}
	}
	return "_"
}

// bareSubject reports whether ret is the subject variable alone, without an alias.
func bareSubject(ret *ast.ReturnClause, subject string) bool {
	if subject == "" || len(ret.Items) != 1 || ret.Items[0].Alias != nil {
		return false
	}
	id, ok := ret.Items[0].X.(*ast.Ident)
	return ok && id.Name == subject
}

// readsSelf reports whether the statement reads #self.
func readsSelf(w *ast.WatchStmt) bool {
	found := false
	ast.Inspect(w, func(n ast.Node) bool {
		if r, ok := n.(*ast.NodeRef); ok && r.Name == "self" {
			found = true
		}
		return !found
	})
	return found
}

// readsRowOnly reports whether every item of r is a variable or a variable's attribute
// (`m`, `m.body`): it needs no clock, parameters or lookups, only the row.
func readsRowOnly(r *ast.ReturnClause) bool {
	for _, it := range r.Items {
		switch x := it.X.(type) {
		case *ast.Ident:
		case *ast.SelectorExpr:
			if _, ok := x.X.(*ast.Ident); !ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}
