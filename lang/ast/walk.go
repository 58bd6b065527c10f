package ast

import (
	"reflect"

	"github.com/herald-mq/herald/lang/token"
)

// Pos returns the position of the first statement, or NoPos for an empty script.
// With End it makes *Script a Node, so Inspect accepts a whole script.
func (s *Script) Pos() token.Pos {
	if len(s.Stmts) == 0 {
		return token.NoPos
	}
	return s.Stmts[0].Pos()
}

// End returns the end of the last statement, or NoPos for an empty script.
func (s *Script) End() token.Pos {
	if len(s.Stmts) == 0 {
		return token.NoPos
	}
	return s.Stmts[len(s.Stmts)-1].End()
}

// Inspect traverses the tree rooted at n in depth-first source order. It calls f(n)
// for every non-nil node; when f returns true, Inspect visits the node's children and
// then calls f(nil). Children that are absent (nil pointers or nil interfaces) are
// skipped, so f never sees a typed nil.
func Inspect(n Node, f func(Node) bool) {
	if isNil(n) || !f(n) {
		return
	}
	walkChildren(n, f)
	f(nil)
}

func isNil(n Node) bool {
	if n == nil {
		return true
	}
	v := reflect.ValueOf(n)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func walkChildren(n Node, f func(Node) bool) {
	switch n := n.(type) {
	case *Script:
		for _, s := range n.Stmts {
			Inspect(s, f)
		}

	// Expressions.
	case *BadExpr, *Ident, *BasicLit, *ParamRef, *NodeRef:
	case *ListLit:
		for _, e := range n.Elems {
			Inspect(e, f)
		}
	case *SelectorExpr:
		Inspect(n.X, f)
		Inspect(n.Sel, f)
	case *CallExpr:
		Inspect(n.Fun, f)
		for _, e := range n.Args {
			Inspect(e, f)
		}
		Inspect(n.Where, f)
	case *UnaryExpr:
		Inspect(n.X, f)
	case *BinaryExpr:
		Inspect(n.X, f)
		Inspect(n.Y, f)
	case *IsNullExpr:
		Inspect(n.X, f)
	case *ParenExpr:
		Inspect(n.X, f)
	case *OrderingExpr:
		for _, k := range n.Keys {
			Inspect(k, f)
		}

	// Patterns, projections, assignments.
	case *Pattern:
		for _, e := range n.Elems {
			Inspect(e, f)
		}
	case *NodePattern:
		Inspect(n.Var, f)
		Inspect(n.Type, f)
	case *EdgePattern:
		Inspect(n.Var, f)
		Inspect(n.Type, f)
		for _, e := range n.Args {
			Inspect(e, f)
		}
	case *ReturnClause:
		for _, it := range n.Items {
			Inspect(it, f)
		}
	case *ReturnItem:
		Inspect(n.X, f)
		Inspect(n.Alias, f)
	case *OrderItem:
		Inspect(n.X, f)
	case *Assign:
		Inspect(n.Target, f)
		Inspect(n.Value, f)
	case *Body:
		for _, a := range n.Assigns {
			Inspect(a, f)
		}
	case *Modifiers:
		for _, w := range n.Words {
			Inspect(w, f)
		}
	case *TypeRef:
		Inspect(n.Name, f)
	case *AttrDecl:
		Inspect(n.Name, f)
		Inspect(n.Type, f)
		Inspect(n.Default, f)
		Inspect(n.Mods, f)
	case *EndpointDecl:
		Inspect(n.Name, f)
		Inspect(n.Type, f)
	case *WatchOption:
		Inspect(n.Name, f)
		Inspect(n.Value, f)
	case *OptionList:
		for _, o := range n.Options {
			Inspect(o, f)
		}

	// Statements.
	case *BadStmt, *BeginStmt, *CommitStmt, *RollbackStmt, *EndSessionStmt:
	case *NodeDeclStmt:
		Inspect(n.Name, f)
		Inspect(n.Mods, f)
		for _, a := range n.Attrs {
			Inspect(a, f)
		}
	case *EdgeDeclStmt:
		Inspect(n.Name, f)
		for _, e := range n.Endpoints {
			Inspect(e, f)
		}
		Inspect(n.Mods, f)
		for _, a := range n.Attrs {
			Inspect(a, f)
		}
	case *SpawnStmt:
		Inspect(n.Var, f)
		Inspect(n.ID, f)
		Inspect(n.Type, f)
		Inspect(n.Body, f)
		Inspect(n.Returning, f)
	case *KillStmt:
		Inspect(n.Target, f)
		Inspect(n.Returning, f)
	case *LinkStmt:
		Inspect(n.Edge, f)
		Inspect(n.Body, f)
		Inspect(n.Returning, f)
	case *UnlinkStmt:
		Inspect(n.Edge, f)
		Inspect(n.Returning, f)
	case *SetStmt:
		for _, a := range n.Assigns {
			Inspect(a, f)
		}
		Inspect(n.Returning, f)
	case *MatchStmt:
		Inspect(n.Pattern, f)
		Inspect(n.Where, f)
		for _, a := range n.Actions {
			Inspect(a, f)
		}
		Inspect(n.Return, f)
		for _, o := range n.OrderBy {
			Inspect(o, f)
		}
		Inspect(n.Limit, f)
		Inspect(n.Offset, f)
	case *BeginSessionStmt:
		Inspect(n.Actor, f)
	case *TickStmt:
		Inspect(n.Count, f)
	case *WatchStmt:
		Inspect(n.Handle, f)
		Inspect(n.Pattern, f)
		before, after := n.SplitOptions()
		for _, o := range before {
			Inspect(o, f)
		}
		Inspect(n.Where, f)
		for _, o := range after {
			Inspect(o, f)
		}
		Inspect(n.Return, f)
		Inspect(n.OnMatch, f)
	case *OnMatch:
		for _, a := range n.Actions {
			Inspect(a, f)
		}
	case *AckStmt:
		Inspect(n.ID, f)
	case *RedriveStmt:
		Inspect(n.ID, f)
	case *NackStmt:
		Inspect(n.ID, f)
		Inspect(n.Options, f)
	case *ExtendStmt:
		Inspect(n.ID, f)
		Inspect(n.Options, f)
	case *WatchControlStmt:
		Inspect(n.Handle, f)
	case *AlterTypeStmt:
		Inspect(n.Name, f)
		for _, d := range n.Drop {
			Inspect(d, f)
		}
	case *AlterWatchStmt:
		Inspect(n.Handle, f)
		for _, o := range n.Options {
			Inspect(o, f)
		}
	case *ConstraintDeclStmt:
		Inspect(n.Name, f)
		Inspect(n.Pattern, f)
		Inspect(n.Cond, f)
	case *DropConstraintStmt:
		Inspect(n.Name, f)
	}
}

// Params returns the distinct parameter names (without `$`) used under n, in the
// order of their first use.
func Params(n Node) []string {
	var names []string
	seen := make(map[string]bool)
	Inspect(n, func(n Node) bool {
		if p, ok := n.(*ParamRef); ok && !seen[p.Name] {
			seen[p.Name] = true
			names = append(names, p.Name)
		}
		return true
	})
	return names
}
