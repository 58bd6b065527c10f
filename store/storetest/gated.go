package storetest

import (
	"context"
	"sync"

	"github.com/herald-mq/herald/store"
)

// Gated wraps a backend so that a test can hold its commits (Hold), fail them (Fail),
// and see how they are grouped (Entered). It hides the backend's asynchronous commit,
// so an engine on it commits through Commit.
type Gated struct {
	store.Backend
	// Entered, when set, receives the batch count of each Commit call as it starts.
	Entered chan int

	mu   sync.Mutex
	gate chan struct{} // while set, Commit waits for it to close
	fail error
}

// Commit implements store.Backend.
func (g *Gated) Commit(ctx context.Context, bs []*store.Batch) ([]error, error) {
	g.mu.Lock()
	gate, fail := g.gate, g.fail
	g.mu.Unlock()
	if g.Entered != nil {
		g.Entered <- len(bs)
	}
	if gate != nil {
		<-gate
		// A commit held at the gate fails if the store failed meanwhile.
		g.mu.Lock()
		fail = g.fail
		g.mu.Unlock()
	}
	if fail != nil {
		return nil, fail
	}
	return g.Backend.Commit(ctx, bs)
}

// Hold makes commits wait until release is called.
func (g *Gated) Hold() (release func()) {
	gate := make(chan struct{})
	g.mu.Lock()
	g.gate = gate
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.gate = nil
		g.mu.Unlock()
		close(gate)
	}
}

// Fail makes every later commit fail with err, and those held by Hold as well.
func (g *Gated) Fail(err error) {
	g.mu.Lock()
	g.fail = err
	g.mu.Unlock()
}
