package graph

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/btree"

	"github.com/herald-mq/herald"
)

// TestLoaderMatchesPutNode: a graph filled through a Loader, in batches and with an id
// installed twice, has the node map and the type and attribute indexes that PutNode
// gives for the same nodes in the same order.
func TestLoaderMatchesPutNode(t *testing.T) {
	var nodes []*herald.Node
	for i := range 300 {
		typ := []string{"A", "B", "C"}[i%3]
		nodes = append(nodes, &herald.Node{ID: herald.NodeID(fmt.Sprintf("n%03d", i)), Type: typ, Created: uint64(i + 1), Ver: uint64(i + 1),
			Attrs: herald.Attrs{{Name: "k", Value: herald.Int(int64(i % 7))}}})
	}
	// n005 again, with another type and value: it must replace the first one everywhere.
	nodes = append(nodes, &herald.Node{ID: "n005", Type: "B", Created: 6, Ver: 301, Attrs: herald.Attrs{{Name: "k", Value: herald.Int(99)}}})
	clone := func() []*herald.Node {
		out := make([]*herald.Node, len(nodes))
		for i, n := range nodes {
			out[i] = n.Clone()
		}
		return out
	}

	want := New()
	for _, n := range clone() {
		want.PutNode(n, n.Ver)
	}
	got := New()
	l := got.Loader()
	all := clone()
	for lo := 0; lo < len(all); lo += 64 {
		l.Nodes(all[lo:min(lo+64, len(all))])
	}
	l.Close()

	if got.NodeCount() != want.NodeCount() {
		t.Fatalf("%d nodes, want %d", got.NodeCount(), want.NodeCount())
	}
	for _, typ := range []string{"A", "B", "C"} {
		if a, b := positions(got.typeIndex(typ)), positions(want.typeIndex(typ)); !slices.Equal(a, b) {
			t.Errorf("type %s: %v, want %v", typ, a, b)
		}
		for _, v := range []int64{0, 3, 5, 99} {
			k := idxKey{typ, "k", ValueKey(herald.Int(v))}
			if a, b := positions(got.attrIndex(k)), positions(want.attrIndex(k)); !slices.Equal(a, b) {
				t.Errorf("%s.k = %d: %v, want %v", typ, v, a, b)
			}
		}
	}
	if n := got.Node("n005"); n == nil || n.Type != "B" || n.Ver != 301 {
		t.Errorf("n005 is %+v", n)
	}
}

func positions(t *btree.BTreeG[Pos]) []Pos {
	var out []Pos
	if t != nil {
		t.Ascend(func(p Pos) bool { out = append(out, p); return true })
	}
	return out
}
