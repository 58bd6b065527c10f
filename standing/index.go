package standing

import (
	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/token"
)

// The index from changes to queries: which open queries a change can concern. A query
// is indexed by every type its pattern mentions (and by AnyNodeType when a variable has
// none), or, in watch mode, by the one value its equality condition requires, and by
// every node it reads by id. A change reaches the queries of the types it touches (a
// node's type before and after, an edge's type), of the nodes it changes and of the
// attribute values those nodes have before and after.

// AnyNodeType indexes the queries with a node variable of any type (an edge endpoint
// the pattern does not declare): every node change concerns them. No type has this
// name.
const AnyNodeType = "*"

// EqKey is an entry of the index by attribute value.
type EqKey struct{ Type, Attr, Val string }

// Index maps changes to what runs the queries they concern, K: a stream or a group.
// It is not safe for concurrent use: its owner guards it.
type Index[K comparable] struct {
	byType  map[string]map[K]struct{}
	byValue map[EqKey]map[K]struct{}
	byNode  map[herald.NodeID]map[K]struct{}
}

// NewIndex returns an empty index.
func NewIndex[K comparable]() *Index[K] {
	return &Index[K]{byType: map[string]map[K]struct{}{}, byValue: map[EqKey]map[K]struct{}{}, byNode: map[herald.NodeID]map[K]struct{}{}}
}

// Add indexes k, which runs q.
func (x *Index[K]) Add(q *Query, k K) { x.update(q, k, true) }

// Remove takes k, which runs q, out of the index.
func (x *Index[K]) Remove(q *Query, k K) { x.update(q, k, false) }

func (x *Index[K]) update(q *Query, k K, add bool) {
	for id := range q.refs {
		put(x.byNode, id, k, add)
	}
	if q.eq != nil {
		put(x.byValue, *q.eq, k, add)
		return
	}
	for t := range q.types {
		put(x.byType, t, k, add)
	}
	if q.anyType {
		put(x.byType, AnyNodeType, k, add)
	}
}

func put[T comparable, K comparable](m map[T]map[K]struct{}, key T, k K, add bool) {
	set := m[key]
	if add {
		if set == nil {
			set = map[K]struct{}{}
			m[key] = set
		}
		set[k] = struct{}{}
		return
	}
	if set != nil {
		delete(set, k)
		if len(set) == 0 {
			delete(m, key)
		}
	}
}

// Touch calls visit with each entry the change may concern, once per way it concerns
// it (an entry may be visited more than once).
func (x *Index[K]) Touch(ch herald.Change, visit func(K)) {
	types, n := ChangeTypes(ch)
	x.TouchTyped(ch, types, n, visit)
}

// TouchTyped is Touch for a caller that has the change's types already (ChangeTypes).
func (x *Index[K]) TouchTyped(ch herald.Change, types [2]string, n int, visit func(K)) {
	for _, t := range types[:n] {
		for k := range x.byType[t] {
			visit(k)
		}
	}
	if ch.Kind != herald.NodeChange {
		return
	}
	for k := range x.byType[AnyNodeType] {
		visit(k)
	}
	for _, n := range [2]*herald.Node{ch.NodeBefore, ch.NodeAfter} {
		if n == nil {
			continue
		}
		for k := range x.byNode[n.ID] {
			visit(k)
		}
		if len(x.byValue) == 0 {
			continue
		}
		for _, a := range n.Attrs {
			for k := range x.byValue[EqKey{Type: n.Type, Attr: a.Name, Val: graph.ValueKey(a.Value)}] {
				visit(k)
			}
		}
	}
}

// OfType calls visit with each entry indexed by type typ.
func (x *Index[K]) OfType(typ string, visit func(K)) {
	for k := range x.byType[typ] {
		visit(k)
	}
}

// ChangeTypes returns the n types a change touches: a node's type before and after
// (once when they are the same), or an edge's type. An array, not a slice: dispatchers
// ask for every change of every commit.
func ChangeTypes(ch herald.Change) (types [2]string, n int) {
	switch ch.Kind {
	case herald.NodeChange:
		if ch.NodeBefore != nil {
			types[n], n = ch.NodeBefore.Type, n+1
		}
		if ch.NodeAfter != nil && (ch.NodeBefore == nil || ch.NodeAfter.Type != ch.NodeBefore.Type) {
			types[n], n = ch.NodeAfter.Type, n+1
		}
	case herald.EdgeChange:
		if ch.EdgeBefore != nil {
			types[n], n = ch.EdgeBefore.Type, n+1
		} else if ch.EdgeAfter != nil {
			types[n], n = ch.EdgeAfter.Type, n+1
		}
	}
	return types, n
}

// equalityKey finds a top-level conjunct `v.attr = constant` (either way round) in where.
func equalityKey(where ast.Expr, v, typ string, ctx func() *eval.Context, file *token.File) *EqKey {
	for _, c := range conjuncts(where, nil) {
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
				return &EqKey{Type: typ, Attr: sel.Sel.Name, Val: vk}
			}
		}
	}
	return nil
}

// conjuncts appends the top-level conjuncts of e (split at AND and parentheses) to out.
func conjuncts(e ast.Expr, out []ast.Expr) []ast.Expr {
	switch x := e.(type) {
	case *ast.BinaryExpr:
		if x.Op == token.AND {
			return conjuncts(x.Y, conjuncts(x.X, out))
		}
	case *ast.ParenExpr:
		return conjuncts(x.X, out)
	}
	return append(out, e)
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
