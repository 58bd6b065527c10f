package engine

import (
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
	old := x.tx.Type(d.Name)
	if old != nil {
		if old.Same(d) {
			return Result{}, nil // re-declaring the same type is a no-op
		}
		kind := "node"
		if old.Kind == herald.EdgeDecl {
			kind = "edge"
		}
		return Result{}, x.errAt(herald.CodeTypeConflict, name.Pos(), "%s is already declared as a different %s type", d.Name, kind)
	}
	x.tx.PutType(d)
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
			if !ok || k == herald.KindNull || k == herald.KindMap {
				return x.errAt(herald.CodeTypeMismatch, a.Type.Pos(), "unknown attribute type %s (want Bool, Int, Float, String, Bytes, Timestamp, Duration, List, Any or [T])", tname)
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
