package graph

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/herald-mq/herald"
)

// TestSnapshotUnchangedByWrites takes snapshots of a graph deep enough for its trees to
// have several levels, keeps writing (replacing, deleting and adding nodes and edges)
// and checks that each snapshot still reads exactly as the graph did when it was taken.
func TestSnapshotUnchangedByWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	g := New()
	type state struct {
		nodes map[herald.NodeID]string // id -> value of attribute v
		edges map[herald.EdgeKey]bool
	}
	cur := state{map[herald.NodeID]string{}, map[herald.EdgeKey]bool{}}
	copyState := func(s state) state {
		c := state{map[herald.NodeID]string{}, map[herald.EdgeKey]bool{}}
		for k, v := range s.nodes {
			c.nodes[k] = v
		}
		for k := range s.edges {
			c.edges[k] = true
		}
		return c
	}
	id := func(i int) herald.NodeID { return herald.NodeID(fmt.Sprintf("n%05d", i)) }
	check := func(what string, g *Graph, s state) {
		t.Helper()
		if g.NodeCount() != len(s.nodes) || g.EdgeCount() != len(s.edges) {
			t.Fatalf("%s: %d nodes %d edges, want %d and %d", what, g.NodeCount(), g.EdgeCount(), len(s.nodes), len(s.edges))
		}
		if g.TypeCount("T") != len(s.nodes) {
			t.Fatalf("%s: TypeCount = %d, want %d", what, g.TypeCount("T"), len(s.nodes))
		}
		byVal := map[string]int{}
		for nid, v := range s.nodes {
			n := g.Node(nid)
			if n == nil || n.Attrs.Get("v").AsString() != v {
				t.Fatalf("%s: node %s = %v, want v=%q", what, nid, n, v)
			}
			byVal[v]++
		}
		tx := g.Begin()
		for v, want := range byVal {
			if got := tx.CountByAttr("T", "v", herald.String(v)); got != want {
				t.Fatalf("%s: CountByAttr(v=%q) = %d, want %d", what, v, got, want)
			}
		}
		if got := len(tx.EdgesOfType("E")); got != len(s.edges) {
			t.Fatalf("%s: %d edges of type E, want %d", what, got, len(s.edges))
		}
		for k := range s.edges {
			if g.Edge(k) == nil {
				t.Fatalf("%s: edge %s missing", what, edgeKeyText(k))
			}
		}
	}
	type snap struct {
		g *Graph
		s state
	}
	var snaps []snap
	for seq := uint64(1); seq <= 60; seq++ {
		for range 200 {
			i := r.IntN(3000)
			switch op := r.IntN(10); {
			case op < 6:
				v := fmt.Sprintf("v%d", r.IntN(20))
				g.PutNode(testNode(string(id(i)), "T", "v", herald.String(v)), seq)
				cur.nodes[id(i)] = v
			case op < 8:
				if _, ok := cur.nodes[id(i)]; ok {
					for _, k := range g.incident(id(i)) {
						g.DeleteEdge(k)
						delete(cur.edges, k)
					}
					g.DeleteNode(id(i))
					delete(cur.nodes, id(i))
				}
			default:
				j := r.IntN(3000)
				_, okA := cur.nodes[id(i)]
				_, okB := cur.nodes[id(j)]
				if okA && okB {
					e := testEdge("E", string(id(i)), string(id(j)))
					g.PutEdge(e, seq)
					cur.edges[e.Key()] = true
				}
			}
		}
		if seq%5 == 0 {
			snaps = append(snaps, snap{g.Snapshot(), copyState(cur)})
		}
	}
	check("graph", g, cur)
	for i, s := range snaps {
		check(fmt.Sprintf("snapshot %d", i), s.g, s.s)
	}
}
