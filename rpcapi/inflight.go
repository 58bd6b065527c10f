package rpcapi

import (
	"sync"
	"sync/atomic"
)

// DefaultMaxInflightPublishes is Options.MaxInflightPublishes's default.
const DefaultMaxInflightPublishes = 100000

// inflight counts each principal's published messages not yet durable, across its
// publish streams.
type inflight struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

// take reserves n messages for name, or reports false when that would pass the cap.
func (f *inflight) take(name string, n int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[name]+n > f.max {
		return false
	}
	f.n[name] += n
	return true
}

func (f *inflight) release(name string, n int) {
	if n <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[name] -= n; f.n[name] <= 0 {
		delete(f.n, name)
	}
}

// streamHold is one publish stream's share of its principal's count: what it took and
// has not given back, all of which goes back when the stream ends.
type streamHold struct {
	f    *inflight
	name string
	held atomic.Int64
}

func (h *streamHold) take(n int) bool {
	if h == nil {
		return true
	}
	if !h.f.take(h.name, n) {
		return false
	}
	h.held.Add(int64(n))
	return true
}

func (h *streamHold) done(n int) {
	if h != nil {
		h.held.Add(-int64(n))
		h.f.release(h.name, n)
	}
}

func (h *streamHold) end() {
	if h != nil {
		h.f.release(h.name, int(h.held.Swap(0)))
	}
}
