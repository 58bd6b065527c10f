package watch

import (
	"sort"
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// Defaults of watch-mode options.
const (
	DefaultBuffer = 1000
)

// spec is a compiled watch-mode WATCH statement.
type spec struct {
	text     string
	vars     []string // node and edge variables of the pattern, in order: the match key
	slots    []int
	single   bool   // the pattern is one node binding: decided on change images
	typ      string // its type, when single
	subject  string
	types    map[string]bool // node and edge types the pattern mentions
	plan     *graph.Plan     // unseeded: the full match
	seeded   *graph.Plan     // seeded on the subject (single patterns)
	seeds    []seedPlan      // seeded on each node variable (other patterns; nil: run in full)
	anyType  bool            // a node variable has no type: a change to any node may matter
	proj     *graph.Projection
	whole    bool // RETURN of the bare single variable: the match is the node itself
	ctx      func() *eval.Context
	reliable bool
	buffer   int
	onFull   string // drop, block, error
	initial  string // full, none, since
	since    uint64 // tick for initial: since(n)
	heart    time.Duration
	order    []orderKey
	perTick  bool // deliver_on: tick — a tick's events go out together once it has ended
	// immediate: the watch also shows its own session's uncommitted changes.
	immediate bool
	onMatch   []ast.Stmt // ON MATCH DO: run once per new match, in a transaction of its own
	silent    bool       // no RETURN: only trigger failures are reported
	file      *token.File
	// Windows: every slide, the matches added or changed during the last size are
	// reported together — aggregated when RETURN has aggregates, else as one batch.
	winSize, winSlide time.Duration
	aggregate         bool
	// refs are nodes the conditions read by id (`#p0.status`): a change to one of them
	// wakes the watch, which then re-runs (such a watch is not decided on images alone).
	refs map[herald.NodeID]bool
	// canRead is the eval.Context.CanRead of every evaluation (see compile).
	canRead func(string) error
	// eq is the dispatch key of a single-node pattern whose WHERE requires v.attr = a
	// constant: only commits that touch a node with that value (before or after) wake it.
	eq *eqKey
}

// eqKey is an entry of the dispatch index by attribute value.
type eqKey struct{ typ, attr, val string }

type orderKey struct {
	fn   eval.Func
	desc bool
}

// compile parses and checks a watch-mode WATCH statement. reads (nil: none) is asked
// for each type an evaluation meets beyond what the statement names (see
// engine.WatchReads).
func compile(e *engine.Engine, query string, params map[string]herald.Value, actor herald.NodeID, sessionID string, reads func(string) error) (*spec, *ast.WatchStmt, error) {
	w, file, err := engine.ParseWatch(query, params)
	if err != nil {
		return nil, nil, err
	}
	errAt := func(code herald.Code, pos token.Pos, format string, args ...any) error {
		return eval.ErrorAt(file, code, pos, format, args...)
	}
	clk := e.Clock()
	s := &spec{text: printer.String(w), buffer: DefaultBuffer, onFull: "drop", initial: "full", types: map[string]bool{}}
	s.ctx = func() *eval.Context {
		return &eval.Context{Params: params, Now: clk.Now().UTC(), Actor: actor, Session: sessionID, CanRead: reads}
	}
	s.canRead = reads
	if w.OnMatch != nil {
		s.onMatch = w.OnMatch.Actions
	}
	s.file = file
	var filter ast.Expr
	var ordering *ast.OrderingExpr
	for _, ol := range w.Options {
		for _, o := range ol.Options {
			name := strings.ToLower(o.Name.Name)
			word := ""
			if id, ok := o.Value.(*ast.Ident); ok {
				word = strings.ToLower(id.Name)
			}
			constant := func() (herald.Value, error) {
				c := &eval.Compiler{Scope: eval.NewScope(), File: file}
				f, err := c.Compile(o.Value)
				if err != nil {
					return herald.Null, err
				}
				return f(s.ctx(), nil)
			}
			switch name {
			case "mode":
				if word != "watch" {
					return nil, nil, errAt(herald.CodeInvalidQuery, o.Pos(), "this is a watch-mode stream")
				}
			case "delivery":
				s.reliable = word == "reliable"
			case "buffer":
				v, err := constant()
				if err != nil {
					return nil, nil, err
				}
				if v.AsInt() < 1 {
					return nil, nil, errAt(herald.CodeInvalidQuery, o.Value.Pos(), "buffer must be at least 1")
				}
				s.buffer = int(v.AsInt())
			case "on_full":
				s.onFull = word
			case "initial":
				switch x := o.Value.(type) {
				case *ast.Ident:
					s.initial = word
				case *ast.CallExpr:
					s.initial = "since"
					c := &eval.Compiler{Scope: eval.NewScope(), File: file}
					f, err := c.Compile(x.Args[0])
					if err != nil {
						return nil, nil, err
					}
					v, err := f(s.ctx(), nil)
					if err != nil {
						return nil, nil, err
					}
					if v.Kind() != herald.KindInt || v.AsInt() < 0 {
						return nil, nil, errAt(herald.CodeInvalidQuery, x.Pos(), "since(n) needs a tick, a non-negative Int")
					}
					s.since = uint64(v.AsInt())
				}
			case "heartbeat":
				v, err := constant()
				if err != nil {
					return nil, nil, err
				}
				if v.Kind() != herald.KindDuration || v.AsDuration() <= 0 {
					return nil, nil, errAt(herald.CodeInvalidQuery, o.Value.Pos(), "heartbeat needs a positive duration")
				}
				s.heart = v.AsDuration()
			case "filter":
				filter = o.Value
			case "ordering":
				if x, ok := o.Value.(*ast.OrderingExpr); ok {
					ordering = x
				}
			case "visibility":
				s.immediate = word == "immediate"
			case "deliver_on":
				s.perTick = word == "tick"
			case "window":
				if call, ok := o.Value.(*ast.CallExpr); ok {
					var ds []time.Duration
					for _, a := range call.Args {
						c := &eval.Compiler{Scope: eval.NewScope(), File: file}
						f, err := c.Compile(a)
						if err != nil {
							return nil, nil, err
						}
						v, err := f(s.ctx(), nil)
						if err != nil {
							return nil, nil, err
						}
						if v.Kind() != herald.KindDuration || v.AsDuration() <= 0 {
							return nil, nil, errAt(herald.CodeInvalidQuery, a.Pos(), "window sizes are positive durations")
						}
						ds = append(ds, v.AsDuration())
					}
					s.winSize, s.winSlide = ds[0], ds[0]
					if len(ds) == 2 {
						s.winSlide = ds[1]
					}
				}
			case "group":
				// Watch mode ignores groups: every watcher sees every event.
			case "branch", "branches":
				return nil, nil, errAt(herald.CodeNotImplemented, o.Pos(), "branches are not supported")
			default:
				return nil, nil, errAt(herald.CodeInvalidQuery, o.Pos(), "%s is a consume-mode option; this watch is in watch mode", name)
			}
		}
	}
	ret := w.Return
	if ret == nil {
		if w.OnMatch == nil {
			return nil, nil, errAt(herald.CodeInvalidQuery, w.Pos(), "a watch needs RETURN (or ON MATCH DO)")
		}
		// A trigger-only watch still identifies its matches; it sends no match events.
		s.silent = true
		ret = &ast.ReturnClause{Items: []*ast.ReturnItem{{X: &ast.Ident{Name: s.firstVar(w)}}}}
	}
	for _, it := range ret.Items {
		if eval.HasAggregate(it.X) {
			if s.winSize == 0 {
				return nil, nil, errAt(herald.CodeInvalidQuery, it.Pos(), "aggregates in a watch need a window: [window: tumbling(d)] or sliding(size, slide)")
			}
			s.aggregate = true
		}
	}
	where := w.Where
	if filter != nil {
		if where == nil {
			where = filter
		} else {
			where = &ast.BinaryExpr{X: &ast.ParenExpr{X: where}, Op: token.AND, Y: &ast.ParenExpr{X: filter}}
		}
	}
	for _, el := range w.Pattern.Elems {
		switch x := el.(type) {
		case *ast.NodePattern:
			if s.subject == "" {
				s.subject, s.typ = x.Var.Name, x.Type.Name
			}
			s.types[x.Type.Name] = true
			s.vars = append(s.vars, x.Var.Name)
		case *ast.EdgePattern:
			s.types[x.Type.Name] = true
			if x.Var != nil {
				s.vars = append(s.vars, x.Var.Name)
			}
			for _, a := range x.Args {
				if id, ok := a.(*ast.Ident); ok && id.Name != "_" {
					s.vars = append(s.vars, id.Name)
				}
			}
		}
	}
	s.vars = dedupe(s.vars)
	s.single = len(w.Pattern.Elems) == 1 && s.subject != ""
	s.refs = nodeRefs(where, w.Return, actor)
	if len(s.refs) > 0 {
		// The outcome depends on other nodes too: re-run and diff like a join.
		s.single = false
	}
	if s.single && w.Where != nil {
		s.eq = equalityKey(w.Where, s.subject, s.typ, s.ctx, file)
	}
	if s.plan, err = graph.Compile(w.Pattern, where, nil, file); err != nil {
		return nil, nil, err
	}
	for _, v := range s.vars {
		slot, _, _ := s.plan.Scope.Lookup(v)
		s.slots = append(s.slots, slot)
	}
	if s.single {
		if s.seeded, err = graph.CompileSeeded(w.Pattern, where, nil, s.subject, file); err != nil {
			return nil, nil, err
		}
	} else if err := s.compileSeeds(w.Pattern, where, file); err != nil {
		return nil, nil, err
	}
	if s.proj, err = graph.CompileProjection(ret, nil, nil, nil, s.plan.Scope, file); err != nil {
		return nil, nil, err
	}
	if s.immediate && (!s.single || sessionID == "" || s.winSize > 0 || s.perTick) {
		return nil, nil, errAt(herald.CodeNotImplemented, w.Pos(), "visibility: immediate needs a session, a single-node pattern, and no window or deliver_on: tick")
	}
	if len(w.Pattern.Elems) == 1 && s.subject != "" && len(ret.Items) == 1 && ret.Items[0].Alias == nil {
		if id, ok := ret.Items[0].X.(*ast.Ident); ok && id.Name == s.subject {
			s.whole = true
		}
	}
	if ordering != nil {
		c := &eval.Compiler{Scope: s.plan.Scope, File: file}
		for _, k := range ordering.Keys {
			f, err := c.Compile(k.X)
			if err != nil {
				return nil, nil, err
			}
			s.order = append(s.order, orderKey{fn: f, desc: k.Dir == token.DESC})
		}
	}
	switch s.onFull {
	case "drop", "block", "error":
	default:
		return nil, nil, errAt(herald.CodeInvalidQuery, w.Pos(), "on_full must be drop, block or error")
	}
	return s, w, nil
}

// compileSeeds plans the pattern around each of its node variables, when every edge
// atom binds at least one of them (a commit touching an edge then touches a node a
// match binds). Otherwise s.seeds stays nil and the pattern runs in full.
func (s *spec) compileSeeds(pattern *ast.Pattern, where ast.Expr, file *token.File) error {
	typed := map[string]string{}
	var names []string
	for _, el := range pattern.Elems {
		if x, ok := el.(*ast.NodePattern); ok {
			if _, ok := typed[x.Var.Name]; !ok {
				names = append(names, x.Var.Name)
			}
			typed[x.Var.Name] = x.Type.Name
		}
	}
	edgeVars := map[string]bool{}
	for _, el := range pattern.Elems {
		if x, ok := el.(*ast.EdgePattern); ok && x.Var != nil {
			edgeVars[x.Var.Name] = true
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
				s.anyType = true
			}
		}
		if !binds {
			seedable = false
		}
	}
	if !seedable {
		return nil
	}
	for _, n := range names {
		p, err := graph.CompileSeeded(pattern, where, nil, n, file)
		if err != nil {
			return err
		}
		s.seeds = append(s.seeds, seedPlan{typ: typed[n], plan: p})
	}
	return nil
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

// row is one current match: its key and projected value.
type row struct {
	key   string
	bind  eval.Row // the variables of the match, kept for ON MATCH DO
	value herald.Value
	order []herald.Value
}

// project turns a binding row into the match value.
func (s *spec) project(ctx *eval.Context, r eval.Row) (herald.Value, []herald.Value, error) {
	var keys []herald.Value
	for _, k := range s.order {
		v, err := k.fn(ctx, r)
		if err != nil {
			return herald.Null, nil, err
		}
		keys = append(keys, v)
	}
	if s.whole {
		slot := s.slots[0]
		v, err := eval.NodeValue(r[slot].Node)
		return v, keys, err
	}
	vals, err := s.proj.Single(ctx, r)
	if err != nil {
		return herald.Null, nil, err
	}
	return herald.Map(s.proj.Columns, vals), keys, nil
}

// key names a binding: the ids bound to the pattern's variables.
func (s *spec) key(r eval.Row) string {
	var b strings.Builder
	for i, slot := range s.slots {
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

// evalCtx is the context of an evaluation in tx: now() is at, the time of the commit
// being decided (zero: the clock's now), so that replaying a commit later gives the
// same result; intr (nil: none) bounds the evaluation (engine.Engine.Interrupt).
func (s *spec) evalCtx(tx *graph.Tx, at time.Time, intr func() error) *eval.Context {
	ctx := s.ctx()
	ctx.Node = tx.Node
	ctx.Interrupt = intr
	if !at.IsZero() {
		ctx.Now = at.UTC()
	}
	return ctx
}

// matches runs the whole pattern in tx: every current match by key.
func (s *spec) matches(tx *graph.Tx, at time.Time, intr func() error) (map[string]row, error) {
	ctx := s.evalCtx(tx, at, intr)
	out := map[string]row{}
	_, err := s.plan.Run(tx, ctx, func(r eval.Row) error { return s.collect(ctx, out, r) })
	return out, err
}

// collect adds binding r to out under its key, projected (the first binding of a key
// wins).
func (s *spec) collect(ctx *eval.Context, out map[string]row, r eval.Row) error {
	k := s.key(r)
	if _, dup := out[k]; dup {
		return nil
	}
	v, ord, err := s.project(ctx, r)
	if err != nil {
		return err
	}
	out[k] = row{key: k, value: v, order: ord, bind: s.keep(r)}
	return nil
}

// one evaluates a single-node pattern on one node image (nil: no match).
func (s *spec) one(tx *graph.Tx, n *herald.Node, at time.Time) (*row, error) {
	if n == nil || n.Type != s.typ {
		return nil, nil
	}
	ctx := s.evalCtx(tx, at, nil)
	var out *row
	_, err := s.seeded.RunSeeded(tx, ctx, n, func(r eval.Row) error {
		if out != nil {
			return nil
		}
		v, ord, err := s.project(ctx, r)
		if err != nil {
			return err
		}
		out = &row{key: string(n.ID), value: v, order: ord, bind: s.keep(r)}
		return nil
	})
	return out, err
}

// sorted returns rows in the watch's ordering (its attribute keys, then key).
func (s *spec) sorted(m map[string]row) []row {
	out := make([]row, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		for k, o := range s.order {
			if c := herald.Compare(out[i].order[k], out[j].order[k]); c != 0 {
				if o.desc {
					return c > 0
				}
				return c < 0
			}
		}
		return out[i].key < out[j].key
	})
	return out
}

// equalityKey finds a top-level conjunct `v.attr = constant` (either way round) in where.
func equalityKey(where ast.Expr, v, typ string, ctx func() *eval.Context, file *token.File) *eqKey {
	var conj []ast.Expr
	var split func(e ast.Expr)
	split = func(e ast.Expr) {
		switch x := e.(type) {
		case *ast.BinaryExpr:
			if x.Op == token.AND {
				split(x.X)
				split(x.Y)
				return
			}
		case *ast.ParenExpr:
			split(x.X)
			return
		}
		conj = append(conj, e)
	}
	split(where)
	for _, c := range conj {
		b, ok := c.(*ast.BinaryExpr)
		if !ok || b.Op != token.EQL {
			continue
		}
		for _, pair := range [2][2]ast.Expr{{b.X, b.Y}, {b.Y, b.X}} {
			sel, ok := pair[0].(*ast.SelectorExpr)
			if !ok {
				continue
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok || id.Name != v || sel.Sel.Name == "id" || len(eval.Vars(pair[1])) > 0 {
				continue
			}
			f, err := (&eval.Compiler{Scope: eval.NewScope(), File: file}).Compile(pair[1])
			if err != nil {
				continue
			}
			val, err := f(ctx(), nil)
			if err != nil {
				continue
			}
			if vk := graph.ValueKey(val); vk != "" {
				return &eqKey{typ: typ, attr: sel.Sel.Name, val: vk}
			}
		}
	}
	return nil
}

// nodeRefs lists the nodes that conditions and projections read by id (`#id.attr`);
// `#self.attr` reads the session's actor (none without one: it fails to evaluate).
func nodeRefs(where ast.Expr, ret *ast.ReturnClause, actor herald.NodeID) map[herald.NodeID]bool {
	refs := map[herald.NodeID]bool{}
	visit := func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if r, ok := sel.X.(*ast.NodeRef); ok {
				switch {
				case r.Name != "self":
					refs[herald.NodeID(r.Name)] = true
				case actor != "":
					refs[actor] = true
				}
			}
		}
		return true
	}
	if where != nil {
		ast.Inspect(where, visit)
	}
	if ret != nil {
		ast.Inspect(ret, visit)
	}
	return refs
}

// keep copies a binding row when the watch has a trigger or a window that will need it.
func (s *spec) keep(r eval.Row) eval.Row {
	if s.onMatch == nil && s.winSize == 0 {
		return nil
	}
	return append(eval.Row(nil), r...)
}

// firstVar names the pattern's first variable.
func (s *spec) firstVar(w *ast.WatchStmt) string {
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
