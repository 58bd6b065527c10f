package graph

import (
	"fmt"
	"sort"
	"strings"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/parser"
)

// testNode builds a node from alternating attribute names and values.
func testNode(id, typ string, kv ...any) *herald.Node {
	m := map[string]herald.Value{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(herald.Value)
	}
	return &herald.Node{ID: herald.NodeID(id), Type: typ, Attrs: herald.AttrsOf(m)}
}

// testEdge builds an edge typ(ends...) with no attributes.
func testEdge(typ string, ends ...string) *herald.Edge {
	e := &herald.Edge{Type: typ}
	for _, id := range ends {
		e.Endpoints = append(e.Endpoints, herald.NodeID(id))
	}
	return e
}

// edgeKeyText renders an edge key readably: typ(a,b).
func edgeKeyText(k herald.EdgeKey) string {
	parts := strings.Split(string(k), "\x00")
	return parts[0] + "(" + strings.Join(parts[1:], ",") + ")"
}

// runMatch compiles `MATCH <pattern> [WHERE <where>]` with the session variables outer
// and runs it in tx with params, returning one "var=value ..." line per row (sorted).
// Node variables show the node id, edge variables the edge as typ(a,b).
func runMatch(tx *Tx, pattern, where string, params map[string]herald.Value, outer map[string]*herald.Node) ([]string, error) {
	src := "MATCH " + pattern
	if where != "" {
		src += " WHERE " + where
	}
	src += " RETURN 1"
	script, file, err := parser.ParseScript(src)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", src, err)
	}
	if len(script.Stmts) != 1 {
		return nil, fmt.Errorf("parse %q: %d statements", src, len(script.Stmts))
	}
	m, ok := script.Stmts[0].(*ast.MatchStmt)
	if !ok {
		return nil, fmt.Errorf("parse %q: got %T", src, script.Stmts[0])
	}
	plan, err := Compile(m.Pattern, m.Where, outer, file)
	if err != nil {
		return nil, fmt.Errorf("compile %q: %w", src, err)
	}
	names := plan.Scope.Names()
	var rows []string
	ctx := &eval.Context{Params: params, Node: tx.Node}
	_, err = plan.Run(tx, ctx, func(r eval.Row) error {
		var cols []string
		for slot, name := range names {
			switch {
			case r[slot].Node != nil:
				cols = append(cols, name+"="+string(r[slot].Node.ID))
			case r[slot].Edge != nil:
				cols = append(cols, name+"="+edgeKeyText(r[slot].Edge.Key()))
			default:
				cols = append(cols, name+"=<unbound>")
			}
		}
		sort.Strings(cols)
		rows = append(rows, strings.Join(cols, " "))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", src, err)
	}
	sort.Strings(rows)
	return rows, nil
}
