package watch

import (
	"sync/atomic"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/standing"
)

// row is one current match of a stream's query.
type row = standing.Row

// Identical watches share their evaluation: the first stream to evaluate a commit for a
// statement (with the same parameters and actor) keeps the result for the others (see
// standing.Query.ShareKey). They share their compiled statement too (standing.Core.Open). A
// single-node watch shares its events per commit; a join watch shares the match set
// per position of the graph, which each stream then diffs with its own last result.

// cacheSize is how many shared results are kept: the change sets kept in memory
// (recentCap), rounded up to a power of two.
const cacheSize = 1 << 14

type cacheKey struct {
	share uint64 // the interned share key (Service.internShare); 0 is never shared
	seq   uint64
	join  bool
}

// shareRef is an interned share key: its id, and how many streams use it.
type shareRef struct {
	id   uint64
	key  string // the map's key: the streams that share it hold this copy, not one each
	refs int
}

// internShare returns the id of share key k ("" : 0, nothing shared), counting one more
// stream on it. Ids are never reused, so a result cached under a released id is never
// taken for another statement's. s.mu must be held.
func (s *Service) internShare(k string) (id uint64, key string) {
	if k == "" {
		return 0, ""
	}
	r := s.shares[k]
	if r == nil {
		s.nextShare++
		r = &shareRef{id: s.nextShare, key: k}
		s.shares[k] = r
	}
	r.refs++
	return r.id, r.key
}

// releaseShare counts one stream less on share key k. s.mu must be held.
func (s *Service) releaseShare(k string) {
	if r := s.shares[k]; r != nil {
		if r.refs--; r.refs == 0 {
			delete(s.shares, k)
			for _, f := range s.feeds {
				f.dropTally(r.id)
			}
		}
	}
}

type singleResult struct {
	evs   []herald.Event
	nodes []*herald.Node
	binds []eval.Row
}

// evalCache holds the shared results in a fixed table of slots that streams read and
// write without a lock: a thousand streams on one statement neither queue on a mutex
// nor allocate to look a result up. A key has one slot; a newer key that lands on it
// replaces the older one. The slots of one statement's commits are consecutive, so a
// statement keeps its last cacheSize results, as long as others do not crowd them out.
type evalCache struct {
	slots []atomic.Pointer[cacheEntry]
}

type cacheEntry struct {
	key cacheKey
	v   any
}

func newEvalCache() evalCache { return evalCache{slots: make([]atomic.Pointer[cacheEntry], cacheSize)} }

func (c *evalCache) slot(k cacheKey) *atomic.Pointer[cacheEntry] {
	i := k.seq + k.share*0x9E3779B97F4A7C15
	if k.join {
		i += cacheSize / 2
	}
	return &c.slots[i&(cacheSize-1)]
}

func (c *evalCache) get(k cacheKey) (any, bool) {
	if e := c.slot(k).Load(); e != nil && e.key == k {
		return e.v, true
	}
	return nil, false
}

// put keeps v for k unless another stream has just put k (the first result stays, so
// every stream shares its encodings).
func (c *evalCache) put(k cacheKey, v any) {
	p := c.slot(k)
	old := p.Load()
	if old != nil && old.key == k {
		return
	}
	p.CompareAndSwap(old, &cacheEntry{key: k, v: v})
}
