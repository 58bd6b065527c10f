package graph

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	"pgregory.net/rapid"
)

// ---------------------------------------------------------------------------
// A map model of the visible graph state.

type model struct {
	nodes map[herald.NodeID]*herald.Node
	edges map[herald.EdgeKey]*herald.Edge
	// When non-nil, the ids and keys every write touched (including cascades).
	touchedN map[herald.NodeID]bool
	touchedE map[herald.EdgeKey]bool
}

func newModel() *model {
	return &model{nodes: map[herald.NodeID]*herald.Node{}, edges: map[herald.EdgeKey]*herald.Edge{}}
}

func (m *model) clone() *model {
	c := newModel()
	for k, v := range m.nodes {
		c.nodes[k] = v
	}
	for k, v := range m.edges {
		c.edges[k] = v
	}
	return c
}

func (m *model) track() {
	m.touchedN = map[herald.NodeID]bool{}
	m.touchedE = map[herald.EdgeKey]bool{}
}

func (m *model) putNode(n *herald.Node) {
	m.nodes[n.ID] = n
	if m.touchedN != nil {
		m.touchedN[n.ID] = true
	}
}

// deleteNode removes a node and every edge touching it; it returns how many edges went.
func (m *model) deleteNode(id herald.NodeID) int {
	cnt := 0
	for k, e := range m.edges {
		for _, x := range e.Endpoints {
			if x == id {
				m.deleteEdge(k)
				cnt++
				break
			}
		}
	}
	delete(m.nodes, id)
	if m.touchedN != nil {
		m.touchedN[id] = true
	}
	return cnt
}

func (m *model) putEdge(e *herald.Edge) {
	m.edges[e.Key()] = e
	if m.touchedE != nil {
		m.touchedE[e.Key()] = true
	}
}

func (m *model) deleteEdge(k herald.EdgeKey) {
	delete(m.edges, k)
	if m.touchedE != nil {
		m.touchedE[k] = true
	}
}

func (m *model) sortedNodeIDs() []herald.NodeID {
	out := make([]herald.NodeID, 0, len(m.nodes))
	for id := range m.nodes {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (m *model) sortedEdgeKeys() []herald.EdgeKey {
	out := make([]herald.EdgeKey, 0, len(m.edges))
	for k := range m.edges {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ---------------------------------------------------------------------------
// Generators for graph contents.

var (
	propNodeTypes = []string{"A", "B", "C"}
	propEdgeTypes = []string{"r", "s"}
	propAttrNames = []string{"a", "b"}
)

func propNodeID(i int) herald.NodeID { return herald.NodeID("n" + strconv.Itoa(i)) }

// propValues are the attribute values and literals: small numbers including Int/Float
// pairs that compare equal, numbers beyond float64's exact integers, strings that look
// like numbers or node ids, strings too long for the equality index, a Bool and lists.
func propValues() []herald.Value {
	return []herald.Value{
		herald.Int(0), herald.Int(1), herald.Int(2), herald.Int(-1),
		herald.Float(2.0), herald.Float(1.5), herald.Float(0.0), herald.Float(-1.0),
		herald.Int(1<<53 + 1), herald.Float(1 << 53), herald.Int(1 << 62), herald.Float(1 << 62),
		herald.String("2"), herald.String("x"), herald.String("n1"), herald.String(""),
		herald.String(strings.Repeat("z", 300)), herald.String(strings.Repeat("z", 299) + "y"),
		herald.Bool(true),
		herald.List(herald.Int(1), herald.Int(2)), herald.List(herald.Int(1), herald.Float(2.0)), herald.List(herald.Int(1)),
	}
}

func drawAttrs(t *rapid.T, label string) herald.Attrs {
	vals := propValues()
	attrs := herald.Attrs{}
	for _, a := range propAttrNames {
		if rapid.IntRange(0, 9).Draw(t, label+"."+a+"?") < 3 {
			continue // missing
		}
		attrs[a] = rapid.SampledFrom(vals).Draw(t, label+"."+a)
	}
	return attrs
}

func drawNode(t *rapid.T, id herald.NodeID, label string) *herald.Node {
	return &herald.Node{
		ID:    id,
		Type:  rapid.SampledFrom(propNodeTypes).Draw(t, label+".type"),
		Attrs: drawAttrs(t, label),
	}
}

func drawEdge(t *rapid.T, m *model, label string) *herald.Edge {
	ids := m.sortedNodeIDs()
	a := rapid.SampledFrom(ids).Draw(t, label+".from")
	b := a
	if rapid.IntRange(0, 5).Draw(t, label+".loop?") != 0 {
		b = rapid.SampledFrom(ids).Draw(t, label+".to")
	}
	e := &herald.Edge{
		Type:      rapid.SampledFrom(propEdgeTypes).Draw(t, label+".type"),
		Endpoints: []herald.NodeID{a, b},
		Attrs:     herald.Attrs{},
	}
	switch rapid.IntRange(0, 4).Draw(t, label+".w") {
	case 1:
		e.Attrs["w"] = herald.Int(1)
	case 2:
		e.Attrs["w"] = herald.Int(2)
	case 3:
		e.Attrs["w"] = herald.Float(1.0)
	}
	return e
}

// drawOverlayOp applies one random write to both tx and m. It returns a description.
func drawOverlayOp(t *rapid.T, tx *Tx, m *model, maxID int, label string) string {
	for {
		switch rapid.IntRange(0, 9).Draw(t, label+".op") {
		case 0, 1, 2: // create or replace a node
			n := drawNode(t, propNodeID(rapid.IntRange(0, maxID).Draw(t, label+".id")), label)
			tx.PutNode(n)
			m.putNode(n)
			return fmt.Sprintf("PutNode %s:%s %v", n.ID, n.Type, n.Attrs)
		case 3, 4: // delete a node (possibly absent)
			var id herald.NodeID
			if ids := m.sortedNodeIDs(); len(ids) > 0 && rapid.Bool().Draw(t, label+".existing") {
				id = rapid.SampledFrom(ids).Draw(t, label+".id")
			} else {
				id = propNodeID(rapid.IntRange(0, maxID).Draw(t, label+".id"))
			}
			got, want := tx.DeleteNode(id), m.deleteNode(id)
			if got != want {
				t.Fatalf("DeleteNode(%s) reported %d edges, model deleted %d", id, got, want)
			}
			return fmt.Sprintf("DeleteNode %s", id)
		case 5, 6, 7: // create or replace an edge between visible nodes
			if len(m.nodes) == 0 {
				continue
			}
			e := drawEdge(t, m, label)
			tx.PutEdge(e)
			m.putEdge(e)
			return fmt.Sprintf("PutEdge %s %v", edgeKeyText(e.Key()), e.Attrs)
		default: // delete an edge (possibly absent)
			var k herald.EdgeKey
			if ks := m.sortedEdgeKeys(); len(ks) > 0 && rapid.Bool().Draw(t, label+".existing") {
				k = rapid.SampledFrom(ks).Draw(t, label+".key")
			} else {
				a := propNodeID(rapid.IntRange(0, maxID).Draw(t, label+".from"))
				b := propNodeID(rapid.IntRange(0, maxID).Draw(t, label+".to"))
				k = herald.MakeEdgeKey(rapid.SampledFrom(propEdgeTypes).Draw(t, label+".type"), []herald.NodeID{a, b})
			}
			tx.DeleteEdge(k)
			m.deleteEdge(k)
			return fmt.Sprintf("DeleteEdge %s", edgeKeyText(k))
		}
	}
}

// drawCommitted builds a committed graph and its model, through one or more commits
// (Tx + Changes + Apply) or by installing nodes and edges directly.
func drawCommitted(t *rapid.T, maxID int) (*Graph, *model, uint64) {
	g := New()
	m := newModel()
	seq := uint64(0)
	if rapid.Bool().Draw(t, "direct") {
		seq++
		for i, n := 0, rapid.IntRange(0, maxID+1).Draw(t, "nnodes"); i < n; i++ {
			nd := drawNode(t, propNodeID(i), fmt.Sprintf("c%d", i))
			g.PutNode(nd, seq)
			m.putNode(nd)
		}
		if len(m.nodes) > 0 {
			for i, n := 0, rapid.IntRange(0, 30).Draw(t, "nedges"); i < n; i++ {
				e := drawEdge(t, m, fmt.Sprintf("ce%d", i))
				g.PutEdge(e, seq)
				m.putEdge(e)
			}
		}
		return g, m, seq
	}
	for c, nc := 0, rapid.IntRange(1, 3).Draw(t, "ncommits"); c < nc; c++ {
		tx := g.Begin()
		for i, n := 0, rapid.IntRange(0, maxID/2+1).Draw(t, fmt.Sprintf("c%d.nnodes", c)); i < n; i++ {
			nd := drawNode(t, propNodeID(rapid.IntRange(0, maxID).Draw(t, fmt.Sprintf("c%d.n%d.id", c, i))), fmt.Sprintf("c%d.n%d", c, i))
			tx.PutNode(nd)
			m.putNode(nd)
		}
		for i, n := 0, rapid.IntRange(0, 15).Draw(t, fmt.Sprintf("c%d.nedges", c)); i < n && len(m.nodes) > 0; i++ {
			e := drawEdge(t, m, fmt.Sprintf("c%d.e%d", c, i))
			tx.PutEdge(e)
			m.putEdge(e)
		}
		for i, n := 0, rapid.IntRange(0, 6).Draw(t, fmt.Sprintf("c%d.nops", c)); i < n; i++ {
			drawOverlayOp(t, tx, m, maxID, fmt.Sprintf("c%d.%d", c, i))
		}
		if v := tx.Validate(); v != "" {
			t.Fatalf("commit %d: Validate = %q for a consistent write set", c, v)
		}
		seq++
		g.Apply(&herald.ChangeSet{Seq: seq, Changes: tx.Changes()})
	}
	return g, m, seq
}

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
				if v := m.nodes[id].Attrs[a]; !v.IsNull() {
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
		return n.Attrs[o.attr]
	case opBare:
		return herald.String(string(b.nodes[o.v].ID))
	}
	if e, ok := b.edges[o.v]; ok {
		return e.Attrs[o.attr]
	}
	n := b.nodes[o.v]
	if o.attr == "id" {
		return herald.String(string(n.ID))
	}
	return n.Attrs[o.attr]
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

// ---------------------------------------------------------------------------
// Properties.

// TestMatchAgainstBruteForceProp runs random MATCH queries through the planner over a
// transaction (committed graph plus uncommitted writes) and compares the rows with a
// brute-force join over a map model; then it commits and runs the query again.
func TestMatchAgainstBruteForceProp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const maxID = 24
		g, committed, seq := drawCommitted(t, maxID)
		tx := g.Begin()
		m := committed.clone()
		var ops []string
		for i, n := 0, rapid.IntRange(0, 15).Draw(t, "noverlay"); i < n; i++ {
			ops = append(ops, drawOverlayOp(t, tx, m, maxID, fmt.Sprintf("o%d", i)))
		}
		for i, nq := 0, rapid.IntRange(1, 3).Draw(t, "nqueries"); i < nq; i++ {
			q := drawQuery(t, m, maxID)
			want := expectedRows(q, m)
			got, err := runMatch(tx, q.patternString(), q.whereString(), q.params, q.outer)
			if err != nil {
				t.Fatalf("%v", err)
			}
			if d := diffRows(got, want); d != "" {
				t.Fatalf("%s\nover the transaction (overlay ops %q), visible state:%s\ndiff:%s",
					q, ops, dumpModel(m), d)
			}
			// The committed graph sees nothing of the overlay.
			if len(ops) > 0 {
				want := expectedRows(q, committed)
				got, err := runMatch(g.Begin(), q.patternString(), q.whereString(), q.params, q.outer)
				if err != nil {
					t.Fatalf("%v", err)
				}
				if d := diffRows(got, want); d != "" {
					t.Fatalf("%s\nover the committed graph, state:%s\ndiff:%s", q, dumpModel(committed), d)
				}
			}
		}
		// Commit the overlay and query the committed graph.
		if v := tx.Validate(); v != "" {
			t.Fatalf("Validate = %q for a consistent write set (ops %q)", v, ops)
		}
		g.Apply(&herald.ChangeSet{Seq: seq + 1, Changes: tx.Changes()})
		q := drawQuery(t, m, maxID)
		want := expectedRows(q, m)
		got, err := runMatch(g.Begin(), q.patternString(), q.whereString(), q.params, q.outer)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if d := diffRows(got, want); d != "" {
			t.Fatalf("%s\nafter commit (overlay ops %q), state:%s\ndiff:%s", q, ops, dumpModel(m), d)
		}
	})
}

// checkTxAgainstModel compares every read of tx with m.
func checkTxAgainstModel(t *rapid.T, tx *Tx, m *model, maxID int, when string) {
	for i := 0; i <= maxID+1; i++ {
		id := propNodeID(i)
		got, want := tx.Node(id), m.nodes[id]
		if (got == nil) != (want == nil) || got != nil && (got.Type != want.Type || !sameAttrs(got.Attrs, want.Attrs)) {
			t.Fatalf("%s: Node(%s) = %v, want %v", when, id, got, want)
		}
		var inc []herald.EdgeKey
		for _, k := range m.sortedEdgeKeys() {
			for _, x := range m.edges[k].Endpoints {
				if x == id {
					inc = append(inc, k)
					break
				}
			}
		}
		if got := tx.Incident(id); !sameKeys(got, inc) {
			t.Fatalf("%s: Incident(%s) = %v, want %v", when, id, keysText(got), keysText(inc))
		}
	}
	for _, typ := range append(propNodeTypes, "Z") {
		var want []herald.NodeID
		for _, id := range m.sortedNodeIDs() {
			if m.nodes[id].Type == typ {
				want = append(want, id)
			}
		}
		if got := tx.NodesOfType(typ); !sameIDs(got, want) {
			t.Fatalf("%s: NodesOfType(%s) = %v, want %v", when, typ, got, want)
		}
		for _, attr := range propAttrNames {
			for _, v := range propValues() {
				var want []herald.NodeID
				for _, id := range m.sortedNodeIDs() {
					n := m.nodes[id]
					if n.Type != typ {
						continue
					}
					if av := n.Attrs[attr]; !av.IsNull() {
						if c, ok := refCompare(av, v); ok && c == 0 {
							want = append(want, id)
						}
					}
				}
				if ValueKey(v) == "" {
					// Not indexable: every node of the type, for the caller to filter.
					want = tx.NodesOfType(typ)
				}
				if got := tx.NodesByAttr(typ, attr, v); !sameIDs(got, want) {
					t.Fatalf("%s: NodesByAttr(%s, %s, %v) = %v, want %v", when, typ, attr, v, got, want)
				}
			}
			if got := tx.NodesByAttr(typ, attr, herald.Null); len(got) != 0 {
				t.Fatalf("%s: NodesByAttr(%s, %s, null) = %v, want none", when, typ, attr, got)
			}
		}
	}
	for _, typ := range append(propEdgeTypes, "z") {
		var want []herald.EdgeKey
		for _, k := range m.sortedEdgeKeys() {
			if m.edges[k].Type == typ {
				want = append(want, k)
			}
		}
		if got := tx.EdgesOfType(typ); !sameKeys(got, want) {
			t.Fatalf("%s: EdgesOfType(%s) = %v, want %v", when, typ, keysText(got), keysText(want))
		}
	}
	for _, k := range m.sortedEdgeKeys() {
		got, want := tx.Edge(k), m.edges[k]
		if got == nil || got.Type != want.Type || !sameAttrs(got.Attrs, want.Attrs) {
			t.Fatalf("%s: Edge(%s) = %v, want %v", when, edgeKeyText(k), got, want)
		}
	}
	// Every edge the tx sees is in the model (checked through EdgesOfType above for the
	// types in use); also probe absent keys.
	for i := 0; i <= maxID; i += 3 {
		for _, typ := range propEdgeTypes {
			k := herald.MakeEdgeKey(typ, []herald.NodeID{propNodeID(i), propNodeID(i + 1)})
			if (tx.Edge(k) == nil) != (m.edges[k] == nil) {
				t.Fatalf("%s: Edge(%s) = %v, want %v", when, edgeKeyText(k), tx.Edge(k), m.edges[k])
			}
		}
	}
}

// sameAttrs compares attributes exactly: same kinds and values, missing equals null.
func sameAttrs(a, b herald.Attrs) bool {
	for k, v := range a {
		w := b[k]
		if v.Kind() != w.Kind() || !v.IsNull() && herald.Compare(v, w) != 0 {
			return false
		}
	}
	for k, w := range b {
		if !w.IsNull() && a[k].IsNull() {
			return false
		}
	}
	return true
}

func sameNode(a, b *herald.Node) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID && a.Type == b.Type && sameAttrs(a.Attrs, b.Attrs)
}

func sameEdge(a, b *herald.Edge) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Key() == b.Key() && sameAttrs(a.Attrs, b.Attrs)
}

func sameIDs(a, b []herald.NodeID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameKeys(a, b []herald.EdgeKey) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func keysText(ks []herald.EdgeKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = edgeKeyText(k)
	}
	return out
}

// TestTxOverlayReadsMatchModelProp applies random writes to a transaction over a committed
// graph, checks every read against a map model after each write, then commits the net
// changes and checks the committed graph.
func TestTxOverlayReadsMatchModelProp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const maxID = 8
		g, committed, seq := drawCommitted(t, maxID)
		checkTxAgainstModel(t, g.Begin(), committed, maxID, "committed")
		tx := g.Begin()
		m := committed.clone()
		var ops []string
		for i, n := 0, rapid.IntRange(0, 25).Draw(t, "nops"); i < n; i++ {
			ops = append(ops, drawOverlayOp(t, tx, m, maxID, fmt.Sprintf("op%d", i)))
			checkTxAgainstModel(t, tx, m, maxID, fmt.Sprintf("after %q", ops))
		}
		if v := tx.Validate(); v != "" {
			t.Fatalf("Validate = %q for a consistent write set (ops %q)", v, ops)
		}
		changes := tx.Changes()
		checkChanges(t, changes, committed, m, ops)
		g.Apply(&herald.ChangeSet{Seq: seq + 1, Changes: changes})
		checkTxAgainstModel(t, g.Begin(), m, maxID, fmt.Sprintf("committed after %q", ops))
		if g.NodeCount() != len(m.nodes) || g.EdgeCount() != len(m.edges) {
			t.Fatalf("committed counts %d nodes %d edges, want %d and %d", g.NodeCount(), g.EdgeCount(), len(m.nodes), len(m.edges))
		}
		// Committed entities carry the new version exactly when they changed.
		for id, n := range m.nodes {
			before := committed.nodes[id]
			changed := before == nil || before.Type != n.Type || !sameAttrs(before.Attrs, n.Attrs)
			if changed != (g.nver[id] == seq+1) {
				t.Fatalf("node %s: version %d after commit %d (changed=%v)", id, g.nver[id], seq+1, changed)
			}
		}
		for k, e := range m.edges {
			before := committed.edges[k]
			changed := before == nil || !sameAttrs(before.Attrs, e.Attrs)
			if changed != (g.ever[k] == seq+1) {
				t.Fatalf("edge %s: version %d after commit %d (changed=%v)", edgeKeyText(k), g.ever[k], seq+1, changed)
			}
		}
	})
}

// checkChanges verifies that changes is the net difference between before and after:
// one change per entity that differs, with correct images, and no no-op changes.
func checkChanges(t *rapid.T, changes []herald.Change, before, after *model, ops []string) {
	seenN := map[herald.NodeID]bool{}
	seenE := map[herald.EdgeKey]bool{}
	for i, c := range changes {
		switch c.Kind {
		case herald.NodeChange:
			var id herald.NodeID
			switch {
			case c.NodeAfter != nil:
				id = c.NodeAfter.ID
			case c.NodeBefore != nil:
				id = c.NodeBefore.ID
			default:
				t.Fatalf("change %d: node change without images (ops %q)", i, ops)
			}
			if seenN[id] {
				t.Fatalf("change %d: node %s changed twice (ops %q)", i, id, ops)
			}
			seenN[id] = true
			b, a := before.nodes[id], after.nodes[id]
			if !sameNode(c.NodeBefore, b) {
				t.Fatalf("change %d: node %s before image %v, want %v (ops %q)", i, id, c.NodeBefore, b, ops)
			}
			if !sameNode(c.NodeAfter, a) {
				t.Fatalf("change %d: node %s after image %v, want %v (ops %q)", i, id, c.NodeAfter, a, ops)
			}
			if b != nil && a != nil && b.Type == a.Type && sameAttrs(b.Attrs, a.Attrs) {
				t.Fatalf("change %d: no-op change of node %s (ops %q)", i, id, ops)
			}
		case herald.EdgeChange:
			var k herald.EdgeKey
			switch {
			case c.EdgeAfter != nil:
				k = c.EdgeAfter.Key()
			case c.EdgeBefore != nil:
				k = c.EdgeBefore.Key()
			default:
				t.Fatalf("change %d: edge change without images (ops %q)", i, ops)
			}
			if c.EdgeBefore != nil && c.EdgeAfter != nil && c.EdgeBefore.Key() != c.EdgeAfter.Key() {
				t.Fatalf("change %d: edge images with different keys (ops %q)", i, ops)
			}
			if seenE[k] {
				t.Fatalf("change %d: edge %s changed twice (ops %q)", i, edgeKeyText(k), ops)
			}
			seenE[k] = true
			b, a := before.edges[k], after.edges[k]
			if !sameEdge(c.EdgeBefore, b) {
				t.Fatalf("change %d: edge %s before image %v, want %v (ops %q)", i, edgeKeyText(k), c.EdgeBefore, b, ops)
			}
			if !sameEdge(c.EdgeAfter, a) {
				t.Fatalf("change %d: edge %s after image %v, want %v (ops %q)", i, edgeKeyText(k), c.EdgeAfter, a, ops)
			}
			if b != nil && a != nil && sameAttrs(b.Attrs, a.Attrs) {
				t.Fatalf("change %d: no-op change of edge %s (ops %q)", i, edgeKeyText(k), ops)
			}
		default:
			t.Fatalf("change %d: unexpected kind %v", i, c.Kind)
		}
	}
	for id, a := range after.nodes {
		b := before.nodes[id]
		if (b == nil || b.Type != a.Type || !sameAttrs(b.Attrs, a.Attrs)) && !seenN[id] {
			t.Fatalf("node %s changed but has no change (ops %q)", id, ops)
		}
	}
	for id := range before.nodes {
		if after.nodes[id] == nil && !seenN[id] {
			t.Fatalf("node %s deleted but has no change (ops %q)", id, ops)
		}
	}
	for k, a := range after.edges {
		b := before.edges[k]
		if (b == nil || !sameAttrs(b.Attrs, a.Attrs)) && !seenE[k] {
			t.Fatalf("edge %s changed but has no change (ops %q)", edgeKeyText(k), ops)
		}
	}
	for k := range before.edges {
		if after.edges[k] == nil && !seenE[k] {
			t.Fatalf("edge %s deleted but has no change (ops %q)", edgeKeyText(k), ops)
		}
	}
}

// TestTxConcurrentCommitProp runs two transactions over the same graph, commits the first,
// and checks that Validate of the second reports a conflict exactly when it touched
// something the first changed or links a node the first deleted; when it does not,
// committing the second must give the first's state with the second's writes on top
// (including the deletion of edges the first linked to nodes the second deleted).
func TestTxConcurrentCommitProp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const maxID = 6
		g, committed, seq := drawCommitted(t, maxID)
		tx1, tx2 := g.Begin(), g.Begin()
		m1, m2 := committed.clone(), committed.clone()
		m2.track()
		var ops1, ops2 []string
		for i, n := 0, rapid.IntRange(0, 8).Draw(t, "nops1"); i < n; i++ {
			ops1 = append(ops1, drawOverlayOp(t, tx1, m1, maxID, fmt.Sprintf("a%d", i)))
		}
		for i, n := 0, rapid.IntRange(0, 8).Draw(t, "nops2"); i < n; i++ {
			ops2 = append(ops2, drawOverlayOp(t, tx2, m2, maxID, fmt.Sprintf("b%d", i)))
		}
		ch1 := tx1.Changes()
		g.Apply(&herald.ChangeSet{Seq: seq + 1, Changes: ch1})

		changedN := map[herald.NodeID]bool{}
		changedE := map[herald.EdgeKey]bool{}
		for _, c := range ch1 {
			switch {
			case c.NodeAfter != nil:
				changedN[c.NodeAfter.ID] = true
			case c.NodeBefore != nil:
				changedN[c.NodeBefore.ID] = true
			case c.EdgeAfter != nil:
				changedE[c.EdgeAfter.Key()] = true
			case c.EdgeBefore != nil:
				changedE[c.EdgeBefore.Key()] = true
			}
		}
		conflict := false
		for id := range m2.touchedN {
			conflict = conflict || changedN[id]
		}
		for k := range m2.touchedE {
			conflict = conflict || changedE[k]
		}
		for k := range m2.touchedE {
			e := m2.edges[k]
			if e == nil {
				continue
			}
			for _, id := range e.Endpoints {
				if !m2.touchedN[id] && m1.nodes[id] == nil {
					conflict = true
				}
			}
		}
		v := tx2.Validate()
		if (v != "") != conflict {
			t.Fatalf("Validate = %q, want conflict=%v\ntx1 %q\ntx2 %q", v, conflict, ops1, ops2)
		}
		if conflict {
			return
		}
		// The expected state: tx1's result with tx2's final images of what it touched.
		want := m1.clone()
		for k := range m2.touchedE {
			if e := m2.edges[k]; e != nil {
				want.putEdge(e)
			} else {
				want.deleteEdge(k)
			}
		}
		for id := range m2.touchedN {
			if n := m2.nodes[id]; n != nil {
				want.putNode(n)
			} else {
				want.deleteNode(id)
			}
		}
		ch2 := tx2.Changes()
		checkChanges(t, ch2, m1, want, append(append(ops1, "|"), ops2...))
		g.Apply(&herald.ChangeSet{Seq: seq + 2, Changes: ch2})
		checkTxAgainstModel(t, g.Begin(), want, maxID, fmt.Sprintf("after tx1 %q then tx2 %q", ops1, ops2))
		if g.NodeCount() != len(want.nodes) || g.EdgeCount() != len(want.edges) {
			t.Fatalf("committed counts %d nodes %d edges, want %d and %d", g.NodeCount(), g.EdgeCount(), len(want.nodes), len(want.edges))
		}
	})
}

// ---------------------------------------------------------------------------
// Bugs found by the properties above, reduced to their smallest form. Each guards
// against its regression.

// mustRows runs a query over tx and fails the test on an error.
func mustRows(t *testing.T, tx *Tx, pattern, where string, params map[string]herald.Value, outer map[string]*herald.Node) []string {
	t.Helper()
	rows, err := runMatch(tx, pattern, where, params, outer)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func wantRows(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if d := diffRows(got, want); d != "" {
		t.Errorf("%s: got %q, want %q:%s", what, got, want, d)
	}
}

// When the planner looks up a node by id or by attribute with `v = expr` or
// `v.attr = expr`, it compiles expr as a plain expression, so a bare node variable on
// that side yields the node's map instead of its id (eval compares bare node variables
// by id in `=`): the lookup finds nothing and rows are lost. Which rows are lost depends
// on the order the planner binds the variables.
func TestIndexKeyIsBareNodeVar(t *testing.T) {
	g := New()
	g.PutNode(testNode("n1", "A", "s", herald.String("n2")), 1)
	g.PutNode(testNode("n2", "A"), 1)
	tx := g.Begin()
	// x is scanned, then y is looked up by id with key `x` (a map).
	wantRows(t, "x: A, y: A WHERE x = y", mustRows(t, tx, "x: A, y: A", "x = y", nil, nil),
		"x=n1 y=n1", "x=n2 y=n2")
	wantRows(t, "x: A, y: A WHERE x = y.id", mustRows(t, tx, "x: A, y: A", "x = y.id", nil, nil),
		"x=n1 y=n1", "x=n2 y=n2")
	// y is scanned, then x is looked up in the index of A.s with key `y` (a map).
	wantRows(t, "y: A, x: A WHERE x.s = y", mustRows(t, tx, "y: A, x: A", "x.s = y", nil, nil),
		"x=n1 y=n2")
	// The same query with the elements swapped works (y is looked up by id with x.s).
	wantRows(t, "x: A, y: A WHERE x.s = y", mustRows(t, tx, "x: A, y: A", "x.s = y", nil, nil),
		"x=n1 y=n2")
	// The same with a session variable, which is bound before the pattern runs.
	outer := map[string]*herald.Node{"me": g.Node("n2")}
	wantRows(t, "x: A WHERE x = me", mustRows(t, tx, "x: A", "x = me", nil, outer), "me=n2 x=n2")
	wantRows(t, "x: A WHERE x.s = me", mustRows(t, tx, "x: A", "x.s = me", nil, outer), "me=n2 x=n1")
}

// The equality index must agree with `=` for numbers beyond float64's exact integers:
// `x.a = L` (an index lookup) and `x.a + 0 = L` (a scan) give the same rows.
func TestEqualityIndexLargeNumbers(t *testing.T) {
	g := New()
	g.PutNode(testNode("n1", "A", "a", herald.Int(1<<53+1)), 1)
	g.PutNode(testNode("n2", "A", "a", herald.Int(1<<62)), 1)
	g.PutNode(testNode("n3", "A", "a", herald.Float(1<<62)), 1)
	tx := g.Begin()
	for _, lit := range []string{"9007199254740992.0", "9007199254740993", "4611686018427387904.0", "4611686018427387904"} {
		indexed := mustRows(t, tx, "x: A", "x.a = "+lit, nil, nil)
		scanned := mustRows(t, tx, "x: A", "x.a + 0 = "+lit, nil, nil)
		wantRows(t, "x: A WHERE x.a = "+lit+" (index) against x.a + 0 = "+lit+" (scan)", indexed, scanned...)
	}
}

// An edge argument that is a parameter holding a non-String (or null) matches nothing;
// it once indexed the row with slot -1 when checked after another endpoint.
func TestEdgeArgNonStringParam(t *testing.T) {
	g := New()
	g.PutNode(testNode("n1", "A"), 1)
	g.PutNode(testNode("n2", "A"), 1)
	g.PutEdge(testEdge("r", "n1", "n2"), 1)
	tx := g.Begin()
	for _, p := range []herald.Value{herald.Int(3), herald.Null} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("$p = %v: panic %v", p, r)
				}
			}()
			// x is looked up by id first, then r is read through x's adjacency and $p is
			// checked against the second endpoint.
			rows, err := runMatch(tx, "x: A, r(x, $p)", "x = #n1", map[string]herald.Value{"p": p}, nil)
			if err == nil && len(rows) != 0 {
				t.Errorf("$p = %v: got rows %q, want none (or an error)", p, rows)
			}
		}()
	}
}

// Compile declares pattern variables element by element, and an edge argument naming a
// session variable binds the session's node. So a node binding `me: A` shadows the
// session variable me only when it comes before every edge atom that uses me:
// `me: A, r(me, y)` ranges over every A, `r(me, y), me: A` only over the session node.
// The code intends pattern variables to shadow session variables; either way the
// result should not depend on the order of the pattern elements.
func TestSessionVarShadowingIndependentOfOrder(t *testing.T) {
	g := New()
	g.PutNode(testNode("m", "A"), 1)
	g.PutNode(testNode("n1", "A"), 1)
	g.PutNode(testNode("n2", "A"), 1)
	g.PutEdge(testEdge("r", "m", "n2"), 1)
	g.PutEdge(testEdge("r", "n1", "n2"), 1)
	tx := g.Begin()
	outer := map[string]*herald.Node{"me": g.Node("m")}
	first := mustRows(t, tx, "me: A, r(me, y)", "", nil, outer)
	wantRows(t, "me: A, r(me, y)", first, "me=m y=n2", "me=n1 y=n2")
	wantRows(t, "r(me, y), me: A", mustRows(t, tx, "r(me, y), me: A", "", nil, outer), first...)
}
