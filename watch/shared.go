package watch

import (
	"encoding/binary"
	"sort"
	"sync/atomic"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
)

// Identical watches share their evaluation: the first stream to evaluate a commit for a
// statement (with the same parameters and actor) keeps the result for the others. A
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

// Identical watches also share their compiled statement: the spec and syntax tree of a
// statement are read-only once compiled, so the watches with the same text, parameters,
// actor and session hold one copy (a thousand idle watches on one statement hold one).
type compiledRef struct {
	sp   *spec
	stmt *ast.WatchStmt
	key  string // the map's key: the streams that share it hold this copy, not one each
	refs int
}

// compiledKey identifies a compilation: the text as written, the parameters, the actor
// and the session.
func compiledKey(query string, params map[string]herald.Value, actor herald.NodeID, session string, p *herald.Principal) string {
	b := []byte(query)
	b = append(b, 0)
	b = append(b, actor...)
	b = append(b, 0)
	b = append(b, session...)
	b = appendPrincipal(b, p)
	b, _ = appendParams(b, params)
	return string(b)
}

// appendPrincipal appends who a watch acts for: what an evaluation may read is decided
// by the principal's grants, so they are part of what identical watches share.
func appendPrincipal(b []byte, p *herald.Principal) []byte {
	if p == nil {
		return b
	}
	b = append(b, 1)
	b = append(b, p.Name...)
	for _, g := range p.Grants {
		b = append(b, 0)
		b = append(b, g...)
	}
	return b
}

// appendParams appends the parameters, in the order of their names, and returns how
// many there are.
func appendParams(b []byte, params map[string]herald.Value) ([]byte, int) {
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
	return b, len(names)
}

// compiled returns the statement compiled for key k by a watch still open, or compiles
// it.
func (s *Service) compiled(k, query string, params map[string]herald.Value, actor herald.NodeID, session string, reads func(string) error) (*spec, *ast.WatchStmt, error) {
	s.mu.Lock()
	r := s.compiledRefs[k]
	s.mu.Unlock()
	if r != nil {
		return r.sp, r.stmt, nil
	}
	return compile(s.eng, query, params, actor, session, reads)
}

// holdCompiled counts w on its compiled statement (keeping it for the next identical
// watch), or, when another compilation of the same key is held, keeps w's to itself.
// s.mu must be held.
func (s *Service) holdCompiled(w *watcher) {
	r := s.compiledRefs[w.compiledKey]
	switch {
	case r == nil:
		s.compiledRefs[w.compiledKey] = &compiledRef{sp: w.sp, stmt: w.stmt, key: w.compiledKey, refs: 1}
	case r.sp == w.sp:
		r.refs++
		w.compiledKey = r.key
	default:
		w.compiledKey = ""
	}
}

// releaseCompiled counts w off its compiled statement. s.mu must be held.
func (s *Service) releaseCompiled(w *watcher) {
	if w.compiledKey == "" {
		return
	}
	if r := s.compiledRefs[w.compiledKey]; r != nil && r.sp == w.sp {
		if r.refs--; r.refs == 0 {
			delete(s.compiledRefs, w.compiledKey)
		}
	}
	w.compiledKey = ""
}

// shareKey identifies a statement's evaluation: its text, parameters, actor and the
// principal whose grants bound what it may read. Watches that show uncommitted changes
// evaluate on their own.
func (s *spec) shareKey(params map[string]herald.Value, actor herald.NodeID, p *herald.Principal) string {
	if s.immediate {
		return ""
	}
	b := []byte(s.text)
	b = append(b, 0)
	b = append(b, actor...)
	b = appendPrincipal(b, p)
	b, n := appendParams(b, params)
	return string(binary.AppendUvarint(b, uint64(n)))
}
