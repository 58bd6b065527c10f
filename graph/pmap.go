package graph

import (
	"strings"

	"github.com/google/btree"

	"github.com/herald-mq/herald"
)

// The graph's maps and indexes are B-trees that copy on write: cloning one takes
// constant time, and afterwards the clone and the original share every B-tree node until
// one of them writes it. That is what lets a read run on a snapshot of the graph while
// the writer goes on (see Graph.Snapshot).

const degree = 16

type entry[K, V any] struct {
	k K
	v V
}

// pmap is an ordered map on a copy-on-write B-tree.
type pmap[K, V any] struct {
	t *btree.BTreeG[entry[K, V]]
}

func newPmap[K, V any](less func(a, b K) bool) pmap[K, V] {
	return pmap[K, V]{btree.NewG(degree, func(a, b entry[K, V]) bool { return less(a.k, b.k) })}
}

func (m pmap[K, V]) get(k K) (V, bool) {
	e, ok := m.t.Get(entry[K, V]{k: k})
	return e.v, ok
}

// set puts v under k and returns what was there, if anything.
func (m pmap[K, V]) set(k K, v V) (old V, had bool) {
	e, had := m.t.ReplaceOrInsert(entry[K, V]{k, v})
	return e.v, had
}

// del removes k and returns what was there, if anything.
func (m pmap[K, V]) del(k K) (old V, had bool) {
	e, had := m.t.Delete(entry[K, V]{k: k})
	return e.v, had
}

func (m pmap[K, V]) len() int { return m.t.Len() }

// ascendFrom calls fn with the entries from k on, in key order, until fn returns false.
func (m pmap[K, V]) ascendFrom(k K, fn func(K, V) bool) {
	m.t.AscendGreaterOrEqual(entry[K, V]{k: k}, func(e entry[K, V]) bool { return fn(e.k, e.v) })
}

func (m pmap[K, V]) clone() pmap[K, V] { return pmap[K, V]{m.t.Clone()} }

// posIndex is an ordered set of node positions owned by one generation of the graph:
// a writer of a later generation clones it before changing it, so snapshots taken
// earlier keep theirs.
type posIndex struct {
	gen uint64
	t   *btree.BTreeG[Pos]
}

func newPosIndex(gen uint64) *posIndex {
	return &posIndex{gen: gen, t: btree.NewWithFreeListG[Pos](degree, posLess, posFree)}
}

// posFree is the free list every posIndex shares. A tree of its own would come with a
// list of its own (32 slots, about 300 bytes), and an attribute value that one node
// holds has an index of its own: most indexes are that small.
var posFree = btree.NewFreeListG[Pos](btree.DefaultFreeListSize)

// pair is a key under a prefix: an edge key under its type or under an endpoint.
type pair struct {
	a string
	k herald.EdgeKey
}

func pairLess(x, y pair) bool {
	if x.a != y.a {
		return x.a < y.a
	}
	return x.k < y.k
}

func idxKeyLess(x, y idxKey) bool {
	if c := strings.Compare(x.typ, y.typ); c != 0 {
		return c < 0
	}
	if c := strings.Compare(x.attr, y.attr); c != 0 {
		return c < 0
	}
	return x.val < y.val
}

func less[K ~string](a, b K) bool { return a < b }

// edgeRec is a committed edge with the seq of the commit that last wrote it.
type edgeRec struct {
	e   *herald.Edge
	ver uint64
}
