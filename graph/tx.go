package graph

import (
	"slices"
	"sort"

	"github.com/google/btree"

	"github.com/herald-mq/herald"
)

type touchKind uint8

const (
	touchNode touchKind = iota + 1
	touchEdge
	touchType
)

type touch struct {
	kind touchKind
	node herald.NodeID
	edge herald.EdgeKey
	typ  string
}

// Tx is a transaction: a private overlay of writes over a Graph. Reads through a Tx see
// the committed graph with the transaction's own writes on top. A Tx with no writes is a
// plain read view. A Tx is used by one goroutine at a time.
type Tx struct {
	g     *Graph
	nodes map[herald.NodeID]*herald.Node // nil value: deleted in this tx
	edges map[herald.EdgeKey]*herald.Edge
	types map[string]*herald.TypeDecl
	nseen map[herald.NodeID]uint64 // committed version at first write (0: absent)
	eseen map[herald.EdgeKey]uint64
	tseen map[string]*herald.TypeDecl
	order []touch
}

// Begin starts a transaction over g.
// Its maps are made by the first write of their kind: most transactions only read.
func (g *Graph) Begin() *Tx { return &Tx{g: g} }

// Reserve makes room for n node writes, for a writer that knows how many it will make
// (a batch of publications or settlements), so the maps are not grown step by step.
func (tx *Tx) Reserve(n int) {
	if tx.nseen == nil && tx.nodes == nil {
		tx.nseen = make(map[herald.NodeID]uint64, n)
		tx.nodes = make(map[herald.NodeID]*herald.Node, n)
	}
	tx.order = slices.Grow(tx.order, n)
}

// Rebase moves the transaction onto g, a later state of the graph it began on, before
// it is validated and committed there. The versions it saw at its first write of each
// entity stay as they were, so Validate reports whatever another commit changed since.
func (tx *Tx) Rebase(g *Graph) { tx.g = g }

// Graph returns the graph under the transaction.
func (tx *Tx) Graph() *Graph { return tx.g }

// Dirty reports whether the transaction has written anything.
func (tx *Tx) Dirty() bool { return len(tx.order) > 0 }

// Type returns a type declaration as the transaction sees it.
func (tx *Tx) Type(name string) *herald.TypeDecl {
	if t, ok := tx.types[name]; ok {
		return t
	}
	return tx.g.types[name]
}

// Node returns a node as the transaction sees it, or nil.
func (tx *Tx) Node(id herald.NodeID) *herald.Node {
	if n, ok := tx.nodes[id]; ok {
		return n
	}
	return tx.g.Node(id)
}

// Edge returns an edge as the transaction sees it, or nil.
func (tx *Tx) Edge(k herald.EdgeKey) *herald.Edge {
	if e, ok := tx.edges[k]; ok {
		return e
	}
	return tx.g.Edge(k)
}

// NodesOfType returns the ids of every node of type t, in arrival order (Pos).
func (tx *Tx) NodesOfType(t string) []herald.NodeID {
	return tx.mergeNodes(tx.g.typeIndex(t), func(n *herald.Node) bool { return n.Type == t })
}

// CountOfType returns the number of nodes of type t; without writes of the transaction
// to that type it takes constant time.
func (tx *Tx) CountOfType(t string) int {
	n := tx.g.TypeCount(t)
	for id, mine := range tx.nodes {
		if old := tx.g.Node(id); old != nil && old.Type == t {
			n--
		}
		if mine != nil && mine.Type == t {
			n++
		}
	}
	return n
}

// CountByAttr returns the number of nodes of type t whose attribute attr equals v; for
// an indexed value, without writes of the transaction, in constant time.
func (tx *Tx) CountByAttr(t, attr string, v herald.Value) int {
	vk := ValueKey(v)
	if vk == "" || len(tx.nodes) > 0 || !tx.g.attrsIndexed(t) {
		n := 0
		for _, id := range tx.NodesByAttr(t, attr, v) {
			if x, err := tx.Node(id).Attr(attr); err == nil && ValueKey(x) == vk && x.Equal(v) {
				n++
			}
		}
		return n
	}
	if ix := tx.g.attrIndex(idxKey{t, attr, vk}); ix != nil {
		return ix.Len()
	}
	return 0
}

// NodesByAttr returns the ids of nodes of type t whose attribute attr equals v, in
// arrival order, using the equality index. For a value too large to be indexed, or a
// List or Map, it returns every node of type t: a superset the caller filters. For a type whose
// attributes are not indexed (UnindexedAttrs) it filters the type's nodes itself.
func (tx *Tx) NodesByAttr(t, attr string, v herald.Value) []herald.NodeID {
	if v.IsNull() {
		return nil
	}
	vk := ValueKey(v)
	if vk == "" {
		return tx.NodesOfType(t)
	}
	if !tx.g.attrsIndexed(t) {
		ids := tx.NodesOfType(t)
		out := ids[:0]
		for _, id := range ids {
			if ValueKey(tx.Node(id).Attrs.Get(attr)) == vk {
				out = append(out, id)
			}
		}
		return out
	}
	return tx.mergeNodes(tx.g.attrIndex(idxKey{t, attr, vk}), func(n *herald.Node) bool {
		return n.Type == t && ValueKey(n.Attrs.Get(attr)) == vk
	})
}

func (tx *Tx) mergeNodes(base *btree.BTreeG[Pos], keep func(*herald.Node) bool) []herald.NodeID {
	var out []herald.NodeID
	if base != nil {
		out = make([]herald.NodeID, 0, base.Len())
		base.Ascend(func(p Pos) bool {
			if _, touched := tx.nodes[p.ID]; !touched {
				out = append(out, p.ID)
			}
			return true
		})
	}
	if len(tx.nodes) == 0 {
		return out
	}
	var mine []Pos
	for _, n := range tx.nodes {
		if n != nil && keep(n) {
			mine = append(mine, PosOf(n))
		}
	}
	if len(mine) == 0 {
		return out
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Less(mine[j]) })
	// Merge the transaction's nodes into the committed ones by position.
	merged := make([]herald.NodeID, 0, len(out)+len(mine))
	i := 0
	for _, id := range out {
		p := PosOf(tx.g.Node(id))
		for i < len(mine) && mine[i].Less(p) {
			merged = append(merged, mine[i].ID)
			i++
		}
		merged = append(merged, id)
	}
	for ; i < len(mine); i++ {
		merged = append(merged, mine[i].ID)
	}
	return merged
}

// EdgesOfType returns the keys of every edge of type t, sorted.
func (tx *Tx) EdgesOfType(t string) []herald.EdgeKey {
	return tx.mergeEdges(tx.g.edgesOfType(t), func(e *herald.Edge) bool { return e.Type == t })
}

// Incident returns the keys of the edges touching node id, sorted.
func (tx *Tx) Incident(id herald.NodeID) []herald.EdgeKey {
	return tx.mergeEdges(tx.g.incident(id), func(e *herald.Edge) bool {
		for _, x := range e.Endpoints {
			if x == id {
				return true
			}
		}
		return false
	})
}

// mergeEdges merges the transaction's edges into base, the committed keys, sorted.
func (tx *Tx) mergeEdges(base []herald.EdgeKey, keep func(*herald.Edge) bool) []herald.EdgeKey {
	if len(tx.edges) == 0 {
		return base
	}
	out := make([]herald.EdgeKey, 0, len(base))
	for _, k := range base {
		if _, touched := tx.edges[k]; !touched {
			out = append(out, k)
		}
	}
	for k, e := range tx.edges {
		if e != nil && keep(e) {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (tx *Tx) touchNode(id herald.NodeID) {
	if tx.nseen == nil {
		tx.nseen = map[herald.NodeID]uint64{}
		if tx.nodes == nil {
			tx.nodes = map[herald.NodeID]*herald.Node{}
		}
	}
	if _, ok := tx.nseen[id]; !ok {
		var ver uint64
		if n := tx.g.Node(id); n != nil {
			ver = n.Ver
		}
		tx.nseen[id] = ver
		tx.order = append(tx.order, touch{kind: touchNode, node: id})
	}
}

func (tx *Tx) touchEdge(k herald.EdgeKey) {
	if tx.eseen == nil {
		tx.eseen = map[herald.EdgeKey]uint64{}
		if tx.edges == nil {
			tx.edges = map[herald.EdgeKey]*herald.Edge{}
		}
	}
	if _, ok := tx.eseen[k]; !ok {
		tx.eseen[k] = tx.g.edgeVer(k)
		tx.order = append(tx.order, touch{kind: touchEdge, edge: k})
	}
}

// PutType declares (or replaces) a type in the transaction.
func (tx *Tx) PutType(t *herald.TypeDecl) {
	if tx.tseen == nil {
		tx.tseen, tx.types = map[string]*herald.TypeDecl{}, map[string]*herald.TypeDecl{}
	}
	if _, ok := tx.tseen[t.Name]; !ok {
		tx.tseen[t.Name] = tx.g.types[t.Name]
		tx.order = append(tx.order, touch{kind: touchType, typ: t.Name})
	}
	tx.types[t.Name] = t
}

// PutNode writes n (create or replace). n must not be modified afterwards.
func (tx *Tx) PutNode(n *herald.Node) {
	tx.touchNode(n.ID)
	tx.nodes[n.ID] = n
}

// DeleteNode deletes a node and every edge touching it. It returns the number of edges
// deleted with it.
func (tx *Tx) DeleteNode(id herald.NodeID) int {
	edges := tx.Incident(id)
	for _, k := range edges {
		tx.DeleteEdge(k)
	}
	tx.touchNode(id)
	tx.nodes[id] = nil
	return len(edges)
}

// PutEdge writes e (create or replace).
func (tx *Tx) PutEdge(e *herald.Edge) {
	k := e.Key()
	tx.touchEdge(k)
	tx.edges[k] = e
}

// DeleteEdge deletes an edge.
func (tx *Tx) DeleteEdge(k herald.EdgeKey) {
	tx.touchEdge(k)
	tx.edges[k] = nil
}

// Validate checks that nothing this transaction wrote was changed by another commit since
// the transaction first touched it, and that every edge it writes still has its endpoints.
// It returns the first conflicting entity's description, or "".
func (tx *Tx) Validate() string {
	for id, ver := range tx.nseen {
		var now uint64
		if n := tx.g.Node(id); n != nil {
			now = n.Ver
		}
		if now != ver {
			return "node #" + string(id)
		}
	}
	for k, ver := range tx.eseen {
		if tx.g.edgeVer(k) != ver {
			return "edge " + string(tx.edgeName(k))
		}
	}
	for name, before := range tx.tseen {
		if tx.g.types[name] != before {
			return "type " + name
		}
	}
	for _, e := range tx.edges {
		if e == nil {
			continue
		}
		for _, id := range e.Endpoints {
			if tx.Node(id) == nil {
				return "node #" + string(id) + " (edge endpoint)"
			}
		}
	}
	return ""
}

func (tx *Tx) edgeName(k herald.EdgeKey) string {
	if e := tx.Edge(k); e != nil {
		return e.Type
	}
	if e := tx.g.Edge(k); e != nil {
		return e.Type
	}
	return "?"
}

// Changes computes the transaction's net effect in first-write order: one Change per
// entity whose committed image differs from its final image. Deleting a node also deletes
// committed edges that touch it even if they were linked after this transaction read them.
func (tx *Tx) Changes() []herald.Change {
	// One change per touched entity, but for the edges a deleted node takes with it.
	out := make([]herald.Change, 0, len(tx.order))
	deletedEdges := map[herald.EdgeKey]bool{}
	for _, t := range tx.order {
		switch t.kind {
		case touchType:
			before, after := tx.g.types[t.typ], tx.types[t.typ]
			if before != after {
				out = append(out, herald.Change{Kind: herald.TypeChange, TypeBefore: before, TypeAfter: after})
			}
		case touchNode:
			before, after := tx.g.Node(t.node), tx.nodes[t.node]
			if before == nil && after == nil {
				continue
			}
			if after == nil {
				for _, k := range tx.g.incident(t.node) {
					if _, touched := tx.edges[k]; !touched && !deletedEdges[k] {
						deletedEdges[k] = true
						out = append(out, herald.Change{Kind: herald.EdgeChange, EdgeBefore: tx.g.Edge(k)})
					}
				}
			}
			if before != nil && after != nil && before.Type == after.Type && before.SameAttrs(after) {
				continue
			}
			out = append(out, herald.Change{Kind: herald.NodeChange, NodeBefore: before, NodeAfter: after})
		case touchEdge:
			before, after := tx.g.Edge(t.edge), tx.edges[t.edge]
			if before == nil && after == nil {
				continue
			}
			if before != nil && after != nil && before.Attrs.Equal(after.Attrs) {
				continue
			}
			out = append(out, herald.Change{Kind: herald.EdgeChange, EdgeBefore: before, EdgeAfter: after})
		}
	}
	if len(out) == 0 {
		return nil // nothing changed: nil, not an empty slice
	}
	return out
}

// ViewAs returns a read view of g in which the nodes and edges present in the maps have
// the images given there (nil: absent) instead of their committed ones. With the
// earlier images of everything changed since some position it is a view of the graph
// at that position. The maps are read, not copied, and must not change while the view
// is in use; the view must not be written or committed.
func (g *Graph) ViewAs(nodes map[herald.NodeID]*herald.Node, edges map[herald.EdgeKey]*herald.Edge) *Tx {
	return &Tx{g: g, nodes: nodes, edges: edges}
}

// HasType reports whether type t is declared, or some node or edge in the transaction's
// view has it, or nodes had it since the graph was loaded: whether a pattern naming t
// names a type anyone has used. It reads no more than one entry of each index.
func (tx *Tx) HasType(t string) bool {
	if tx.Type(t) != nil || tx.CountOfType(t) > 0 {
		return true
	}
	if _, ok := tx.g.byType.get(t); ok {
		return true // it had nodes since the graph was loaded
	}
	found := false
	tx.g.edgesByType.ascendFrom(pair{a: t}, func(p pair, _ struct{}) bool {
		found = p.a == t
		return false
	})
	if found {
		return true
	}
	for _, e := range tx.edges {
		if e != nil && e.Type == t {
			return true
		}
	}
	return false
}

// TypeNames lists the declared types and the types of the nodes present, for
// suggestions in error messages.
func (tx *Tx) TypeNames() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range tx.g.Types() {
		if !seen[d.Name] {
			seen[d.Name] = true
			out = append(out, d.Name)
		}
	}
	for _, t := range tx.g.NodeTypes() {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}
