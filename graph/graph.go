// Package graph holds the in-memory state of the graph with its indexes (by type, by
// attribute value, by id, and adjacency), transactions layered over it, and the MATCH
// planner and executor. It is not synchronized: the engine serializes access.
package graph

import (
	"math"
	"sort"

	"github.com/herald-mq/herald"
)

type idxKey struct {
	typ, attr, val string
}

// maxIndexedValue bounds the encoded size of an indexed value, so large payloads do not
// double their memory in the index. Lookups of larger values scan the type instead.
const maxIndexedValue = 256

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
	case herald.KindString:
		if len(v.AsString()) > maxIndexedValue-8 {
			return ""
		}
	}
	return string(v.AppendBinary(nil))
}

type set[K comparable] map[K]struct{}

func (s set[K]) add(k K) { s[k] = struct{}{} }

// Graph is the committed state: types, nodes, edges and their indexes. Each node and edge
// remembers the seq of the commit that last wrote it (its version).
type Graph struct {
	types map[string]*herald.TypeDecl

	nodes  map[herald.NodeID]*herald.Node
	nver   map[herald.NodeID]uint64
	byType map[string]set[herald.NodeID]
	byAttr map[idxKey]set[herald.NodeID]

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
		nver:        map[herald.NodeID]uint64{},
		byType:      map[string]set[herald.NodeID]{},
		byAttr:      map[idxKey]set[herald.NodeID]{},
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

// PutType installs a type declaration (nil deletes it).
func (g *Graph) PutType(name string, t *herald.TypeDecl) {
	if t == nil {
		delete(g.types, name)
		return
	}
	g.types[name] = t
}

// PutNode installs n at version ver, replacing any node with the same id and updating
// the indexes. n must not be modified afterwards.
func (g *Graph) PutNode(n *herald.Node, ver uint64) {
	if old := g.nodes[n.ID]; old != nil {
		g.unindexNode(old)
	}
	g.nodes[n.ID] = n
	g.nver[n.ID] = ver
	g.indexNode(n)
}

// DeleteNode removes a node (not its edges; see Tx for the cascading KILL).
func (g *Graph) DeleteNode(id herald.NodeID) {
	if old := g.nodes[id]; old != nil {
		g.unindexNode(old)
		delete(g.nodes, id)
		delete(g.nver, id)
	}
}

func (g *Graph) indexNode(n *herald.Node) {
	s := g.byType[n.Type]
	if s == nil {
		s = set[herald.NodeID]{}
		g.byType[n.Type] = s
	}
	s.add(n.ID)
	for a, v := range n.Attrs {
		vk := ValueKey(v)
		if vk == "" {
			continue
		}
		k := idxKey{n.Type, a, vk}
		s := g.byAttr[k]
		if s == nil {
			s = set[herald.NodeID]{}
			g.byAttr[k] = s
		}
		s.add(n.ID)
	}
}

func (g *Graph) unindexNode(n *herald.Node) {
	if s := g.byType[n.Type]; s != nil {
		delete(s, n.ID)
		if len(s) == 0 {
			delete(g.byType, n.Type)
		}
	}
	for a, v := range n.Attrs {
		vk := ValueKey(v)
		if vk == "" {
			continue
		}
		k := idxKey{n.Type, a, vk}
		if s := g.byAttr[k]; s != nil {
			delete(s, n.ID)
			if len(s) == 0 {
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

func sortedIDs(s set[herald.NodeID]) []herald.NodeID {
	out := make([]herald.NodeID, 0, len(s))
	for id := range s {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sortedEdgeKeys(s set[herald.EdgeKey]) []herald.EdgeKey {
	out := make([]herald.EdgeKey, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
