package watch

import (
	"encoding/binary"
	"sort"
	"sync"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/eval"
)

// Identical watches share their evaluation: the first stream to evaluate a commit for a
// statement (with the same parameters and actor) keeps the result for the others. A
// single-node watch shares its events per commit; a join watch shares the match set
// per position of the graph, which each stream then diffs with its own last result.

// cacheSize bounds the shared results kept (oldest first out).
const cacheSize = recentCap

type cacheKey struct {
	share uint64 // the interned share key (Service.internShare); 0 is never shared
	seq   uint64
	join  bool
}

// shareRef is an interned share key: its id, and how many streams use it.
type shareRef struct {
	id   uint64
	refs int
}

// internShare returns the id of share key k ("" : 0, nothing shared), counting one more
// stream on it. Ids are never reused, so a result cached under a released id is never
// taken for another statement's. s.mu must be held.
func (s *Service) internShare(k string) uint64 {
	if k == "" {
		return 0
	}
	r := s.shares[k]
	if r == nil {
		s.nextShare++
		r = &shareRef{id: s.nextShare}
		s.shares[k] = r
	}
	r.refs++
	return r.id
}

// releaseShare counts one stream less on share key k. s.mu must be held.
func (s *Service) releaseShare(k string) {
	if r := s.shares[k]; r != nil {
		if r.refs--; r.refs == 0 {
			delete(s.shares, k)
		}
	}
}

type singleResult struct {
	evs   []herald.Event
	nodes []*herald.Node
	binds []eval.Row
}

// evalCache holds the shared results. Every stream of a statement reads each result,
// one writes it: reads take no lock (a thousand streams on one statement must not queue
// on a mutex), writes take one to keep the eviction order.
type evalCache struct {
	m     sync.Map // cacheKey → singleResult or joinResult
	mu    sync.Mutex
	order []cacheKey
}

func (c *evalCache) get(k cacheKey) (any, bool) { return c.m.Load(k) }

func (c *evalCache) put(k cacheKey, v any) {
	if _, loaded := c.m.LoadOrStore(k, v); loaded {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order = append(c.order, k)
	if len(c.order) > cacheSize {
		c.m.Delete(c.order[0])
		c.order = c.order[1:]
	}
}

// shareKey identifies a statement's evaluation: its text, parameters and actor. Watches
// that show uncommitted changes evaluate on their own.
func (s *spec) shareKey(params map[string]herald.Value, actor herald.NodeID) string {
	if s.immediate {
		return ""
	}
	b := []byte(s.text)
	b = append(b, 0)
	b = append(b, actor...)
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b = append(b, 0)
		b = append(b, n...)
		b = params[n].AppendBinary(b)
	}
	return string(binary.AppendUvarint(b, uint64(len(names))))
}
