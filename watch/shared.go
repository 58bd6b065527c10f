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
const cacheSize = 4096

type cacheKey struct {
	spec string // the statement, parameters and actor
	seq  uint64
	join bool
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
