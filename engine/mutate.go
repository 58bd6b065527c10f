package engine

import (
	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/token"
)

// action applies one mutation with row bound in scope. In a compound MATCH (compound
// true) a node already killed by an earlier row is skipped rather than reported.
// It returns row, extended when SPAWN binds a new variable.
func (x *execution) action(st ast.Stmt, scope *eval.Scope, row eval.Row, compound bool) (eval.Row, error) {
	switch s := st.(type) {
	case *ast.SpawnStmt:
		return x.spawn(s, scope, row)
	case *ast.KillStmt:
		return row, x.kill(s, scope, row, compound)
	case *ast.LinkStmt:
		return row, x.link(s, scope, row)
	case *ast.UnlinkStmt:
		return row, x.unlink(s, scope, row)
	case *ast.SetStmt:
		return row, x.set(s, scope, row, compound)
	case *ast.RedriveStmt:
		return row, x.redrive(s, scope, row)
	}
	return row, x.errAt(herald.CodeInvalidQuery, st.Pos(), "%s is not a mutation", stmtName(st))
}

// writable rejects user writes to system (`_`) and [sealed] types.
func (x *execution) writable(typ string, pos ast.Node) error {
	if herald.IsSystemType(typ) {
		return x.errAt(herald.CodeSealedType, pos.Pos(), "%s is a system type; it is read-only for users", typ)
	}
	if d := x.tx.Type(typ); d != nil && d.Sealed {
		return x.errAt(herald.CodeSealedType, pos.Pos(), "%s is declared [sealed]; it is read-only for users", typ)
	}
	if err := x.principal.Check(herald.ActWrite, typ); err != nil {
		return x.errAt(herald.CodePermissionDenied, pos.Pos(), "%s", err.(*herald.Error).Message)
	}
	return nil
}

// attrMap is attributes being assembled by a statement, before they become a node's.
type attrMap = map[string]herald.Value

// evalBody evaluates `{ a = e, ... }` in scope.
func (x *execution) evalBody(b *ast.Body, scope *eval.Scope, row eval.Row) (attrMap, error) {
	attrs := attrMap{}
	if b == nil {
		return attrs, nil
	}
	c := &eval.Compiler{Scope: scope, File: x.file}
	ctx := x.evalCtx()
	for _, a := range b.Assigns {
		id, ok := a.Target.(*ast.Ident)
		if !ok {
			return nil, x.errAt(herald.CodeInvalidQuery, a.Pos(), "expected an attribute name")
		}
		if _, dup := attrs[id.Name]; dup {
			return nil, x.errAt(herald.CodeInvalidQuery, id.Pos(), "attribute %s is assigned twice", id.Name)
		}
		f, err := c.Compile(a.Value)
		if err != nil {
			return nil, err
		}
		v, err := f(ctx, row)
		if err != nil {
			return nil, err
		}
		if v.Kind() == herald.KindMap {
			return nil, x.errAt(herald.CodeTypeMismatch, a.Value.Pos(), "attribute %s cannot hold a whole node or edge; assign its id or an attribute", id.Name)
		}
		attrs[id.Name] = v
	}
	return attrs, nil
}

// checkAttrs validates attrs against a declaration (nil: schemaless). On create, missing
// attributes take their defaults and [required] ones must be present.
func (x *execution) checkAttrs(decl *herald.TypeDecl, attrs attrMap, create bool, pos ast.Node) error {
	if _, ok := attrs["id"]; ok && (decl == nil || decl.Kind == herald.NodeDecl) {
		return x.errAt(herald.CodeUnknownAttribute, pos.Pos(), "id is reserved for the node id; give an explicit id with SPAWN #name: Type")
	}
	if decl == nil {
		for k, v := range attrs {
			if v.IsNull() {
				delete(attrs, k)
			}
		}
		return nil
	}
	for name, v := range attrs {
		ad := decl.Attr(name)
		if ad == nil {
			return x.errAt(herald.CodeUnknownAttribute, pos.Pos(), "%s has no attribute %s", decl.Name, name)
		}
		if v.IsNull() {
			delete(attrs, name)
			continue
		}
		conv, ok := conform(ad, v)
		if !ok {
			return x.errAt(herald.CodeTypeMismatch, pos.Pos(), "%s.%s is %s, got %s %s", decl.Name, name, typeName(ad), v.Kind(), v)
		}
		attrs[name] = conv
	}
	if create {
		for _, ad := range decl.Attrs {
			if _, ok := attrs[ad.Name]; !ok && ad.Default != nil && !ad.Default.IsNull() {
				attrs[ad.Name] = *ad.Default
			}
		}
	}
	if create {
		return x.checkRequired(decl, func(name string) bool { return !attrs[name].IsNull() }, pos)
	}
	return nil
}

// checkRequired reports a [required] attribute of decl that has is false for.
func (x *execution) checkRequired(decl *herald.TypeDecl, has func(string) bool, pos ast.Node) error {
	if decl == nil {
		return nil
	}
	for _, ad := range decl.Attrs {
		if ad.Required && !has(ad.Name) {
			return x.errAt(herald.CodeRequiredAttribute, pos.Pos(), "%s.%s is [required]", decl.Name, ad.Name)
		}
	}
	return nil
}

func typeName(ad *herald.AttrDecl) string {
	if ad.Any {
		return "Any"
	}
	return ad.Type.String()
}

// conform checks v against a declared attribute type, widening Int to Float.
func conform(ad *herald.AttrDecl, v herald.Value) (herald.Value, bool) {
	switch {
	case ad.Any || v.Kind() == ad.Type:
		return v, true
	case ad.Type == herald.KindFloat && v.Kind() == herald.KindInt:
		return herald.Float(float64(v.AsInt())), true
	}
	return v, false
}

func (x *execution) spawn(s *ast.SpawnStmt, scope *eval.Scope, row eval.Row) (eval.Row, error) {
	var idNode ast.Node = noNode{}
	var id herald.NodeID
	if s.ID != nil {
		idNode, id = s.ID, herald.NodeID(s.ID.Name)
	}
	// The body is evaluated after the type and id checks, as the statement reads.
	body := func() (attrMap, error) { return x.evalBody(s.Body, scope, row) }
	n, err := x.create(s.Type.Name, id, nil, body, s.Type, idNode, s)
	if err != nil {
		return nil, err
	}
	if s.Var != nil {
		x.sess.vars[s.Var.Name] = n.ID
		slot := scope.Declare(s.Var.Name, eval.NodeVar)
		for len(row) <= slot {
			row = append(row, eval.Binding{})
		}
		row[slot].Node = n
	}
	return row, nil
}

// create puts a new node of type typ into the transaction: with id, or a generated one
// when id is empty, and the attributes body returns (or attrs, when body is nil),
// checked against the type's declaration, which may change the map. The nodes name
// where errors point.
func (x *execution) create(typ string, id herald.NodeID, attrs attrMap, body func() (attrMap, error), typeNode, idNode, stmt ast.Node) (*herald.Node, error) {
	if err := x.writable(typ, typeNode); err != nil {
		return nil, err
	}
	decl := x.tx.Type(typ)
	if decl != nil && decl.Kind != herald.NodeDecl {
		return nil, x.errAt(herald.CodeTypeConflict, typeNode.Pos(), "%s is an edge type; SPAWN needs a node type", typ)
	}
	if id != "" {
		if id == "self" {
			return nil, x.errAt(herald.CodeInvalidQuery, idNode.Pos(), "#self names the session actor and cannot be spawned")
		}
		if x.tx.Node(id) != nil {
			return nil, x.errAt(herald.CodeDuplicateID, idNode.Pos(), "node #%s already exists", id)
		}
	} else {
		id = newNodeID()
	}
	if body != nil {
		var err error
		if attrs, err = body(); err != nil {
			return nil, err
		}
	}
	if attrs == nil {
		attrs = attrMap{} // defaults may be added
	}
	if err := x.checkAttrs(decl, attrs, true, stmt); err != nil {
		return nil, err
	}
	n := &herald.Node{ID: id, Type: typ, Attrs: herald.AttrsOf(attrs)}
	x.tx.PutNode(n)
	x.stats.NodesCreated++
	x.stats.AttrsSet += len(attrs)
	return n, nil
}

// noNode stands for a position in statements that have no source text (a publish).
type noNode struct{}

func (noNode) Pos() token.Pos { return token.NoPos }
func (noNode) End() token.Pos { return token.NoPos }

// nodeIDOf resolves a node reference: a variable (from scope or the session), `#id`,
// `#self`, or a String parameter.
func (x *execution) nodeIDOf(ex ast.Expr, scope *eval.Scope, row eval.Row) (herald.NodeID, error) {
	switch r := ex.(type) {
	case *ast.Ident:
		if scope != nil {
			if slot, kind, ok := scope.Lookup(r.Name); ok && kind == eval.NodeVar && slot < len(row) && row[slot].Node != nil {
				return row[slot].Node.ID, nil
			}
		}
		if id, ok := x.sess.vars[r.Name]; ok {
			if x.tx.Node(id) == nil {
				return "", x.errAt(herald.CodeNodeNotFound, r.Pos(), "the node bound to %s no longer exists", r.Name)
			}
			return id, nil
		}
		return "", x.errAt(herald.CodeUnknownVariable, r.Pos(), "unknown variable %s", r.Name)
	case *ast.NodeRef:
		if r.Name == "self" {
			if x.sess.actor == "" {
				return "", x.errAt(herald.CodeSession, r.Pos(), "#self is only defined inside BEGIN SESSION AS ... END SESSION")
			}
			return x.sess.actor, nil
		}
		return herald.NodeID(r.Name), nil
	case *ast.ParamRef:
		v := x.params[r.Name]
		if v.Kind() != herald.KindString || v.AsString() == "" {
			return "", x.errAt(herald.CodeTypeMismatch, r.Pos(), "$%s must be a node id String, got %s", r.Name, v)
		}
		return herald.NodeID(v.AsString()), nil
	}
	return "", x.errAt(herald.CodeInvalidQuery, ex.Pos(), "expected a node: a variable, #id or $param")
}

func (x *execution) kill(s *ast.KillStmt, scope *eval.Scope, row eval.Row, compound bool) error {
	id, err := x.nodeIDOf(s.Target, scope, row)
	if err != nil {
		return err
	}
	n := x.tx.Node(id)
	if n == nil {
		if compound {
			return nil
		}
		return x.errAt(herald.CodeNodeNotFound, s.Target.Pos(), "node #%s does not exist", id)
	}
	if AdminKill[n.Type] {
		// A dead letter: an admin's to purge (AccessOf asked for the grant; a KILL that
		// reaches here by another path is checked again).
		if err := x.principal.Check(herald.ActAdmin, ""); err != nil {
			return x.errAt(herald.CodePermissionDenied, s.Target.Pos(), "%s (KILL of a %s needs the admin grant)", err.(*herald.Error).Message, n.Type)
		}
	} else if err := x.writable(n.Type, s.Target); err != nil {
		return err
	}
	if p := x.principal; p != nil {
		// The node's edges go with it: each is a write of its edge type (system edges,
		// such as a dead letter's link to its destination, are the system's to drop).
		for _, k := range x.tx.Incident(id) {
			if e := x.tx.Edge(k); e != nil && !herald.IsSystemType(e.Type) {
				if err := p.Check(herald.ActWrite, e.Type); err != nil {
					return x.errAt(herald.CodePermissionDenied, s.Target.Pos(), "%s (KILL #%s deletes its %s edges)", err.(*herald.Error).Message, id, e.Type)
				}
			}
		}
	}
	x.stats.EdgesDeleted += x.tx.DeleteNode(id)
	x.stats.NodesDeleted++
	if AdminKill[n.Type] {
		if r := x.e.letterRedriver(); r != nil {
			r.LetterKilled(x.tx, n)
		}
	}
	return nil
}

// endpoints resolves the arguments of an edge atom in LINK/UNLINK to existing nodes.
func (x *execution) endpoints(ep *ast.EdgePattern, scope *eval.Scope, row eval.Row) ([]herald.NodeID, []*herald.Node, error) {
	if ep.Var != nil {
		return nil, nil, x.errAt(herald.CodeInvalidQuery, ep.Var.Pos(), "an edge variable cannot be bound in LINK or UNLINK")
	}
	ids := make([]herald.NodeID, len(ep.Args))
	nodes := make([]*herald.Node, len(ep.Args))
	for i, a := range ep.Args {
		if id, ok := a.(*ast.Ident); ok && id.Name == "_" {
			return nil, nil, x.errAt(herald.CodeInvalidQuery, a.Pos(), "`_` is only allowed in patterns")
		}
		id, err := x.nodeIDOf(a, scope, row)
		if err != nil {
			return nil, nil, err
		}
		n := x.tx.Node(id)
		if n == nil {
			return nil, nil, x.errAt(herald.CodeNodeNotFound, a.Pos(), "node #%s does not exist", id)
		}
		ids[i], nodes[i] = id, n
	}
	return ids, nodes, nil
}

func (x *execution) link(s *ast.LinkStmt, scope *eval.Scope, row eval.Row) error {
	typ := s.Edge.Type.Name
	if err := x.writable(typ, s.Edge.Type); err != nil {
		return err
	}
	ids, nodes, err := x.endpoints(s.Edge, scope, row)
	if err != nil {
		return err
	}
	decl := x.tx.Type(typ)
	if decl != nil {
		if decl.Kind != herald.EdgeDecl {
			return x.errAt(herald.CodeTypeConflict, s.Edge.Type.Pos(), "%s is a node type; LINK needs an edge type", typ)
		}
		if len(decl.Endpoints) != len(ids) {
			return x.errAt(herald.CodeEndpointMismatch, s.Edge.Pos(), "%s takes %d endpoints, got %d", typ, len(decl.Endpoints), len(ids))
		}
		for i, ep := range decl.Endpoints {
			if ep.Type != "" && nodes[i].Type != ep.Type {
				return x.errAt(herald.CodeEndpointMismatch, s.Edge.Args[i].Pos(), "%s.%s must be of type %s, got #%s of type %s", typ, ep.Name, ep.Type, ids[i], nodes[i].Type)
			}
		}
	}
	attrs, err := x.evalBody(s.Body, scope, row)
	if err != nil {
		return err
	}
	key := herald.MakeEdgeKey(typ, ids)
	old := x.tx.Edge(key)
	if err := x.checkAttrs(decl, attrs, old == nil, s); err != nil {
		return err
	}
	e := &herald.Edge{Type: typ, Endpoints: ids, Attrs: herald.AttrsOf(attrs)}
	if old != nil {
		e.Attrs = old.Attrs.Merge(e.Attrs)
	} else {
		x.stats.EdgesCreated++
	}
	x.stats.AttrsSet += len(attrs)
	x.tx.PutEdge(e)
	return nil
}

func (x *execution) unlink(s *ast.UnlinkStmt, scope *eval.Scope, row eval.Row) error {
	typ := s.Edge.Type.Name
	if err := x.writable(typ, s.Edge.Type); err != nil {
		return err
	}
	ids, _, err := x.endpoints(s.Edge, scope, row)
	if err != nil {
		return err
	}
	key := herald.MakeEdgeKey(typ, ids)
	if x.tx.Edge(key) != nil {
		x.tx.DeleteEdge(key)
		x.stats.EdgesDeleted++
	}
	return nil
}

func (x *execution) set(s *ast.SetStmt, scope *eval.Scope, row eval.Row, compound bool) error {
	c := &eval.Compiler{Scope: scope, File: x.file}
	ctx := x.evalCtx()
	type assignment struct {
		a    *ast.Assign
		name string
		attr string
		v    herald.Value
	}
	// Evaluate every right-hand side before writing anything.
	var plan []assignment
	for _, a := range s.Assigns {
		sel, ok := a.Target.(*ast.SelectorExpr)
		if !ok {
			return x.errAt(herald.CodeInvalidQuery, a.Pos(), "SET needs variable.attribute or #id.attribute on the left")
		}
		var name string
		switch t := sel.X.(type) {
		case *ast.Ident:
			name = t.Name
		case *ast.NodeRef, *ast.ParamRef:
		default:
			return x.errAt(herald.CodeInvalidQuery, sel.Pos(), "SET needs variable.attribute or #id.attribute on the left")
		}
		f, err := c.Compile(a.Value)
		if err != nil {
			return err
		}
		v, err := f(ctx, row)
		if err != nil {
			return err
		}
		if v.Kind() == herald.KindMap {
			return x.errAt(herald.CodeTypeMismatch, a.Value.Pos(), "an attribute cannot hold a whole node or edge")
		}
		plan = append(plan, assignment{a: a, name: name, attr: sel.Sel.Name, v: v})
	}
	for _, as := range plan {
		slot, kind, inScope := scope.Lookup(as.name)
		inScope = inScope && as.name != ""
		if inScope && kind == eval.EdgeVar {
			if err := x.setEdgeAttr(as.a, row, slot, as.attr, as.v); err != nil {
				return err
			}
			continue
		}
		id, err := x.nodeIDOf(as.a.Target.(*ast.SelectorExpr).X, scope, row)
		if err != nil {
			return err
		}
		n := x.tx.Node(id)
		if n == nil {
			if compound {
				continue
			}
			return x.errAt(herald.CodeNodeNotFound, as.a.Pos(), "node #%s does not exist", id)
		}
		if err := x.writable(n.Type, as.a.Target); err != nil {
			return err
		}
		change := attrMap{as.attr: as.v}
		if err := x.checkAttrs(x.tx.Type(n.Type), change, false, as.a); err != nil {
			return err
		}
		nn := &herald.Node{ID: n.ID, Type: n.Type, Attrs: n.Attrs.With(as.attr, change[as.attr]), Body: n.Body}
		if n.Body != nil && n.Body.Has(as.attr) {
			// The attribute lives in the body: the new image holds every value in memory,
			// and the commit puts the large ones into a new body.
			all, err := n.AllAttrs()
			if err != nil {
				return err
			}
			nn.Attrs, nn.Body = all.With(as.attr, change[as.attr]), nil
		}
		if err := x.checkRequired(x.tx.Type(n.Type), nn.HasAttr, as.a); err != nil {
			return err
		}
		x.tx.PutNode(nn)
		x.stats.AttrsSet++
		if inScope && slot < len(row) {
			row[slot].Node = nn
		}
	}
	return nil
}

func (x *execution) setEdgeAttr(a *ast.Assign, row eval.Row, slot int, attr string, v herald.Value) error {
	e := x.tx.Edge(row[slot].Edge.Key())
	if e == nil {
		return nil
	}
	if err := x.writable(e.Type, a.Target); err != nil {
		return err
	}
	change := attrMap{attr: v}
	decl := x.tx.Type(e.Type)
	if err := x.checkAttrs(decl, change, false, a); err != nil {
		return err
	}
	ne := &herald.Edge{Type: e.Type, Endpoints: e.Endpoints, Attrs: e.Attrs.With(attr, change[attr])}
	x.tx.PutEdge(ne)
	x.stats.AttrsSet++
	row[slot].Edge = ne
	return nil
}

// LetterRedriver is an extension that puts back what a dead letter holds inside a
// statement's own transaction, for `MATCH d: _DeadLetter … REDRIVE d`: the consume
// engine, which writes the letters and knows their form. It returns the id the node
// came back under.
type LetterRedriver interface {
	RedriveLetter(tx *graph.Tx, letter herald.NodeID) (herald.NodeID, error)
	// LetterKilled tidies up in tx after a KILL deleted letter (its node as it was):
	// the watch it hung from, when nothing else keeps that.
	LetterKilled(tx *graph.Tx, letter *herald.Node)
}

// redrive puts back the dead letter the variable of `REDRIVE d` binds in row. A letter
// an earlier action of the statement already removed is skipped.
func (x *execution) redrive(s *ast.RedriveStmt, scope *eval.Scope, row eval.Row) error {
	id, err := x.nodeIDOf(s.ID, scope, row)
	if err != nil {
		return err
	}
	n := x.tx.Node(id)
	if n == nil {
		return nil
	}
	if !AdminKill[n.Type] {
		return x.errAt(herald.CodeTypeMismatch, s.ID.Pos(), "REDRIVE needs a dead letter; #%s is a %s", id, n.Type)
	}
	if err := x.principal.Check(herald.ActAdmin, ""); err != nil {
		return x.errAt(herald.CodePermissionDenied, s.Pos(), "%s (REDRIVE needs the admin grant)", err.(*herald.Error).Message)
	}
	r := x.e.letterRedriver()
	if r == nil {
		return x.errAt(herald.CodeNotImplemented, s.Pos(), "REDRIVE parses, but this server does not execute it (no consume engine)")
	}
	edges := len(x.tx.Incident(id))
	if _, err := r.RedriveLetter(x.tx, id); err != nil {
		return err
	}
	x.stats.NodesCreated++
	x.stats.NodesDeleted++
	x.stats.EdgesDeleted += edges
	x.redriven++
	return nil
}
