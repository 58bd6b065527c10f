package graph

// The reference side of the MATCH property test: random queries (a pattern and a WHERE
// tree that render to source) and a brute-force evaluation of them over the map model.

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/herald-mq/herald"
	"pgregory.net/rapid"
)

// ---------------------------------------------------------------------------
// Query generation: a pattern and a WHERE tree that renders to source and that the
// test evaluates itself.

type patElem struct {
	node  bool
	v     string   // node variable, or edge variable ("" when unbound)
	typ   string   // node or edge type
	args  []string // edge arguments: variable, "_", "#id" or "$param"
	label string
}

type operand struct {
	kind  int // opAttr, opBare, opLit
	v     string
	attr  string
	lit   herald.Value
	src   string // literal source text
	paren bool
}

const (
	opAttr = iota + 1 // v.attr, e.attr
	opBare            // v
	opLit             // literal, #id, $p
	opRef             // #id.attr
)

type cond struct {
	op    string // "=", "!=", "<", "<=", ">", ">=", "null", "notnull", "AND", "OR", "NOT"
	l, r  operand
	kids  []*cond
	paren bool
}

type query struct {
	elems    []patElem
	nodeVars []string // in first-appearance order
	edgeVars []string
	where    *cond
	params   map[string]herald.Value
	m        *model // the state the query is drawn for (node references)
	outer    map[string]*herald.Node
}

func renderLit(v herald.Value) string {
	if v.Kind() == herald.KindFloat {
		f := v.AsFloat()
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	return v.String()
}

func (o operand) String() string {
	var s string
	switch o.kind {
	case opAttr:
		s = o.v + "." + o.attr
	case opBare:
		s = o.v
	case opRef:
		s = "#" + o.v + "." + o.attr
	default:
		s = o.src
	}
	if o.paren {
		s = "(" + s + ")"
	}
	return s
}

func (c *cond) String() string {
	var s string
	switch c.op {
	case "AND", "OR":
		parts := make([]string, len(c.kids))
		for i, k := range c.kids {
			parts[i] = k.String()
		}
		s = strings.Join(parts, " "+c.op+" ")
		return "(" + s + ")"
	case "NOT":
		return "NOT (" + c.kids[0].String() + ")"
	case "null":
		s = c.l.String() + " IS NULL"
	case "notnull":
		s = c.l.String() + " IS NOT NULL"
	default:
		s = c.l.String() + " " + c.op + " " + c.r.String()
	}
	if c.paren {
		s = "(" + s + ")"
	}
	return s
}

// whereString renders the top level as a flat conjunction so that the planner splits it.
func (q *query) whereString() string {
	if q.where == nil {
		return ""
	}
	if q.where.op == "AND" {
		parts := make([]string, len(q.where.kids))
		for i, k := range q.where.kids {
			parts[i] = k.String()
		}
		return strings.Join(parts, " AND ")
	}
	return q.where.String()
}

func (q *query) patternString() string {
	parts := make([]string, len(q.elems))
	for i, el := range q.elems {
		if el.node {
			parts[i] = el.v + ": " + el.typ
			continue
		}
		s := el.typ + "(" + strings.Join(el.args, ", ") + ")"
		if el.v != "" {
			s = el.v + ": " + s
		}
		parts[i] = s
	}
	return strings.Join(parts, ", ")
}

func (q *query) String() string {
	s := "MATCH " + q.patternString()
	if w := q.whereString(); w != "" {
		s += " WHERE " + w
	}
	if len(q.outer) > 0 {
		var names []string
		for name, n := range q.outer {
			names = append(names, name+"=#"+string(n.ID))
		}
		sort.Strings(names)
		s += "  (session variables " + strings.Join(names, ", ") + ")"
	}
	return s
}

func drawQuery(t *rapid.T, m *model, maxID int) *query {
	q := &query{m: m, params: map[string]herald.Value{"p": herald.String("n1"), "i": herald.Int(1)}}
	varType := map[string]string{}
	for _, v := range []string{"x", "y", "z"} {
		varType[v] = rapid.SampledFrom(propNodeTypes).Draw(t, "type."+v)
	}
	seen := map[string]bool{}
	addNodeVar := func(v string) {
		if !seen[v] {
			seen[v] = true
			q.nodeVars = append(q.nodeVars, v)
		}
	}
	// Session variables: u is never declared by a node pattern, so it always names the
	// session's node; x (a known bug) may also be declared by a node pattern, which then
	// shadows it.
	q.outer = map[string]*herald.Node{}
	argVars := []string{"x", "y", "z"}
	if ids := m.sortedNodeIDs(); len(ids) > 0 {
		if rapid.IntRange(0, 2).Draw(t, "outer.u?") == 0 {
			q.outer["u"] = m.nodes[rapid.SampledFrom(ids).Draw(t, "outer.u")]
			argVars = append(argVars, "u")
			addNodeVar("u")
		}
		if rapid.IntRange(0, 2).Draw(t, "outer.x?") == 0 {
			q.outer["x"] = m.nodes[rapid.SampledFrom(ids).Draw(t, "outer.x")]
			addNodeVar("x")
		}
	}
	edgeVarNames := []string{"e", "f", "h"}
	for i, n := 0, rapid.IntRange(1, 3).Draw(t, "nelems"); i < n; i++ {
		label := fmt.Sprintf("el%d", i)
		if rapid.Bool().Draw(t, label+".node?") {
			v := rapid.SampledFrom([]string{"x", "y", "z"}).Draw(t, label+".var")
			q.elems = append(q.elems, patElem{node: true, v: v, typ: varType[v]})
			addNodeVar(v)
			continue
		}
		el := patElem{typ: rapid.SampledFrom(propEdgeTypes).Draw(t, label+".type")}
		if rapid.IntRange(0, 2).Draw(t, label+".var?") == 0 {
			el.v = edgeVarNames[len(q.edgeVars)]
			q.edgeVars = append(q.edgeVars, el.v)
		}
		arity := 2
		if rapid.IntRange(0, 19).Draw(t, label+".arity?") == 0 {
			arity = rapid.SampledFrom([]int{1, 3}).Draw(t, label+".arity")
		}
		for j := 0; j < arity; j++ {
			al := fmt.Sprintf("%s.arg%d", label, j)
			switch k := rapid.IntRange(0, 19).Draw(t, al); {
			case k < 11:
				v := rapid.SampledFrom(argVars).Draw(t, al+".var")
				el.args = append(el.args, v)
				addNodeVar(v)
			case k < 15:
				el.args = append(el.args, "_")
			case k < 19:
				el.args = append(el.args, "#"+string(drawRefID(t, m, maxID, al)))
			default:
				p := "$p"
				if rapid.Bool().Draw(t, al+".intparam") {
					p = "$i" // not a node id: matches nothing
				}
				el.args = append(el.args, p)
			}
		}
		q.elems = append(q.elems, el)
	}
	if rapid.IntRange(0, 4).Draw(t, "where?") > 0 {
		top := &cond{op: "AND"}
		for i, n := 0, rapid.IntRange(1, 3).Draw(t, "nconj"); i < n; i++ {
			top.kids = append(top.kids, drawCond(t, q, 2, fmt.Sprintf("w%d", i), maxID))
		}
		q.where = top
	}
	return q
}

// drawRefID picks a node id for a #ref, usually one that exists in m.
func drawRefID(t *rapid.T, m *model, maxID int, label string) herald.NodeID {
	if ids := m.sortedNodeIDs(); len(ids) > 0 && rapid.IntRange(0, 3).Draw(t, label+".exists") > 0 {
		return rapid.SampledFrom(ids).Draw(t, label+".id")
	}
	return propNodeID(rapid.IntRange(0, maxID+1).Draw(t, label+".id"))
}

func drawLiteral(t *rapid.T, m *model, label string, maxID int) operand {
	switch rapid.IntRange(0, 9).Draw(t, label+".litkind") {
	case 0:
		return operand{kind: opLit, lit: herald.Null, src: "null"}
	case 1, 2:
		id := string(drawRefID(t, m, maxID, label+".ref"))
		if rapid.Bool().Draw(t, label+".reftext") {
			return operand{kind: opLit, lit: herald.String(id), src: "#" + id}
		}
		return operand{kind: opLit, lit: herald.String(id), src: strconv.Quote(id)}
	case 3:
		return operand{kind: opLit, lit: herald.String("n1"), src: "$p"}
	}
	vals := propValues()
	if rapid.Bool().Draw(t, label+".fromgraph") {
		// A value some node holds, to make equalities selective but not empty.
		var held []herald.Value
		for _, id := range m.sortedNodeIDs() {
			for _, a := range propAttrNames {
				if v := m.nodes[id].Attrs.Get(a); !v.IsNull() {
					held = append(held, v)
				}
			}
		}
		if len(held) > 0 {
			vals = held
		}
	}
	v := rapid.SampledFrom(vals).Draw(t, label+".lit")
	if rapid.IntRange(0, 5).Draw(t, label+".viaref") == 0 {
		// read an attribute of a node by reference instead
		return operand{kind: opRef, v: string(drawRefID(t, m, maxID, label+".ref")),
			attr: rapid.SampledFrom([]string{"a", "b", "id"}).Draw(t, label+".refattr")}
	}
	return operand{kind: opLit, lit: v, src: renderLit(v)}
}

// drawAttrOperand reads an attribute of a node or edge variable of q.
func drawAttrOperand(t *rapid.T, q *query, label string) operand {
	o := operand{kind: opAttr}
	if len(q.edgeVars) > 0 && rapid.IntRange(0, 3).Draw(t, label+".edge?") == 0 {
		o.v = rapid.SampledFrom(q.edgeVars).Draw(t, label+".evar")
		o.attr = "w"
	} else {
		o.v = rapid.SampledFrom(q.nodeVars).Draw(t, label+".nvar")
		o.attr = rapid.SampledFrom([]string{"a", "a", "b", "id"}).Draw(t, label+".attr")
	}
	o.paren = rapid.IntRange(0, 9).Draw(t, label+".paren") == 0
	return o
}

func drawCond(t *rapid.T, q *query, depth int, label string, maxID int) *cond {
	k := rapid.IntRange(0, 19).Draw(t, label+".kind")
	if len(q.nodeVars) == 0 {
		k = 19 // only literal comparisons
	}
	switch {
	case depth > 0 && k == 0:
		return &cond{op: "NOT", kids: []*cond{drawCond(t, q, depth-1, label+".not", maxID)}}
	case depth > 0 && k <= 3:
		c := &cond{op: rapid.SampledFrom([]string{"AND", "OR", "OR"}).Draw(t, label+".logic")}
		for i, n := 0, rapid.IntRange(2, 3).Draw(t, label+".n"); i < n; i++ {
			c.kids = append(c.kids, drawCond(t, q, depth-1, fmt.Sprintf("%s.%d", label, i), maxID))
		}
		return c
	case k <= 5:
		op := rapid.SampledFrom([]string{"null", "notnull"}).Draw(t, label+".nullop")
		return &cond{op: op, l: drawAttrOperand(t, q, label+".l")}
	case k <= 8:
		// bare node variable compared by identity
		c := &cond{op: rapid.SampledFrom([]string{"=", "=", "!="}).Draw(t, label+".op")}
		c.l = operand{kind: opBare, v: rapid.SampledFrom(q.nodeVars).Draw(t, label+".bare")}
		c.l.paren = rapid.IntRange(0, 4).Draw(t, label+".paren") == 0
		switch rapid.IntRange(0, 3).Draw(t, label+".other") {
		case 0:
			c.r = operand{kind: opBare, v: rapid.SampledFrom(q.nodeVars).Draw(t, label+".bare2")}
		case 1:
			c.r = drawAttrOperand(t, q, label+".r")
		default:
			c.r = drawLiteral(t, q.m, label+".r", maxID)
		}
		if rapid.Bool().Draw(t, label+".swap") {
			c.l, c.r = c.r, c.l
		}
		return c
	case k <= 18:
		op := rapid.SampledFrom([]string{"=", "=", "=", "!=", "<", "<=", ">", ">="}).Draw(t, label+".op")
		c := &cond{op: op, l: drawAttrOperand(t, q, label+".l")}
		if rapid.IntRange(0, 2).Draw(t, label+".rattr") == 0 {
			c.r = drawAttrOperand(t, q, label+".r")
		} else {
			c.r = drawLiteral(t, q.m, label+".r", maxID)
		}
		if rapid.Bool().Draw(t, label+".swap") {
			c.l, c.r = c.r, c.l
		}
		c.paren = rapid.IntRange(0, 9).Draw(t, label+".cparen") == 0
		return c
	}
	op := rapid.SampledFrom([]string{"=", "!=", "<"}).Draw(t, label+".op")
	return &cond{op: op, l: drawLiteral(t, q.m, label+".l", maxID), r: drawLiteral(t, q.m, label+".r", maxID)}
}

// ---------------------------------------------------------------------------
// Reference semantics: the test's own evaluator and join.

type binding struct {
	nodes map[string]*herald.Node
	edges map[string]*herald.Edge
	m     *model // for #id.attr
}

// tri is three-valued logic: -1 null (unknown), 0 false, 1 true.
type tri int

func evalOperand(o operand, b binding) herald.Value {
	switch o.kind {
	case opLit:
		return o.lit
	case opRef:
		n := b.m.nodes[herald.NodeID(o.v)]
		switch {
		case n == nil:
			return herald.Null
		case o.attr == "id":
			return herald.String(string(n.ID))
		}
		return n.Attrs.Get(o.attr)
	case opBare:
		return herald.String(string(b.nodes[o.v].ID))
	}
	if e, ok := b.edges[o.v]; ok {
		return e.Attrs.Get(o.attr)
	}
	n := b.nodes[o.v]
	if o.attr == "id" {
		return herald.String(string(n.ID))
	}
	return n.Attrs.Get(o.attr)
}

func isNum(v herald.Value) bool {
	return v.Kind() == herald.KindInt || v.Kind() == herald.KindFloat
}

// refCompare orders two values of comparable kinds (both numeric or the same kind).
// Int and Float compare exactly (math/big), lists of numbers element by element.
func refCompare(a, b herald.Value) (int, bool) {
	switch {
	case isNum(a) && isNum(b):
		return exactNum(a).Cmp(exactNum(b)), true
	case a.Kind() != b.Kind():
		return 0, false
	case a.Kind() == herald.KindString:
		return strings.Compare(a.AsString(), b.AsString()), true
	case a.Kind() == herald.KindBool:
		x, y := 0, 0
		if a.AsBool() {
			x = 1
		}
		if b.AsBool() {
			y = 1
		}
		return x - y, true
	case a.Kind() == herald.KindList:
		al, bl := a.AsList(), b.AsList()
		for i := 0; i < len(al) && i < len(bl); i++ {
			if c, ok := refCompare(al[i], bl[i]); !ok {
				panic("lists of mixed kinds are not generated")
			} else if c != 0 {
				return c, true
			}
		}
		return len(al) - len(bl), true
	}
	panic("unexpected kind " + a.Kind().String())
}

func exactNum(v herald.Value) *big.Float {
	if v.Kind() == herald.KindInt {
		return new(big.Float).SetInt64(v.AsInt())
	}
	return big.NewFloat(v.AsFloat())
}

func evalCond(c *cond, b binding) tri {
	switch c.op {
	case "AND", "OR":
		res := tri(1)
		if c.op == "OR" {
			res = 0
		}
		for _, k := range c.kids {
			v := evalCond(k, b)
			switch {
			case c.op == "AND" && v == 0, c.op == "OR" && v == 1:
				return v
			case v == -1:
				res = -1
			}
		}
		return res
	case "NOT":
		v := evalCond(c.kids[0], b)
		if v == -1 {
			return -1
		}
		return 1 - v
	case "null", "notnull":
		isNull := evalOperand(c.l, b).IsNull()
		if isNull == (c.op == "null") {
			return 1
		}
		return 0
	}
	l, r := evalOperand(c.l, b), evalOperand(c.r, b)
	if l.IsNull() || r.IsNull() {
		return -1
	}
	cmp, ok := refCompare(l, r)
	if !ok {
		switch c.op {
		case "=":
			return 0
		case "!=":
			return 1
		}
		return -1
	}
	var res bool
	switch c.op {
	case "=":
		res = cmp == 0
	case "!=":
		res = cmp != 0
	case "<":
		res = cmp < 0
	case "<=":
		res = cmp <= 0
	case ">":
		res = cmp > 0
	case ">=":
		res = cmp >= 0
	}
	if res {
		return 1
	}
	return 0
}

// expectedRows joins the pattern elements in the written order over the model, by
// brute force (every node for a node binding, every edge for an edge atom), and filters
// with the test's own evaluator.
func expectedRows(q *query, m *model) []string {
	nodes := m.sortedNodeIDs()
	edges := m.sortedEdgeKeys()
	b := binding{nodes: map[string]*herald.Node{}, edges: map[string]*herald.Edge{}, m: m}
	// A session variable is pre-bound unless a node binding of the pattern declares the
	// same name, which shadows it.
	for name, n := range q.outer {
		shadowed := false
		for _, el := range q.elems {
			shadowed = shadowed || el.node && el.v == name
		}
		if !shadowed {
			b.nodes[name] = n
		}
	}
	var rows []string
	var rec func(i int)
	resolve := func(arg string) (herald.NodeID, bool) {
		switch {
		case strings.HasPrefix(arg, "#"):
			return herald.NodeID(arg[1:]), true
		case strings.HasPrefix(arg, "$"):
			v := q.params[arg[1:]]
			if v.Kind() != herald.KindString {
				return "", false
			}
			return herald.NodeID(v.AsString()), true
		}
		return "", false
	}
	rec = func(i int) {
		if i == len(q.elems) {
			if q.where != nil && evalCond(q.where, b) != 1 {
				return
			}
			var cols []string
			for v, n := range b.nodes {
				cols = append(cols, v+"="+string(n.ID))
			}
			for v, e := range b.edges {
				cols = append(cols, v+"="+edgeKeyText(e.Key()))
			}
			sort.Strings(cols)
			rows = append(rows, strings.Join(cols, " "))
			return
		}
		el := q.elems[i]
		if el.node {
			if n, ok := b.nodes[el.v]; ok {
				if n.Type == el.typ {
					rec(i + 1)
				}
				return
			}
			for _, id := range nodes {
				n := m.nodes[id]
				if n.Type != el.typ {
					continue
				}
				b.nodes[el.v] = n
				rec(i + 1)
				delete(b.nodes, el.v)
			}
			return
		}
		for _, k := range edges {
			e := m.edges[k]
			if e.Type != el.typ || len(e.Endpoints) != len(el.args) {
				continue
			}
			var newly []string
			ok := true
			for j, arg := range el.args {
				end := e.Endpoints[j]
				switch {
				case arg == "_":
				case strings.HasPrefix(arg, "#"), strings.HasPrefix(arg, "$"):
					id, valid := resolve(arg)
					if !valid || id != end {
						ok = false
					}
				default:
					if n, bound := b.nodes[arg]; bound {
						if n.ID != end {
							ok = false
						}
					} else {
						b.nodes[arg] = m.nodes[end]
						newly = append(newly, arg)
					}
				}
				if !ok {
					break
				}
			}
			if ok {
				if el.v != "" {
					b.edges[el.v] = e
				}
				rec(i + 1)
				delete(b.edges, el.v)
			}
			for _, v := range newly {
				delete(b.nodes, v)
			}
		}
	}
	rec(0)
	sort.Strings(rows)
	return rows
}

func diffRows(got, want []string) string {
	count := map[string]int{}
	for _, r := range want {
		count[r]++
	}
	for _, r := range got {
		count[r]--
	}
	var b strings.Builder
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch c := count[k]; {
		case c > 0:
			fmt.Fprintf(&b, "\n  missing x%d: %s", c, k)
		case c < 0:
			fmt.Fprintf(&b, "\n  extra   x%d: %s", -c, k)
		}
	}
	return b.String()
}

func dumpModel(m *model) string {
	var b strings.Builder
	for _, id := range m.sortedNodeIDs() {
		n := m.nodes[id]
		fmt.Fprintf(&b, "\n  %s: %s %v", id, n.Type, n.Attrs)
	}
	for _, k := range m.sortedEdgeKeys() {
		fmt.Fprintf(&b, "\n  %s %v", edgeKeyText(k), m.edges[k].Attrs)
	}
	return b.String()
}
