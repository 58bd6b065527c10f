package engine

import (
	"sort"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/lang/token"
)

// Access is what one statement touches, decided from its syntax and the schema before
// anything of it runs: the grants it needs. It is the one place where a statement's
// reads and writes are found, and the grant check (Check) and the watch policy (Types)
// read nothing else, so a new statement form or a fast path cannot slip past them.
//
//   - Every node and edge type a pattern names is read (with the action of the
//     statement: read for MATCH and mutations, watch or consume for a WATCH).
//   - A variable bound only as an edge's endpoint reads the type the edge's declaration
//     gives that endpoint, or any type ("*") when the edge is undeclared or the endpoint
//     is Any. Give it a type (`s: Secret`) to narrow it.
//   - A node named by id (`#s1`, or a $param naming a node) is read with its type at the
//     time of the check; in a WATCH a node that does not exist yet could become any type.
//   - A session variable an expression reads is read with its node's type.
//   - SPAWN writes its type; SET, KILL, LINK and UNLINK write the type of what they
//     change — also inside a compound MATCH and a WATCH's ON MATCH DO.
//   - Schema changes, BEGIN SESSION AS, TICK and REDRIVE need admin; so does a MATCH
//     whose action is REDRIVE (`MATCH d: _DeadLetter … REDRIVE d`).
//   - KILL of a node of a type in AdminKill (a dead letter: `KILL #dl_1`,
//     `MATCH d: _DeadLetter … KILL d`) needs admin instead of a write grant; other
//     system types stay read-only (E2003).
//
// ACK, NACK and EXTEND need settle on the type of the message they settle, which only
// the delivery knows (the consume engine checks it); PAUSE, RESUME, CANCEL and ALTER
// need the watch's owner or admin (the watch services check it).
type Access struct {
	Admin bool
	Needs []Need
}

// AdminKill lists the system types whose nodes an admin may KILL: dead letters, which
// an operator purges once they are understood. Every other system type (`_Watch`,
// `_Token`, …) is the system's alone. The executor reads the same table, so the grant
// the check asks for and the write the executor allows cannot drift apart.
var AdminKill = map[string]bool{"_DeadLetter": true}

// Need is one grant a statement needs: Action on nodes or edges of Type ("*" means a
// type the check cannot know, which only a grant on every type covers).
type Need struct {
	Action string
	Type   string
	What   string // what needs it, for the error message
	Pos    token.Pos
}

// AccessEnv is what the analysis reads besides the statement: the schema and the nodes
// named by id (a transaction or a snapshot), the parameters, the session's variables
// and its actor.
type AccessEnv struct {
	Graph interface {
		Type(name string) *herald.TypeDecl
		Node(id herald.NodeID) *herald.Node
	}
	Params map[string]herald.Value
	Vars   map[string]herald.NodeID
	Actor  herald.NodeID
}

// AccessOf decides what st touches in env.
func AccessOf(st ast.Stmt, env AccessEnv) Access {
	b := &accessBuilder{env: env, read: herald.ActRead, vars: map[string]string{}}
	switch s := st.(type) {
	case *ast.NodeDeclStmt, *ast.EdgeDeclStmt, *ast.ConstraintDeclStmt, *ast.DropConstraintStmt,
		*ast.BeginSessionStmt, *ast.TickStmt, *ast.RedriveStmt:
		b.acc.Admin = true
	case *ast.MatchStmt:
		b.pattern(s.Pattern)
		b.exprs(s.Where, s.Return, s.OrderBy)
		for _, act := range s.Actions {
			b.action(act)
		}
		b.refs(s)
	case *ast.SpawnStmt, *ast.KillStmt, *ast.LinkStmt, *ast.UnlinkStmt, *ast.SetStmt:
		b.action(s)
		b.refs(s)
	case *ast.WatchStmt:
		b.read = herald.ActWatch
		if option.ModeOf(s) == option.Consume {
			b.read = herald.ActConsume
		}
		b.watching = true
		b.pattern(s.Pattern)
		b.exprs(s.Where, s.Return, nil)
		for _, ol := range s.Options {
			for _, o := range ol.Options {
				if o.Value != nil {
					b.expr(o.Value)
				}
			}
		}
		if s.OnMatch != nil {
			for _, act := range s.OnMatch.Actions {
				b.action(act)
			}
		}
		b.refs(s)
	}
	return b.acc
}

type accessBuilder struct {
	env      AccessEnv
	read     string            // the action reads need: read, watch or consume
	watching bool              // a WATCH: a node named by id may appear later, as any type
	vars     map[string]string // the statement's variables and the type each may be
	spawned  map[string]bool   // variables SPAWN binds: what they read was written here
	acc      Access
	seen     map[Need]bool
}

func (b *accessBuilder) need(action, typ, what string, pos token.Pos) {
	n := Need{Action: action, Type: typ, What: what, Pos: pos}
	key := Need{Action: action, Type: typ}
	if b.seen == nil {
		b.seen = map[Need]bool{}
	}
	if b.seen[key] {
		return
	}
	b.seen[key] = true
	b.acc.Needs = append(b.acc.Needs, n)
}

// pattern reads every type the pattern names and the types its endpoint variables may
// bind.
func (b *accessBuilder) pattern(p *ast.Pattern) {
	if p == nil {
		return
	}
	for _, el := range p.Elems {
		if x, ok := el.(*ast.NodePattern); ok {
			b.vars[x.Var.Name] = x.Type.Name
			b.need(b.read, x.Type.Name, "the pattern's type "+x.Type.Name, x.Type.Pos())
		}
	}
	for _, el := range p.Elems {
		x, ok := el.(*ast.EdgePattern)
		if !ok {
			continue
		}
		typ := x.Type.Name
		b.need(b.read, typ, "the pattern's edge type "+typ, x.Type.Pos())
		if x.Var != nil {
			b.vars[x.Var.Name] = typ
		}
		decl := b.env.Graph.Type(typ)
		for j, a := range x.Args {
			switch r := a.(type) {
			case *ast.Ident:
				if r.Name == "_" {
					continue
				}
				if _, ok := b.vars[r.Name]; ok {
					continue
				}
				if id, ok := b.env.Vars[r.Name]; ok {
					b.nodeNeed(b.read, id, "the session variable "+r.Name, r.Pos())
					continue
				}
				ep := "*"
				if decl != nil && decl.Kind == herald.EdgeDecl && j < len(decl.Endpoints) && decl.Endpoints[j].Type != "" {
					ep = decl.Endpoints[j].Type
				}
				b.vars[r.Name] = ep
				what := "the endpoint variable " + r.Name + " of " + typ
				if ep == "*" {
					what += ", which may bind a node of any type (give it one: " + r.Name + ": Type)"
				}
				b.need(b.read, ep, what, r.Pos())
			case *ast.ParamRef:
				b.nodeNeed(b.read, b.paramID(r), "the node $"+r.Name+" names", r.Pos())
			}
		}
	}
}

// exprs reads the session variables WHERE, RETURN and ORDER BY use.
func (b *accessBuilder) exprs(where ast.Expr, ret *ast.ReturnClause, order []*ast.OrderItem) {
	b.expr(where)
	if ret != nil {
		for _, it := range ret.Items {
			b.expr(it.X)
		}
	}
	for _, o := range order {
		b.expr(o.X)
	}
}

// expr reads the session variables e uses that the statement does not bind itself.
func (b *accessBuilder) expr(e ast.Expr) {
	if e == nil {
		return
	}
	for _, name := range eval.Vars(e) {
		if _, ok := b.vars[name]; ok {
			continue
		}
		if id, ok := b.env.Vars[name]; ok {
			b.nodeNeed(b.read, id, "the session variable "+name, e.Pos())
		}
	}
}

// action records what one mutation writes, and the session variables it reads.
func (b *accessBuilder) action(st ast.Stmt) {
	switch s := st.(type) {
	case *ast.SpawnStmt:
		b.need(herald.ActWrite, s.Type.Name, "SPAWN of "+s.Type.Name, s.Type.Pos())
		if s.Body != nil {
			for _, a := range s.Body.Assigns {
				b.expr(a.Value)
			}
		}
		if s.Var != nil {
			b.vars[s.Var.Name] = s.Type.Name
			if b.spawned == nil {
				b.spawned = map[string]bool{}
			}
			b.spawned[s.Var.Name] = true
		}
		b.returning(s.Returning)
	case *ast.KillStmt:
		b.target(s.Target, "KILL")
		b.returning(s.Returning)
	case *ast.RedriveStmt:
		// `MATCH d: _DeadLetter … REDRIVE d`: the letters it binds are read by the
		// pattern; putting their messages back is an operator's act.
		b.acc.Admin = true
	case *ast.SetStmt:
		for _, a := range s.Assigns {
			if sel, ok := a.Target.(*ast.SelectorExpr); ok {
				b.target(sel.X, "SET")
			}
			b.expr(a.Value)
		}
		b.returning(s.Returning)
	case *ast.LinkStmt:
		b.edgeWrite(s.Edge, "LINK")
		if s.Body != nil {
			for _, a := range s.Body.Assigns {
				b.expr(a.Value)
			}
		}
		b.returning(s.Returning)
	case *ast.UnlinkStmt:
		b.edgeWrite(s.Edge, "UNLINK")
		b.returning(s.Returning)
	}
}

// edgeWrite records LINK or UNLINK of an edge: a write of its type, and a read of each
// endpoint named by a session variable or a parameter (#id endpoints are read by refs).
func (b *accessBuilder) edgeWrite(e *ast.EdgePattern, verb string) {
	if e == nil {
		return
	}
	b.need(herald.ActWrite, e.Type.Name, verb+" of "+e.Type.Name, e.Type.Pos())
	for _, a := range e.Args {
		switch r := a.(type) {
		case *ast.Ident:
			if _, ok := b.vars[r.Name]; !ok {
				if id, ok := b.env.Vars[r.Name]; ok {
					b.nodeNeed(b.read, id, "the session variable "+r.Name, r.Pos())
				}
			}
		case *ast.ParamRef:
			b.nodeNeed(b.read, b.paramID(r), "the node $"+r.Name+" names", r.Pos())
		}
	}
}

// target records a write of what x names: a variable (node or edge), #id or $param.
func (b *accessBuilder) target(x ast.Expr, verb string) {
	switch r := x.(type) {
	case *ast.Ident:
		if typ, ok := b.vars[r.Name]; ok {
			if verb == "KILL" && AdminKill[typ] {
				b.acc.Admin = true
				return
			}
			b.need(herald.ActWrite, typ, verb+" of "+r.Name, r.Pos())
		} else if id, ok := b.env.Vars[r.Name]; ok {
			b.writeNode(verb, id, verb+" of "+r.Name, r.Pos())
		}
	case *ast.NodeRef:
		id := herald.NodeID(r.Name)
		if r.Name == "self" {
			id = b.env.Actor
		}
		b.writeNode(verb, id, verb+" of #"+r.Name, r.Pos())
	case *ast.ParamRef:
		b.writeNode(verb, b.paramID(r), verb+" of the node $"+r.Name+" names", r.Pos())
	}
}

// writeNode records verb of the node id: a write of its type, or admin for a KILL of a
// type in AdminKill.
func (b *accessBuilder) writeNode(verb string, id herald.NodeID, what string, pos token.Pos) {
	if verb == "KILL" && id != "" {
		if n := b.env.Graph.Node(id); n != nil && AdminKill[n.Type] {
			b.acc.Admin = true
			return
		}
	}
	b.nodeNeed(herald.ActWrite, id, what, pos)
}

// returning reads what RETURNING projects, but for what the statement spawned itself.
func (b *accessBuilder) returning(r *ast.ReturnClause) {
	if r == nil {
		return
	}
	for _, it := range r.Items {
		for _, name := range eval.Vars(it.X) {
			if b.spawned[name] {
				continue
			}
			if typ, ok := b.vars[name]; ok {
				b.need(b.read, typ, "RETURNING "+name, it.Pos())
			} else if id, ok := b.env.Vars[name]; ok {
				b.nodeNeed(b.read, id, "RETURNING "+name, it.Pos())
			}
		}
	}
}

// refs reads every node the statement names by id (`#s1`) in an expression or a
// pattern. A node a mutation only names — the target of KILL or SET, an endpoint of LINK
// or UNLINK — is written (target, edgeWrite), not read.
func (b *accessBuilder) refs(st ast.Node) {
	named := map[*ast.NodeRef]bool{}
	ast.Inspect(st, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.KillStmt:
			if r, ok := x.Target.(*ast.NodeRef); ok {
				named[r] = true
			}
		case *ast.SetStmt:
			for _, a := range x.Assigns {
				if sel, ok := a.Target.(*ast.SelectorExpr); ok {
					if r, ok := sel.X.(*ast.NodeRef); ok {
						named[r] = true
					}
				}
			}
		case *ast.LinkStmt:
			b.namedArgs(x.Edge, named)
		case *ast.UnlinkStmt:
			b.namedArgs(x.Edge, named)
		}
		return true
	})
	ast.Inspect(st, func(n ast.Node) bool {
		if r, ok := n.(*ast.NodeRef); ok && r.Name != "self" && !named[r] {
			b.nodeNeed(b.read, herald.NodeID(r.Name), "#"+r.Name, r.Pos())
		}
		return true
	})
}

func (b *accessBuilder) namedArgs(e *ast.EdgePattern, named map[*ast.NodeRef]bool) {
	if e == nil {
		return
	}
	for _, a := range e.Args {
		if r, ok := a.(*ast.NodeRef); ok {
			named[r] = true
		}
	}
}

// nodeNeed records action on the type of node id. A node that does not exist is read by
// nothing now; in a WATCH it may come to exist as any type.
func (b *accessBuilder) nodeNeed(action string, id herald.NodeID, what string, pos token.Pos) {
	if id == "" {
		return
	}
	if n := b.env.Graph.Node(id); n != nil {
		b.need(action, n.Type, what+" (a "+n.Type+")", pos)
		return
	}
	if b.watching && action == b.read {
		b.need(action, "*", what+", which does not exist yet and may appear as any type", pos)
	}
}

func (b *accessBuilder) paramID(r *ast.ParamRef) herald.NodeID {
	v := b.env.Params[r.Name]
	if v.Kind() != herald.KindString {
		return ""
	}
	return herald.NodeID(v.AsString())
}

// Check reports the first grant p lacks: E8001 for a WATCH's watch or consume grant,
// E4013 otherwise, positioned in file. A nil principal (no authentication) may do
// everything.
func (a Access) Check(p *herald.Principal, file *token.File) error {
	if p == nil {
		return nil
	}
	if a.Admin && !p.Can(herald.ActAdmin, "") {
		return herald.Errorf(herald.CodePermissionDenied, "%s may not do this: it needs the admin grant", p.Name)
	}
	for _, n := range a.Needs {
		if p.Can(n.Action, n.Type) {
			continue
		}
		code := herald.CodePermissionDenied
		if n.Action == herald.ActWatch || n.Action == herald.ActConsume {
			code = herald.CodeWatchPatternDenied
		}
		return eval.ErrorAt(file, code, n.Pos, "%s may not %s %s: %s needs the grant %s:%s", p.Name, n.Action, typeWord(n.Type), n.What, n.Action, n.Type)
	}
	return nil
}

func typeWord(t string) string {
	if t == "*" {
		return "every type"
	}
	return t
}

// Types lists the concrete types the statement touches, sorted: what a watch policy
// decides on.
func (a Access) Types() []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range a.Needs {
		if n.Type != "*" && !seen[n.Type] {
			seen[n.Type] = true
			out = append(out, n.Type)
		}
	}
	sort.Strings(out)
	return out
}
