package engine

import (
	"strings"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/token"
)

// Names a statement reads must exist, so that a typo is an error rather than an empty
// answer, where the graph has a schema to say what exists:
//   - an attribute read from a variable of a declared type must be one the declaration
//     has (or id) — else E2009 UNKNOWN_ATTRIBUTE, as a write of it would be;
//   - once the graph has declared types, a pattern's node or edge type must be declared,
//     or be the type of some node or edge (or have been since the server started) —
//     else E2012 UNKNOWN_TYPE. A graph without declarations is schemaless: a type no
//     node has yet is an empty type there, as it always was.
//
// A WATCH is not refused for its type: the type may simply not exist yet. In a graph
// with declared types it gets a warning instead, which the stream sends first. System types
// are always known; undeclared types take any attribute. Each error suggests the
// nearest name when one is close.

// checkNames checks the names st reads in tx. An unknown type is returned as a
// warning instead of an error when warnOnly (a WATCH waits for its type to appear).
func checkNames(st ast.Stmt, tx *graph.Tx, vars map[string]herald.NodeID, file *token.File, warnOnly bool) (warning, err *herald.Error) {
	switch st.(type) {
	case *ast.MatchStmt, *ast.WatchStmt, *ast.SpawnStmt, *ast.SetStmt, *ast.KillStmt, *ast.LinkStmt, *ast.UnlinkStmt:
	default:
		return nil, nil // declarations name types before they exist
	}
	strict := hasSchema(tx)
	types := map[string]string{} // variable → its type, where one is known
	var patterns []*ast.Pattern
	skip := map[ast.Node]bool{} // SET targets: writes, which SET checks itself
	ast.Inspect(st, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.Pattern:
			patterns = append(patterns, x)
		case *ast.SetStmt:
			for _, a := range x.Assigns {
				skip[a.Target] = true
			}
		case *ast.SpawnStmt:
			if x.Var != nil {
				types[x.Var.Name] = x.Type.Name
			}
		}
		return true
	})
	for _, p := range patterns {
		for _, el := range p.Elems {
			var name *ast.Ident
			switch x := el.(type) {
			case *ast.NodePattern:
				name = x.Type
				types[x.Var.Name] = x.Type.Name
			case *ast.EdgePattern:
				name = x.Type
				if x.Var != nil {
					types[x.Var.Name] = x.Type.Name
				}
				if d := tx.Type(x.Type.Name); d != nil && d.Kind == herald.EdgeDecl {
					for j, a := range x.Args {
						if id, ok := a.(*ast.Ident); ok && id.Name != "_" && j < len(d.Endpoints) && d.Endpoints[j].Type != "" {
							if _, bound := types[id.Name]; !bound {
								types[id.Name] = d.Endpoints[j].Type
							}
						}
					}
				}
			}
			if herald.IsSystemType(name.Name) || !strict || tx.HasType(name.Name) {
				continue
			}
			e := eval.ErrorAt(file, herald.CodeUnknownType, name.Pos(), "no type %s: it is not declared and no node or edge has it%s", name.Name, suggest(name.Name, tx.TypeNames()))
			if !warnOnly {
				return nil, e
			}
			if warning == nil {
				e.Message += "; the watch waits for one to appear (declare the type to say it exists: node " + name.Name + " {})"
				warning = e
			}
		}
	}
	for name, id := range vars {
		if _, ok := types[name]; !ok {
			if n := tx.Node(id); n != nil {
				types[name] = n.Type
			}
		}
	}
	ast.Inspect(st, func(n ast.Node) bool {
		if err != nil {
			return false
		}
		sel, ok := n.(*ast.SelectorExpr)
		if !ok || skip[sel] {
			return true
		}
		// In `t.a.b` the declaration says whether t has a; b is a key of a's map.
		v, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		d := tx.Type(types[v.Name])
		if d == nil || herald.IsSystemType(d.Name) || d.Attr(sel.Sel.Name) != nil || sel.Sel.Name == herald.AttrTrace || (sel.Sel.Name == "id" && d.Kind == herald.NodeDecl) {
			return true
		}
		names := make([]string, 0, len(d.Attrs))
		for _, a := range d.Attrs {
			names = append(names, a.Name)
		}
		err = eval.ErrorAt(file, herald.CodeUnknownAttribute, sel.Sel.Pos(), "%s has no attribute %s%s", d.Name, sel.Sel.Name, suggest(sel.Sel.Name, names))
		return false
	})
	return warning, err
}

// hasSchema reports whether the graph has a declared user type: whether it has a
// schema that says which types exist.
func hasSchema(tx *graph.Tx) bool {
	for _, d := range tx.Graph().Types() {
		if !herald.IsSystemType(d.Name) {
			return true
		}
	}
	return false
}

// suggest is " (did you mean X?)" for the candidate nearest to name, when one is
// within two edits, differs only in case, or begins with name, else "".
func suggest(name string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if c == name {
			continue
		}
		lc, ln := strings.ToLower(c), strings.ToLower(name)
		d := editDistance(ln, lc)
		switch {
		case lc == ln:
			d = 0
		case len(ln) >= 3 && strings.HasPrefix(lc, ln):
			d = min(d, 1) // an abbreviation: prio for priority
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + best + "?)"
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// CheckNames checks the names st reads in tx (see checkNames). With waitForTypes (a
// WATCH, which may be waiting for its type to appear) a type nobody has declared or used
// yet is a warning rather than an error; an attribute a declared type lacks is an error
// either way.
func CheckNames(st ast.Stmt, tx *graph.Tx, file *token.File, waitForTypes bool) (warning, err *herald.Error) {
	return checkNames(st, tx, nil, file, waitForTypes)
}
