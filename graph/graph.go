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

type set[K comparable] map[K]struct{}

func (s set[K]) add(k K) { s[k] = struct{}{} }

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

// idIndex is an ordered set of nodes by arrival.
type idIndex = btree.BTreeG[Pos]

func newIDIndex() *idIndex { return btree.NewG[Pos](16, posLess) }

// Graph is the committed state: types, nodes, edges and their indexes. Each node carries
// the seq of the commit that last wrote it (herald.Node.Ver); each edge's version is
// kept beside it.
type Graph struct {
	types map[string]*herald.TypeDecl

	nodes  map[herald.NodeID]*herald.Node
	byType map[string]*idIndex
	byAttr map[idxKey]*idIndex

	edges       map[herald.EdgeKey]*herald.Edge
	ever        map[herald.EdgeKey]uint64
	edgesByType map[string]set[herald.EdgeKey]
	adj         map[herald.NodeID]set[herald.EdgeKey]
}

// New returns an empty graph.
func New() *Graph {
	return &Graph{
		types:       map[string]*herald.TypeDecl{},
		nodes:       map[herald.NodeID]*herald.Node{},
		byType:      map[string]*idIndex{},
		byAttr:      map[idxKey]*idIndex{},
		edges:       map[herald.EdgeKey]*herald.Edge{},
		ever:        map[herald.EdgeKey]uint64{},
		edgesByType: map[string]set[herald.EdgeKey]{},
		adj:         map[herald.NodeID]set[herald.EdgeKey]{},
	}
}

// NodeCount returns the number of nodes.
func (g *Graph) NodeCount() int { return len(g.nodes) }

// EdgeCount returns the number of edges.
func (g *Graph) EdgeCount() int { return len(g.edges) }

// TypeCount returns the number of committed nodes of type t, in constant time.
func (g *Graph) TypeCount(t string) int {
	if ix := g.byType[t]; ix != nil {
		return ix.Len()
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

// Node returns a committed node, or nil. The returned node must not be modified.
func (g *Graph) Node(id herald.NodeID) *herald.Node { return g.nodes[id] }

// Edge returns a committed edge, or nil. The returned edge must not be modified.
func (g *Graph) Edge(k herald.EdgeKey) *herald.Edge { return g.edges[k] }

// AscendType calls fn with every committed node of type t placed after pos in arrival
// order, in that order, until fn returns false.
func (g *Graph) AscendType(t string, after Pos, fn func(*herald.Node) bool) {
	ix := g.byType[t]
	if ix == nil {
		return
	}
	ix.AscendGreaterOrEqual(after, func(p Pos) bool {
		if p == after {
			return true
		}
		return fn(g.nodes[p.ID])
	})
}

// PutType installs a type declaration (nil deletes it).
func (g *Graph) PutType(name string, t *herald.TypeDecl) {
	if t == nil {
		delete(g.types, name)
		return
	}
	g.types[name] = t
}

// PutNode installs n at version ver (stamped into n.Ver), replacing any node with the
// same id and updating the indexes. n must not be modified afterwards.
func (g *Graph) PutNode(n *herald.Node, ver uint64) {
	if old := g.nodes[n.ID]; old != nil {
		g.unindexNode(old)
	}
	n.Ver = ver
	g.nodes[n.ID] = n
	g.indexNode(n)
}

// DeleteNode removes a node (not its edges; see Tx for the cascading KILL).
func (g *Graph) DeleteNode(id herald.NodeID) {
	if old := g.nodes[id]; old != nil {
		g.unindexNode(old)
		delete(g.nodes, id)
	}
}

func (g *Graph) indexNode(n *herald.Node) {
	p := PosOf(n)
	ix := g.byType[n.Type]
	if ix == nil {
		ix = newIDIndex()
		g.byType[n.Type] = ix
	}
	ix.ReplaceOrInsert(p)
	for _, a := range n.Attrs {
		vk := ValueKey(a.Value)
		if vk == "" {
			continue
		}
		k := idxKey{n.Type, a.Name, vk}
		ix := g.byAttr[k]
		if ix == nil {
			ix = newIDIndex()
			g.byAttr[k] = ix
		}
		ix.ReplaceOrInsert(p)
	}
}

func (g *Graph) unindexNode(n *herald.Node) {
	p := PosOf(n)
	if ix := g.byType[n.Type]; ix != nil {
		ix.Delete(p)
		if ix.Len() == 0 {
			delete(g.byType, n.Type)
		}
	}
	for _, a := range n.Attrs {
		vk := ValueKey(a.Value)
		if vk == "" {
			continue
		}
		k := idxKey{n.Type, a.Name, vk}
		if ix := g.byAttr[k]; ix != nil {
			ix.Delete(p)
			if ix.Len() == 0 {
				delete(g.byAttr, k)
			}
		}
	}
}

// PutEdge installs e at version ver, replacing the edge with the same key.
func (g *Graph) PutEdge(e *herald.Edge, ver uint64) {
	k := e.Key()
	if g.edges[k] == nil {
		s := g.edgesByType[e.Type]
		if s == nil {
			s = set[herald.EdgeKey]{}
			g.edgesByType[e.Type] = s
		}
		s.add(k)
		for _, id := range e.Endpoints {
			a := g.adj[id]
			if a == nil {
				a = set[herald.EdgeKey]{}
				g.adj[id] = a
			}
			a.add(k)
		}
	}
	g.edges[k] = e
	g.ever[k] = ver
}

// DeleteEdge removes an edge.
func (g *Graph) DeleteEdge(k herald.EdgeKey) {
	e := g.edges[k]
	if e == nil {
		return
	}
	delete(g.edges, k)
	delete(g.ever, k)
	if s := g.edgesByType[e.Type]; s != nil {
		delete(s, k)
		if len(s) == 0 {
			delete(g.edgesByType, e.Type)
		}
	}
	for _, id := range e.Endpoints {
		if a := g.adj[id]; a != nil {
			delete(a, k)
			if len(a) == 0 {
				delete(g.adj, id)
			}
		}
	}
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

func sortedEdgeKeys(s set[herald.EdgeKey]) []herald.EdgeKey {
	out := make([]herald.EdgeKey, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
