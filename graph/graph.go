// Package graph holds the in-memory state of the graph with its indexes (by type, by
// attribute value, by id, and adjacency), transactions layered over it, and the MATCH
// planner and executor. It is not synchronized: the engine serializes access.
package graph

import (
	"math"
	"sort"

	"github.com/google/btree"

	"github.com/herald-mq/herald"
)

type idxKey struct {
	typ, attr, val string
}

// maxIndexedValue bounds the encoded size of an indexed value: values longer than this
// live in a node's body, out of memory, and lookups of them scan the type instead.
const maxIndexedValue = herald.InlineLimit

// ValueKey returns the equality-index key of v: values that compare equal (including Int
// 5 and Float 5.0) share a key. Lists, maps, nulls and values longer than
// maxIndexedValue bytes are not indexed ("" is returned).
func ValueKey(v herald.Value) string {
	switch v.Kind() {
	case herald.KindNull, herald.KindList, herald.KindMap:
		return ""
	case herald.KindFloat:
		f := v.AsFloat()
		if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
			return string(herald.Int(int64(f)).AppendBinary(nil))
		}
	}
	if v.EncodedLen() > maxIndexedValue {
		return ""
	}
	return string(v.AppendBinary(nil))
}

// Pos is a node's place in arrival order: the seq of the commit that created it, then
// its id. Type scans and index lookups return nodes in this order, and consume mode's
// queues follow it.
type Pos struct {
	Created uint64
	ID      herald.NodeID
}

// PosOf returns n's place in arrival order. A node not committed yet (Created 0) comes
// after every committed one.
func PosOf(n *herald.Node) Pos {
	c := n.Created
	if c == 0 {
		c = math.MaxUint64
	}
	return Pos{c, n.ID}
}

// Less orders positions: by creation, then by id.
func (p Pos) Less(q Pos) bool {
	if p.Created != q.Created {
		return p.Created < q.Created
	}
	return p.ID < q.ID
}

func posLess(a, b Pos) bool { return a.Less(b) }

// Graph is the committed state: types, nodes, edges and their indexes. Each node carries
// the seq of the commit that last wrote it (herald.Node.Ver); each edge's version is
// kept beside it. Snapshot returns a frozen copy in constant time.
type Graph struct {
	gen   uint64                      // generation: indexes of an older one are shared with a snapshot
	types map[string]*herald.TypeDecl // replaced, never changed, on a write

	nodes  pmap[herald.NodeID, *herald.Node]
	byType pmap[string, *posIndex]
	byAttr pmap[idxKey, *posIndex]

	edges       pmap[herald.EdgeKey, edgeRec]
	edgesByType pmap[pair, struct{}] // (type, key)
	adj         pmap[pair, struct{}] // (endpoint, key)

	unindexed map[string]bool // types whose attribute values are not indexed (never written)
}

// Option configures a new graph.
type Option func(*Graph)

// UnindexedAttrs leaves the attribute values of nodes of these types out of the equality
// index: lookups by attribute scan the type instead. It suits types with few nodes that
// are written often, where an index entry per attribute costs more than it saves (the
// server's _Watch nodes: a dozen attributes each, rewritten as their counters move).
func UnindexedAttrs(types ...string) Option {
	return func(g *Graph) {
		for _, t := range types {
			g.unindexed[t] = true
		}
	}
}

// New returns an empty graph.
func New(opts ...Option) *Graph {
	g := &Graph{
		unindexed:   map[string]bool{},
		types:       map[string]*herald.TypeDecl{},
		nodes:       newPmap[herald.NodeID, *herald.Node](less[herald.NodeID]),
		byType:      newPmap[string, *posIndex](less[string]),
		byAttr:      newPmap[idxKey, *posIndex](idxKeyLess),
		edges:       newPmap[herald.EdgeKey, edgeRec](less[herald.EdgeKey]),
		edgesByType: newPmap[pair, struct{}](pairLess),
		adj:         newPmap[pair, struct{}](pairLess),
	}
	for _, o := range opts {
		o(g)
	}
	return g
}

// attrsIndexed reports whether the attribute values of type t's nodes are indexed.
func (g *Graph) attrsIndexed(t string) bool { return !g.unindexed[t] }

// Snapshot returns a copy of g that later writes to g do not change, in constant time.
// The copy may be read (never written) by any number of goroutines while g's writer goes
// on; writes to g after a snapshot copy the parts of the trees they change. Snapshot
// must not run concurrently with a write to g.
func (g *Graph) Snapshot() *Graph {
	s := &Graph{
		gen:         g.gen,
		types:       g.types,
		nodes:       g.nodes.clone(),
		byType:      g.byType.clone(),
		byAttr:      g.byAttr.clone(),
		edges:       g.edges.clone(),
		edgesByType: g.edgesByType.clone(),
		adj:         g.adj.clone(),
		unindexed:   g.unindexed,
	}
	g.gen++
	return s
}

// NodeCount returns the number of nodes.
func (g *Graph) NodeCount() int { return g.nodes.len() }

// EdgeCount returns the number of edges.
func (g *Graph) EdgeCount() int { return g.edges.len() }

// TypeCount returns the number of committed nodes of type t, in constant time.
func (g *Graph) TypeCount(t string) int {
	if ix, ok := g.byType.get(t); ok {
		return ix.t.Len()
	}
	return 0
}

// Type returns a declared type, or nil.
func (g *Graph) Type(name string) *herald.TypeDecl { return g.types[name] }

// Types returns every declared type sorted by name.
func (g *Graph) Types() []*herald.TypeDecl {
	out := make([]*herald.TypeDecl, 0, len(g.types))
	for _, t := range g.types {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NodeTypes returns the names of the types that have committed nodes (declared or
// not, system types included), sorted.
func (g *Graph) NodeTypes() []string {
	var out []string
	g.byType.ascendFrom("", func(t string, _ *posIndex) bool {
		out = append(out, t)
		return true
	})
	return out
}

// Node returns a committed node, or nil. The returned node must not be modified.
func (g *Graph) Node(id herald.NodeID) *herald.Node {
	n, _ := g.nodes.get(id)
	return n
}

// Edge returns a committed edge, or nil. The returned edge must not be modified.
func (g *Graph) Edge(k herald.EdgeKey) *herald.Edge {
	r, _ := g.edges.get(k)
	return r.e
}

// edgeVer returns the seq of the commit that last wrote edge k, or 0.
func (g *Graph) edgeVer(k herald.EdgeKey) uint64 {
	r, _ := g.edges.get(k)
	return r.ver
}

// AscendType calls fn with every committed node of type t placed after pos in arrival
// order, in that order, until fn returns false.
func (g *Graph) AscendType(t string, after Pos, fn func(*herald.Node) bool) {
	ix, ok := g.byType.get(t)
	if !ok {
		return
	}
	ix.t.AscendGreaterOrEqual(after, func(p Pos) bool {
		if p == after {
			return true
		}
		return fn(g.Node(p.ID))
	})
}

// PutType installs a type declaration (nil deletes it).
func (g *Graph) PutType(name string, t *herald.TypeDecl) {
	types := make(map[string]*herald.TypeDecl, len(g.types)+1)
	for k, v := range g.types {
		types[k] = v
	}
	if t == nil {
		delete(types, name)
	} else {
		types[name] = t
	}
	g.types = types
}

// PutNode installs n at version ver (stamped into n.Ver), replacing any node with the
// same id and updating the indexes. n must not be modified afterwards.
func (g *Graph) PutNode(n *herald.Node, ver uint64) {
	n.Ver = ver
	// One search of the node map: the replaced node comes back from the insert.
	if old, _ := g.nodes.set(n.ID, n); old != nil {
		g.unindexNode(old)
	}
	g.indexNode(n)
}

// DeleteNode removes a node (not its edges; see Tx for the cascading KILL).
func (g *Graph) DeleteNode(id herald.NodeID) {
	if old, _ := g.nodes.del(id); old != nil {
		g.unindexNode(old)
	}
}

// ownIndex returns m's index under k for writing: created if absent, cloned first if a
// snapshot shares it.
func ownIndex[K any](g *Graph, m pmap[K, *posIndex], k K) *posIndex {
	ix, ok := m.get(k)
	switch {
	case !ok:
		ix = newPosIndex(g.gen)
		m.set(k, ix)
	case ix.gen != g.gen:
		ix = &posIndex{gen: g.gen, t: ix.t.Clone()}
		m.set(k, ix)
	}
	return ix
}

// dropFromIndex removes p from m's index under k, and the index when it empties
// (unless keep).
func dropFromIndex[K any](g *Graph, m pmap[K, *posIndex], k K, p Pos, keep bool) {
	if _, ok := m.get(k); !ok {
		return
	}
	ix := ownIndex(g, m, k)
	ix.t.Delete(p)
	if ix.t.Len() == 0 && !keep {
		m.del(k)
	}
}

func (g *Graph) indexNode(n *herald.Node) {
	p := PosOf(n)
	ownIndex(g, g.byType, n.Type).t.ReplaceOrInsert(p)
	if !g.attrsIndexed(n.Type) {
		return
	}
	for _, a := range n.Attrs {
		if vk := ValueKey(a.Value); vk != "" {
			ownIndex(g, g.byAttr, idxKey{n.Type, a.Name, vk}).t.ReplaceOrInsert(p)
		}
	}
}

func (g *Graph) unindexNode(n *herald.Node) {
	p := PosOf(n)
	// A type's index stays when its last node goes: the type stays known (HasType),
	// so a drained queue's type still answers a MATCH with nothing rather than as a
	// name nobody ever used.
	dropFromIndex(g, g.byType, n.Type, p, true)
	if !g.attrsIndexed(n.Type) {
		return
	}
	for _, a := range n.Attrs {
		if vk := ValueKey(a.Value); vk != "" {
			dropFromIndex(g, g.byAttr, idxKey{n.Type, a.Name, vk}, p, false)
		}
	}
}

// PutEdge installs e at version ver, replacing the edge with the same key.
func (g *Graph) PutEdge(e *herald.Edge, ver uint64) {
	k := e.Key()
	if _, ok := g.edges.get(k); !ok {
		g.edgesByType.set(pair{e.Type, k}, struct{}{})
		for _, id := range e.Endpoints {
			g.adj.set(pair{string(id), k}, struct{}{})
		}
	}
	g.edges.set(k, edgeRec{e, ver})
}

// DeleteEdge removes an edge.
func (g *Graph) DeleteEdge(k herald.EdgeKey) {
	e := g.Edge(k)
	if e == nil {
		return
	}
	g.edges.del(k)
	g.edgesByType.del(pair{e.Type, k})
	for _, id := range e.Endpoints {
		g.adj.del(pair{string(id), k})
	}
}

// keysUnder returns the edge keys filed under prefix a in m, sorted.
func keysUnder(m pmap[pair, struct{}], a string) []herald.EdgeKey {
	var out []herald.EdgeKey
	m.ascendFrom(pair{a: a}, func(p pair, _ struct{}) bool {
		if p.a != a {
			return false
		}
		out = append(out, p.k)
		return true
	})
	return out
}

// edgesOfType returns the keys of the committed edges of type t, sorted.
func (g *Graph) edgesOfType(t string) []herald.EdgeKey { return keysUnder(g.edgesByType, t) }

// incident returns the keys of the committed edges touching id, sorted.
func (g *Graph) incident(id herald.NodeID) []herald.EdgeKey { return keysUnder(g.adj, string(id)) }

// typeIndex and attrIndex return the committed positions of a type's nodes and of those
// whose attribute has an indexed value, or nil.
func (g *Graph) typeIndex(t string) *btree.BTreeG[Pos] {
	if ix, ok := g.byType.get(t); ok {
		return ix.t
	}
	return nil
}

func (g *Graph) attrIndex(k idxKey) *btree.BTreeG[Pos] {
	if ix, ok := g.byAttr.get(k); ok {
		return ix.t
	}
	return nil
}

// Apply installs a committed change set at version cs.Seq.
func (g *Graph) Apply(cs *herald.ChangeSet) {
	for i := range cs.Changes {
		c := &cs.Changes[i]
		switch c.Kind {
		case herald.TypeChange:
			if c.TypeAfter != nil {
				g.PutType(c.TypeAfter.Name, c.TypeAfter)
			} else if c.TypeBefore != nil {
				g.PutType(c.TypeBefore.Name, nil)
			}
		case herald.NodeChange:
			if c.NodeAfter != nil {
				g.PutNode(c.NodeAfter, cs.Seq)
			} else if c.NodeBefore != nil {
				g.DeleteNode(c.NodeBefore.ID)
			}
		case herald.EdgeChange:
			if c.EdgeAfter != nil {
				g.PutEdge(c.EdgeAfter, cs.Seq)
			} else if c.EdgeBefore != nil {
				g.DeleteEdge(c.EdgeBefore.Key())
			}
		}
	}
}
