package engine

import (
	"context"
	"slices"
	"sync"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/store"
)

// DefaultBodyCache is how many bytes of newly written bodies the engine keeps in memory
// (Config.BodyCache): enough for consumers that keep up to read messages without going
// to the store, small enough that a backlog costs memory for its small attributes only.
const DefaultBodyCache = 64 << 20

// externalize moves the large values of a user node's new image into a body written by
// commit seq (see herald.Body), so the graph keeps only small values in memory. The
// image's earlier body is merged in when the statement added large values beside it.
// It returns the image to commit (n itself when nothing moves).
func (e *Engine) externalize(n *herald.Node, seq uint64) (*herald.Node, error) {
	if herald.IsSystemType(n.Type) {
		return n, nil
	}
	inline, big := herald.SplitAttrs(n.Attrs)
	if big == nil {
		return n, nil
	}
	if n.Body != nil {
		old, err := n.Body.Attrs(n.ID)
		if err != nil {
			return nil, err
		}
		big = old.Merge(big)
	}
	data := big.AppendBinary(make([]byte, 0, big.EncodedLen()))
	b := herald.NewBody(seq, big, data, e.cfg.Backend)
	e.bodies.add(b)
	out := *n
	out.Attrs, out.Body = inline, b
	return &out, nil
}

// bodyCache holds the encodings of newly written bodies in memory, oldest first, and
// releases the oldest once they are durable and the cache is over its budget. A
// released body is read back from the store when a statement needs it.
type bodyCache struct {
	mu     sync.Mutex
	budget int
	bytes  int
	queue  []*herald.Body // oldest first; queue[head:] is live
	head   int
}

func (c *bodyCache) add(b *herald.Body) {
	c.mu.Lock()
	c.queue = append(c.queue, b)
	c.bytes += b.Size
	c.mu.Unlock()
}

// trim releases the oldest bodies written up to durable while the cache is over budget.
func (c *bodyCache) trim(durable uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.bytes > c.budget && c.head < len(c.queue) && c.queue[c.head].Seq <= durable {
		b := c.queue[c.head]
		c.queue[c.head] = nil
		c.head++
		c.bytes -= b.Size
		b.Release()
	}
	if c.head > 1024 && c.head > len(c.queue)/2 {
		c.queue = append([]*herald.Body(nil), c.queue[c.head:]...)
		c.head = 0
	}
}

// SysTx is a system transaction: writes to the graph through its Tx (system types
// included) and auxiliary records outside the graph (see store.AuxOp), committed
// together. Services keep their own durable state with PutAux and DeleteAux.
type SysTx struct {
	*graph.Tx
	aux []store.AuxOp
}

// PutAux writes the auxiliary record key (see Engine.LoadAux).
func (t *SysTx) PutAux(key, value []byte) {
	t.aux = append(t.aux, store.AuxOp{Key: key, Value: value})
}

// GrowAux makes room for n more auxiliary writes, for a caller that knows how many it
// will make.
func (t *SysTx) GrowAux(n int) { t.aux = slices.Grow(t.aux, n) }

// DeleteAux deletes the auxiliary record key. once says it was written exactly once.
func (t *SysTx) DeleteAux(key []byte, once bool) {
	t.aux = append(t.aux, store.AuxOp{Key: key, Once: once})
}

// LoadAux calls fn with every auxiliary record in key order, as durably stored.
func (e *Engine) LoadAux(fn func(key, value []byte) error) error {
	return e.cfg.Backend.LoadAux(context.Background(), fn)
}
