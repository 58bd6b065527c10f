package engine

import (
	"slices"
	"strings"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
)

// declareNode executes `node Name [mods] { attrs }`.
func (x *execution) declareNode(s *ast.NodeDeclStmt) (Result, error) {
	d := &herald.TypeDecl{Kind: herald.NodeDecl, Name: s.Name.Name}
	if err := x.typeMods(d, s.Mods); err != nil {
		return Result{}, err
	}
	if err := x.attrDecls(d, s.Attrs); err != nil {
		return Result{}, err
	}
	return x.declare(d, s.Name)
}

// declareEdge executes `edge name(a: A, b: B) [mods] { attrs }`.
func (x *execution) declareEdge(s *ast.EdgeDeclStmt) (Result, error) {
	d := &herald.TypeDecl{Kind: herald.EdgeDecl, Name: s.Name.Name}
	if len(s.Endpoints) == 0 {
		return Result{}, x.errAt(herald.CodeInvalidQuery, s.Name.Pos(), "edge %s needs at least one endpoint", d.Name)
	}
	seen := map[string]bool{}
	for _, ep := range s.Endpoints {
		if seen[ep.Name.Name] {
			return Result{}, x.errAt(herald.CodeInvalidQuery, ep.Pos(), "endpoint %s is declared twice", ep.Name.Name)
		}
		seen[ep.Name.Name] = true
		typ := ep.Type.Name
		if strings.EqualFold(typ, "Any") {
			typ = ""
		}
		d.Endpoints = append(d.Endpoints, herald.EndpointDecl{Name: ep.Name.Name, Type: typ})
	}
	if err := x.typeMods(d, s.Mods); err != nil {
		return Result{}, err
	}
	if err := x.attrDecls(d, s.Attrs); err != nil {
		return Result{}, err
	}
	return x.declare(d, s.Name)
}

func (x *execution) declare(d *herald.TypeDecl, name *ast.Ident) (Result, error) {
	if herald.IsSystemType(d.Name) {
		return Result{}, x.errAt(herald.CodeSealedType, name.Pos(), "type names starting with _ are reserved for system types")
	}
	if old := x.tx.Type(d.Name); old != nil {
		evolved, err := x.evolve(old, d, name)
		if err != nil || evolved == nil {
			return Result{}, err // nil: the type already declares all of d
		}
		d = evolved
	}
	x.tx.PutType(d)
	x.stats.TypesDeclared++
	return Result{Stats: x.stats}, nil
}

// alterType executes `ALTER TYPE Name DROP a, b`: the attributes leave the declaration,
// which is refused with E2013 while nodes (or edges) of the type hold one of them.
func (x *execution) alterType(s *ast.AlterTypeStmt) (Result, error) {
	if herald.IsSystemType(s.Name.Name) {
		return Result{}, x.errAt(herald.CodeSealedType, s.Name.Pos(), "type names starting with _ are reserved for system types")
	}
	old := x.tx.Type(s.Name.Name)
	if old == nil {
		return Result{}, x.errAt(herald.CodeUnknownType, s.Name.Pos(), "type %s is not declared", s.Name.Name)
	}
	next := *old
	next.Attrs = slices.Clone(old.Attrs)
	for _, d := range s.Drop {
		i := slices.IndexFunc(next.Attrs, func(a herald.AttrDecl) bool { return a.Name == d.Name })
		if i < 0 {
			return Result{}, x.errAt(herald.CodeUnknownAttribute, d.Pos(), "%s has no attribute %s", old.Name, d.Name)
		}
		if n := x.countUsing(old, d.Name, true); n > 0 {
			return Result{}, x.errAt(herald.CodeAttributeInUse, d.Pos(), "%s.%s cannot be dropped: %d %s of %s hold it", old.Name, d.Name, n, plural(n, old), old.Name)
		}
		next.Attrs = slices.Delete(next.Attrs, i, i+1)
	}
	x.tx.PutType(&next)
	x.stats.TypesDeclared++
	return Result{Stats: x.stats}, nil
}

func (x *execution) typeMods(d *herald.TypeDecl, m *ast.Modifiers) error {
	if m == nil {
		return nil
	}
	for _, w := range m.Words {
		switch strings.ToLower(w.Name) {
		case "sealed":
			d.Sealed = true
		default:
			return x.errAt(herald.CodeInvalidQuery, w.Pos(), "unknown type modifier %s (want sealed)", w.Name)
		}
	}
	return nil
}

func (x *execution) attrDecls(d *herald.TypeDecl, attrs []*ast.AttrDecl) error {
	for _, a := range attrs {
		if a.Name.Name == "id" && d.Kind == herald.NodeDecl {
			return x.errAt(herald.CodeInvalidQuery, a.Name.Pos(), "id is reserved for the node id")
		}
		if d.Attr(a.Name.Name) != nil {
			return x.errAt(herald.CodeInvalidQuery, a.Name.Pos(), "attribute %s is declared twice", a.Name.Name)
		}
		ad := herald.AttrDecl{Name: a.Name.Name, Optional: a.Type.Optional}
		tname := a.Type.Name.Name
		switch {
		case a.Type.Lbrack.IsValid():
			ad.Type = herald.KindList
		case strings.EqualFold(tname, "Any"):
			ad.Any = true
		default:
			k, ok := herald.KindByName(tname)
			if !ok || k == herald.KindNull {
				return x.errAt(herald.CodeTypeMismatch, a.Type.Pos(), "unknown attribute type %s (want Bool, Int, Float, String, Bytes, Timestamp, Duration, List, Map, Any or [T])", tname)
			}
			ad.Type = k
		}
		if a.Mods != nil {
			for _, w := range a.Mods.Words {
				switch strings.ToLower(w.Name) {
				case "required":
					ad.Required = true
				default:
					return x.errAt(herald.CodeInvalidQuery, w.Pos(), "unknown attribute modifier %s (want required)", w.Name)
				}
			}
		}
		if a.Default != nil {
			if len(eval.Vars(a.Default)) > 0 || hasCall(a.Default) {
				return x.errAt(herald.CodeInvalidQuery, a.Default.Pos(), "a default must be a constant (literals and operators only)")
			}
			v, err := x.constant(a.Default)
			if err != nil {
				return err
			}
			if !v.IsNull() {
				cv, ok := conform(&ad, v)
				if !ok {
					return x.errAt(herald.CodeTypeMismatch, a.Default.Pos(), "default of %s must be %s, got %s", ad.Name, typeName(&ad), v.Kind())
				}
				ad.Default = &cv
			}
		}
		d.Attrs = append(d.Attrs, ad)
	}
	return nil
}

func hasCall(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch n.(type) {
		case *ast.CallExpr, *ast.ParamRef, *ast.NodeRef:
			found = true
		}
		return !found
	})
	return found
}

// evolve re-declares the existing type old as d. The attributes are matched by name,
// in any order. A declaration never removes an attribute (ALTER TYPE … DROP does): one
// that old has and d leaves out is kept, so an older declaration of the type, run again
// by a program that predates a newer one, changes nothing. An attribute that only d has
// is added; one whose definition d changes takes d's. Adding a [required] attribute, or
// narrowing one (another kind, other than Any or Int to Float, or newly [required]), is
// refused with E2013 while nodes would break it. The kind, seal and endpoints cannot
// change (E2006). evolve returns nil when old already declares all of d.
func (x *execution) evolve(old, d *herald.TypeDecl, name *ast.Ident) (*herald.TypeDecl, error) {
	if old.Kind != d.Kind || old.Sealed != d.Sealed || !slices.Equal(old.Endpoints, d.Endpoints) {
		kind := "node"
		if old.Kind == herald.EdgeDecl {
			kind = "edge"
		}
		return nil, x.errAt(herald.CodeTypeConflict, name.Pos(), "%s is already declared as a different %s type", d.Name, kind)
	}
	next := *old
	next.Attrs = slices.Clone(old.Attrs)
	changed := false
	for _, a := range d.Attrs {
		b := old.Attr(a.Name)
		if b != nil && sameAttr(*b, a) {
			continue
		}
		if err := x.checkNarrowing(old, b, &a, name); err != nil {
			return nil, err
		}
		if b == nil {
			next.Attrs = append(next.Attrs, a)
		} else {
			*next.Attr(a.Name) = a
		}
		changed = true
	}
	if !changed {
		return nil, nil
	}
	return &next, nil
}

// sameAttr reports whether a and b declare an attribute the same way.
func sameAttr(a, b herald.AttrDecl) bool {
	t := herald.TypeDecl{Attrs: []herald.AttrDecl{a}}
	return t.Same(&herald.TypeDecl{Attrs: []herald.AttrDecl{b}})
}

// checkNarrowing refuses to change the attribute was (nil: a new one) of t into to when
// some of t's nodes or edges would no longer fit: a new or newly [required] attribute
// that some lack, or another kind for one that some hold (widening to Any, or from Int
// to Float, fits every value).
func (x *execution) checkNarrowing(t *herald.TypeDecl, was, to *herald.AttrDecl, name *ast.Ident) error {
	if to.Required && (was == nil || !was.Required) {
		if n := x.countUsing(t, to.Name, false); n > 0 {
			return x.errAt(herald.CodeAttributeInUse, name.Pos(), "%s.%s cannot become [required]: %d %s of %s lack it", t.Name, to.Name, n, plural(n, t), t.Name)
		}
	}
	if was == nil || to.Any || (!was.Any && was.Type == to.Type) || (!was.Any && was.Type == herald.KindInt && to.Type == herald.KindFloat) {
		return nil
	}
	if n := x.countUsing(t, to.Name, true); n > 0 {
		return x.errAt(herald.CodeAttributeInUse, name.Pos(), "%s.%s cannot change from %s to %s: %d %s of %s hold it", t.Name, to.Name, typeName(was), typeName(to), n, plural(n, t), t.Name)
	}
	return nil
}

// countUsing counts the nodes (or edges) of t that hold attr (holding true) or lack it.
func (x *execution) countUsing(t *herald.TypeDecl, attr string, holding bool) int {
	n := 0
	if t.Kind == herald.EdgeDecl {
		for _, k := range x.tx.EdgesOfType(t.Name) {
			if e := x.tx.Edge(k); e != nil && !e.Attrs.Get(attr).IsNull() == holding {
				n++
			}
		}
		return n
	}
	for _, id := range x.tx.NodesOfType(t.Name) {
		if nd := x.tx.Node(id); nd != nil && nd.HasAttr(attr) == holding {
			n++
		}
	}
	return n
}

func plural(n int, t *herald.TypeDecl) string {
	switch {
	case t.Kind == herald.EdgeDecl && n == 1:
		return "edge"
	case t.Kind == herald.EdgeDecl:
		return "edges"
	case n == 1:
		return "node"
	}
	return "nodes"
}
