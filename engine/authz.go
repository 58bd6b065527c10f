package engine

import (
	"context"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/ast"
)

// AuthorizeWatch checks that the principal ctx carries may open the WATCH in query with
// action (herald.ActWatch or herald.ActConsume): it needs that grant on every node and
// edge type its pattern names, and on the type of every node it names by id (`#s1.v`
// in WHERE or RETURN reads that node as it changes). A node named by id that does not
// exist yet needs the grant on every type. A refusal is E8001. Without a principal
// everything is allowed.
func (e *Engine) AuthorizeWatch(ctx context.Context, query string, action string) error {
	p := herald.PrincipalFrom(ctx)
	if p == nil {
		return nil
	}
	w, _, err := parseWatch(query)
	if err != nil {
		return nil // the service reports the syntax error itself
	}
	deny := func(what string) error {
		return herald.Errorf(herald.CodeWatchPatternDenied, "%s may not %s %s: it needs the grant %s:%s", p.Name, action, what, action, what)
	}
	var refs []herald.NodeID
	var refused error
	ast.Inspect(w, func(n ast.Node) bool {
		if refused != nil {
			return false
		}
		switch x := n.(type) {
		case *ast.NodePattern:
			if !p.Can(action, x.Type.Name) {
				refused = deny(x.Type.Name)
			}
		case *ast.EdgePattern:
			if !p.Can(action, x.Type.Name) {
				refused = deny(x.Type.Name)
			}
		case *ast.NodeRef:
			if x.Name != "self" {
				refs = append(refs, herald.NodeID(x.Name))
			}
		}
		return true
	})
	if refused != nil || len(refs) == 0 {
		return refused
	}
	g, _, _ := e.snapshot()
	for _, id := range refs {
		n := g.Node(id)
		switch {
		case n == nil && !p.Can(action, "*"):
			return herald.Errorf(herald.CodeWatchPatternDenied, "%s may not %s #%s: no such node yet, and only the grant %s:* covers a node whose type is not known", p.Name, action, id, action)
		case n != nil && !p.Can(action, n.Type):
			return deny(n.Type)
		}
	}
	return nil
}
