package graph

import (
	"fmt"
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
	attrs := herald.Attrs(nil)
	for _, a := range propAttrNames {
		if rapid.IntRange(0, 9).Draw(t, label+"."+a+"?") < 3 {
			continue // missing
		}
		attrs = attrs.With(a, rapid.SampledFrom(vals).Draw(t, label+"."+a))
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
		Attrs:     herald.Attrs(nil),
	}
	switch rapid.IntRange(0, 4).Draw(t, label+".w") {
	case 1:
		e.Attrs = e.Attrs.With("w", herald.Int(1))
	case 2:
		e.Attrs = e.Attrs.With("w", herald.Int(2))
	case 3:
		e.Attrs = e.Attrs.With("w", herald.Float(1.0))
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
	// Sometimes one type's attributes are not indexed: lookups by attribute must give
	// the same answers through a scan of the type.
	var opts []Option
	if rapid.Bool().Draw(t, "unindexed") {
		opts = append(opts, UnindexedAttrs(rapid.SampledFrom(propNodeTypes).Draw(t, "unindexedType")))
	}
	g := New(opts...)
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
					if av := n.Attrs.Get(attr); !av.IsNull() {
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
	for _, at := range a {
		v, w := at.Value, b.Get(at.Name)
		if v.Kind() != w.Kind() || !v.IsNull() && herald.Compare(v, w) != 0 {
			return false
		}
	}
	for _, at := range b {
		if !at.Value.IsNull() && a.Get(at.Name).IsNull() {
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
		snap := g.Snapshot()
		g.Apply(&herald.ChangeSet{Seq: seq + 1, Changes: changes})
		checkTxAgainstModel(t, g.Begin(), m, maxID, fmt.Sprintf("committed after %q", ops))
		checkTxAgainstModel(t, snap.Begin(), committed, maxID, fmt.Sprintf("snapshot before %q", ops))
		if g.NodeCount() != len(m.nodes) || g.EdgeCount() != len(m.edges) {
			t.Fatalf("committed counts %d nodes %d edges, want %d and %d", g.NodeCount(), g.EdgeCount(), len(m.nodes), len(m.edges))
		}
		// Committed entities carry the new version exactly when they changed.
		for id, n := range m.nodes {
			before := committed.nodes[id]
			changed := before == nil || before.Type != n.Type || !sameAttrs(before.Attrs, n.Attrs)
			if changed != (g.Node(id).Ver == seq+1) {
				t.Fatalf("node %s: version %d after commit %d (changed=%v)", id, g.Node(id).Ver, seq+1, changed)
			}
		}
		for k, e := range m.edges {
			before := committed.edges[k]
			changed := before == nil || !sameAttrs(before.Attrs, e.Attrs)
			if changed != (g.edgeVer(k) == seq+1) {
				t.Fatalf("edge %s: version %d after commit %d (changed=%v)", edgeKeyText(k), g.edgeVer(k), seq+1, changed)
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
