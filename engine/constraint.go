package engine

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// Constraints: `constraint name: pattern => condition` declares that every binding of
// the pattern satisfies the condition (true; false or null break it). A commit is
// checked on the bindings that involve what it changed — the pattern is run seeded on
// each changed node and on the endpoints of each changed edge — and refused with E2010
// when one breaks a constraint; a new constraint is checked against all the data.
// User constraints are `_Constraint` nodes (their text), so they are durable and
// transactional like any data; the system's own constraints on Layer 0 types are built
// in.

const typeConstraint = "_Constraint"

// typeWatch is the type of the nodes that show open watches (written by the watch and
// delivery services).
const typeWatch = "_Watch"

func constraintNodeID(name string) herald.NodeID { return herald.NodeID("_c." + name) }

// systemConstraints are the Layer 0 invariants of the `_Watch` node, checked on every
// commit that writes one. A comparison with null is null in this language, so "has a
// pattern" is written with IS NOT NULL.
var systemConstraints = []string{
	`constraint _watch_has_pattern: w: _Watch => w.pattern IS NOT NULL AND length(w.pattern) > 0`,
	`constraint _watch_valid_mode: w: _Watch => w.mode = "watch" OR w.mode = "consume"`,
	`constraint _watch_valid_status: w: _Watch => w.status = "active" OR w.status = "paused" OR w.status = "cancelled"`,
	`constraint _watch_valid_on_full: w: _Watch => w.on_full = "drop" OR w.on_full = "block" OR w.on_full = "error"`,
}

// constraint is a compiled declaration.
type constraint struct {
	name  string
	text  string // the declaration as printed
	full  check  // the whole pattern, for checking all the data
	seeds []seedCheck
	edges map[string]bool // edge types of the pattern: a change to one may bind anew
}

// check is a plan with the condition compiled in its scope.
type check struct {
	plan *graph.Plan
	cond eval.Func
}

// seedCheck is the pattern planned around one node variable.
type seedCheck struct {
	check
	typ string // the variable's type; "" for an undeclared edge endpoint (any type)
}

// compileConstraint compiles a declaration. Parameters are not allowed: a constraint
// is checked at commits, where there are none.
func compileConstraint(s *ast.ConstraintDeclStmt, file *token.File) (*constraint, error) {
	errAt := func(pos token.Pos, format string, args ...any) error {
		return eval.ErrorAt(file, herald.CodeInvalidQuery, pos, format, args...)
	}
	if params := ast.Params(s); len(params) > 0 {
		return nil, errAt(s.Pos(), "a constraint cannot use parameters ($%s): it is checked at every commit, where there are none", params[0])
	}
	if eval.HasAggregate(s.Cond) {
		return nil, errAt(s.Cond.Pos(), "aggregates are not allowed in a constraint")
	}
	c := &constraint{name: s.Name.Name, text: printer.String(s), edges: map[string]bool{}}
	compile := func(seed string) (check, error) {
		p, err := graph.CompileSeeded(s.Pattern, nil, nil, seed, file)
		if err != nil {
			return check{}, err
		}
		f, err := (&eval.Compiler{Scope: p.Scope, File: file}).Compile(s.Cond)
		if err != nil {
			return check{}, err
		}
		return check{plan: p, cond: f}, nil
	}
	var err error
	if c.full, err = compile(""); err != nil {
		return nil, err
	}
	typed := map[string]string{}
	var vars []string
	seen := map[string]bool{}
	for _, el := range s.Pattern.Elems {
		if n, ok := el.(*ast.NodePattern); ok {
			typed[n.Var.Name] = n.Type.Name
			if !seen[n.Var.Name] {
				seen[n.Var.Name] = true
				vars = append(vars, n.Var.Name)
			}
		}
	}
	for _, el := range s.Pattern.Elems {
		e, ok := el.(*ast.EdgePattern)
		if !ok {
			continue
		}
		c.edges[e.Type.Name] = true
		for _, a := range e.Args {
			if id, ok := a.(*ast.Ident); ok && id.Name != "_" && !seen[id.Name] {
				seen[id.Name] = true
				vars = append(vars, id.Name)
			}
		}
	}
	for _, v := range vars {
		ch, err := compile(v)
		if err != nil {
			return nil, err
		}
		c.seeds = append(c.seeds, seedCheck{check: ch, typ: typed[v]})
	}
	return c, nil
}

// parseConstraint compiles a declaration's text (from a `_Constraint` node or the
// system's list).
func parseConstraint(text string) (*constraint, error) {
	script, file, err := parser.ParseScript(text)
	if err != nil {
		return nil, err
	}
	if len(script.Stmts) != 1 {
		return nil, fmt.Errorf("engine: constraint text holds %d statements", len(script.Stmts))
	}
	s, ok := script.Stmts[0].(*ast.ConstraintDeclStmt)
	if !ok {
		return nil, fmt.Errorf("engine: constraint text is a %T", script.Stmts[0])
	}
	return compileConstraint(s, file)
}

// constraints is the engine's registry: the system's and the committed user ones.
type constraints struct {
	system []*constraint
	user   map[string]*constraint
	// Derived from the two, so that a commit that cannot concern any constraint is
	// passed over at once.
	all       []*constraint
	nodeTypes map[string]bool // types of the variables
	edgeTypes map[string]bool
	anyType   bool // a variable of any type
}

// index recomputes the derived fields.
func (cs *constraints) index() {
	cs.all = append(cs.all[:0], cs.system...)
	names := make([]string, 0, len(cs.user))
	for n := range cs.user {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		cs.all = append(cs.all, cs.user[n])
	}
	cs.nodeTypes, cs.edgeTypes, cs.anyType = map[string]bool{}, map[string]bool{}, false
	for _, c := range cs.all {
		for _, sd := range c.seeds {
			if sd.typ == "" {
				cs.anyType = true
			}
			cs.nodeTypes[sd.typ] = true
		}
		for t := range c.edges {
			cs.edgeTypes[t] = true
		}
	}
}

// concerns reports whether changes touch a type some constraint reads, or a
// constraint itself.
func (cs *constraints) concerns(changes []herald.Change) bool {
	for _, ch := range changes {
		switch ch.Kind {
		case herald.NodeChange:
			if ch.NodeAfter != nil && (cs.anyType || cs.nodeTypes[ch.NodeAfter.Type]) {
				return true
			}
			if isDecl(ch.NodeBefore) || isDecl(ch.NodeAfter) {
				return true
			}
		case herald.EdgeChange:
			if ch.EdgeAfter != nil && cs.edgeTypes[ch.EdgeAfter.Type] {
				return true
			}
		}
	}
	return false
}

// loadConstraints compiles the system constraints and the user ones stored in g.
func loadConstraints(g *graph.Graph) (*constraints, error) {
	cs := &constraints{user: map[string]*constraint{}}
	for _, text := range systemConstraints {
		c, err := parseConstraint(text)
		if err != nil {
			return nil, fmt.Errorf("engine: system constraint: %w", err)
		}
		cs.system = append(cs.system, c)
	}
	tx := g.Begin()
	for _, id := range tx.NodesOfType(typeConstraint) {
		if err := cs.load(tx.Node(id)); err != nil {
			return nil, err
		}
	}
	cs.index()
	return cs, nil
}

func (cs *constraints) load(n *herald.Node) error {
	c, err := parseConstraint(n.Attrs.Get("text").AsString())
	if err != nil {
		return fmt.Errorf("engine: stored constraint %s: %w", n.ID, err)
	}
	cs.user[c.name] = c
	return nil
}

// applied updates the registry after a commit that changed `_Constraint` nodes.
func (cs *constraints) applied(changes []herald.Change) {
	if changed, _ := applyDecls(cs.user, changes); changed {
		cs.index()
	}
}

// active returns the constraints a transaction's commit must satisfy: the registry's,
// with the transaction's own declarations and drops applied.
func (cs *constraints) active(changes []herald.Change) ([]*constraint, error) {
	if !declares(changes) {
		return cs.all, nil
	}
	own := &constraints{system: cs.system, user: make(map[string]*constraint, len(cs.user))}
	for k, c := range cs.user {
		own.user[k] = c
	}
	if _, err := applyDecls(own.user, changes); err != nil {
		return nil, err
	}
	own.index()
	return own.all, nil
}

// declares reports whether changes write or delete a `_Constraint` node.
func declares(changes []herald.Change) bool {
	for _, ch := range changes {
		if ch.Kind == herald.NodeChange && (isDecl(ch.NodeBefore) || isDecl(ch.NodeAfter)) {
			return true
		}
	}
	return false
}

func isDecl(n *herald.Node) bool { return n != nil && n.Type == typeConstraint }

// applyDecls applies the `_Constraint` writes and deletes of changes to user, reporting
// whether there were any.
func applyDecls(user map[string]*constraint, changes []herald.Change) (changed bool, err error) {
	for _, ch := range changes {
		if ch.Kind != herald.NodeChange {
			continue
		}
		if isDecl(ch.NodeBefore) {
			delete(user, ch.NodeBefore.Attrs.Get("name").AsString())
			changed = true
		}
		if isDecl(ch.NodeAfter) {
			c, err := parseConstraint(ch.NodeAfter.Attrs.Get("text").AsString())
			if err != nil {
				return changed, fmt.Errorf("engine: stored constraint %s: %w", ch.NodeAfter.ID, err)
			}
			user[c.name] = c
			changed = true
		}
	}
	return changed, nil
}

// verify checks the bindings that a transaction's changes can have made or altered,
// on the transaction's view of the graph.
func (cs *constraints) verify(tx *graph.Tx, changes []herald.Change, now func() eval.Context) error {
	if !cs.concerns(changes) {
		return nil
	}
	active, err := cs.active(changes)
	if err != nil {
		return err
	}
	if len(active) == 0 {
		return nil
	}
	// The nodes whose bindings may have changed: changed nodes that still exist, and
	// the endpoints of edges that exist now.
	var seeds []*herald.Node
	seen := map[herald.NodeID]bool{}
	add := func(id herald.NodeID) {
		if seen[id] {
			return
		}
		seen[id] = true
		if n := tx.Node(id); n != nil {
			seeds = append(seeds, n)
		}
	}
	edgeTypes := map[string]bool{}
	for _, c := range active {
		for t := range c.edges {
			edgeTypes[t] = true
		}
	}
	for _, ch := range changes {
		switch {
		case ch.Kind == herald.NodeChange && ch.NodeAfter != nil:
			add(ch.NodeAfter.ID)
		case ch.Kind == herald.EdgeChange && ch.EdgeAfter != nil && edgeTypes[ch.EdgeAfter.Type]:
			for _, id := range ch.EdgeAfter.Endpoints {
				add(id)
			}
		}
	}
	if len(seeds) == 0 {
		return nil
	}
	ctx := now()
	ctx.Node = tx.Node
	for _, c := range active {
		for _, sd := range c.seeds {
			for _, n := range seeds {
				if sd.typ != "" && sd.typ != n.Type {
					continue
				}
				if err := c.run(tx, &ctx, sd.check, n); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// run checks the bindings of ch (seeded on seed, or all of them when seed is nil).
func (c *constraint) run(tx *graph.Tx, ctx *eval.Context, ch check, seed *herald.Node) error {
	var broken error
	_, err := ch.plan.RunSeeded(tx, ctx, seed, func(r eval.Row) error {
		v, err := ch.cond(ctx, r)
		if err == nil && v.Kind() == herald.KindBool && v.AsBool() {
			return nil
		}
		broken = c.violation(ch.plan.Scope, r, v, err)
		return errStop
	})
	if broken != nil {
		return broken
	}
	if err != nil && err != errStop {
		return err
	}
	return nil
}

// errStop ends a constraint's enumeration at its first broken binding.
var errStop = errors.New("stop")

// violation describes a binding that breaks c.
func (c *constraint) violation(scope *eval.Scope, r eval.Row, v herald.Value, err error) error {
	var parts []string
	names := scope.Names()
	for slot, b := range r {
		name := names[slot]
		switch {
		case b.Node != nil:
			parts = append(parts, fmt.Sprintf("%s = #%s", name, b.Node.ID))
		case b.Edge != nil:
			parts = append(parts, fmt.Sprintf("%s = %s(%s)", name, b.Edge.Type, joinIDs(b.Edge.Endpoints)))
		}
	}
	sort.Strings(parts)
	why := "its condition is " + v.String()
	if err != nil {
		why = "its condition fails: " + herald.AsError(err).Message
	}
	return herald.Errorf(herald.CodeConstraint, "constraint %s does not hold for %s (%s)", c.name, strings.Join(parts, ", "), why)
}

func joinIDs(ids []herald.NodeID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = "#" + string(id)
	}
	return strings.Join(s, ", ")
}

// declareConstraint executes `constraint name: pattern => condition`: it checks the
// data as it stands and records the declaration as a `_Constraint` node.
func (x *execution) declareConstraint(s *ast.ConstraintDeclStmt) (Result, error) {
	if herald.IsSystemType(s.Name.Name) {
		return Result{}, x.errAt(herald.CodeSealedType, s.Name.Pos(), "constraint names starting with _ are reserved for the system's constraints")
	}
	c, err := compileConstraint(s, x.file)
	if err != nil {
		return Result{}, err
	}
	id := constraintNodeID(c.name)
	if old := x.tx.Node(id); old != nil && old.Attrs.Get("text").AsString() == c.text {
		return Result{}, nil // declaring the same constraint again is a no-op
	}
	ctx := x.evalCtx()
	if err := c.run(x.tx, ctx, c.full, nil); err != nil {
		return Result{}, err
	}
	x.tx.PutNode(&herald.Node{ID: id, Type: typeConstraint, Attrs: herald.AttrsOf(map[string]herald.Value{
		"name":       herald.String(c.name),
		"text":       herald.String(c.text),
		"created_at": herald.Timestamp(x.e.clock.Now().UTC()),
	})})
	x.stats.ConstraintsDeclared++
	return Result{Stats: x.stats}, nil
}

// dropConstraint executes `DROP CONSTRAINT name`.
func (x *execution) dropConstraint(s *ast.DropConstraintStmt) (Result, error) {
	if herald.IsSystemType(s.Name.Name) {
		return Result{}, x.errAt(herald.CodeSealedType, s.Name.Pos(), "the system's constraints cannot be dropped")
	}
	id := constraintNodeID(s.Name.Name)
	if x.tx.Node(id) == nil {
		return Result{}, x.errAt(herald.CodeNoConstraint, s.Name.Pos(), "no constraint %s", s.Name.Name)
	}
	x.tx.DeleteNode(id)
	x.stats.ConstraintsDropped++
	return Result{Stats: x.stats}, nil
}
