package standing

import (
	"sync"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
)

// Core is what the standing queries of one engine share, whichever their mode: the
// queries compiled for open watches, the watches and their handles (control.go), the
// _Watch nodes (node.go) and their counters (stats.go). The watch and delivery services
// attach to their engine's Core when they start and detach when they stop; the last to
// detach removes its statement extension and counter flusher from the engine.
type Core struct {
	eng   *engine.Engine
	clock herald.Clock

	mu       sync.Mutex
	attached int
	queries  map[string]*heldQuery
	handles  map[handleKey]Watch
	watches  map[herald.NodeID]Watch
	unext    func()

	stats stats
}

// cores holds the Core of each engine that has services attached.
var cores = struct {
	mu sync.Mutex
	m  map[*engine.Engine]*Core
}{m: map[*engine.Engine]*Core{}}

// Attach returns eng's Core, making it (and installing its statement extension: WATCH
// over the query API, PAUSE, RESUME, CANCEL and ALTER WATCH) when no service has it.
// Each Attach is ended by one Detach.
func Attach(eng *engine.Engine) *Core {
	cores.mu.Lock()
	defer cores.mu.Unlock()
	c := cores.m[eng]
	if c == nil {
		c = &Core{eng: eng, clock: eng.Clock(), queries: map[string]*heldQuery{}, handles: map[handleKey]Watch{}, watches: map[herald.NodeID]Watch{}}
		c.unext = eng.AddExtension(c)
		cores.m[eng] = c
	}
	c.mu.Lock()
	c.attached++
	c.mu.Unlock()
	return c
}

// Detach ends one Attach. The last one removes the core's extension and counter
// flusher from the engine: a stopped service handles no statement.
func (c *Core) Detach() {
	cores.mu.Lock()
	defer cores.mu.Unlock()
	c.mu.Lock()
	c.attached--
	last := c.attached == 0
	c.mu.Unlock()
	if !last {
		return
	}
	delete(cores.m, c.eng)
	c.unext()
	c.stats.mu.Lock()
	if c.stats.unflush != nil {
		c.stats.unflush()
		c.stats.unflush = nil
	}
	c.stats.mu.Unlock()
}

// heldQuery is a compiled query, the key it is held under, and how many opens hold it.
type heldQuery struct {
	q    *Query
	key  string // the map's key: the opens that share it hold this copy, not one each
	refs int
}

// acquire returns the query compiled for key by an open that still holds it, or
// compiles one with compile and keeps it for the next identical open, and the key as
// the core holds it. Each acquire is ended by one release.
func (c *Core) acquire(key string, compile func() (*Query, error)) (*Query, string, error) {
	c.mu.Lock()
	if h := c.queries[key]; h != nil {
		h.refs++
		c.mu.Unlock()
		return h.q, h.key, nil
	}
	c.mu.Unlock()
	q, err := compile()
	if err != nil {
		return nil, "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.queries[key]; h != nil {
		h.refs++ // compiled meanwhile by another open: share that one
		return h.q, h.key, nil
	}
	c.queries[key] = &heldQuery{q: q, key: key, refs: 1}
	return q, key, nil
}

// Release gives back a query an open held (Opened.Hold); identical opens share it while
// one holds it. An empty hold does nothing.
func (c *Core) Release(hold string) {
	if hold != "" {
		c.release(hold)
	}
}

// release ends one acquire of key.
func (c *Core) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.queries[key]; h != nil {
		if h.refs--; h.refs == 0 {
			delete(c.queries, key)
		}
	}
}

// Held is how many compiled queries open watches share.
func (c *Core) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queries)
}
