package watch

import (
	"context"
	"sort"
	"sync"

	"github.com/herald-mq/herald"
)

// recentCap is how many of the latest durable change sets the service keeps in memory
// (and how many shared results, see cacheSize).
const recentCap = 16384

// recent keeps the latest durable change sets, as the engine announced them, so that a
// stream that fell behind reads them from memory: a thousand lagging streams on one
// pattern then share one copy of each commit instead of each reading and decoding it
// from the change log. It holds every set after floor, in commit order, up to max of
// them; older positions are read from the log.
type recent struct {
	max   int
	mu    sync.RWMutex
	sets  []*herald.ChangeSet // a ring: the oldest at head
	head  int
	floor uint64 // every commit after this position is held (until evicted)
	ok    bool   // floor is set: the service has started listening
}

// start sets the position after which every durable commit will be added.
func (r *recent) start(seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sets, r.head, r.floor, r.ok = r.sets[:0], 0, seq, true
}

// add appends durable change sets in commit order, evicting the oldest past max.
func (r *recent) add(sets []*herald.ChangeSet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cs := range sets {
		if cs.Seq <= r.last() {
			continue // announced before the position the service started from
		}
		if len(r.sets) < r.max {
			r.sets = append(r.sets, cs)
			continue
		}
		r.floor = r.sets[r.head].Seq
		r.sets[r.head] = cs
		r.head = (r.head + 1) % len(r.sets)
	}
}

// skip moves the floor past sets without holding them, and lets go of what is held:
// with no stream open, nobody can read them from memory (a stream opened later starts
// at the newest position, and one that resumes from before the floor reads the log).
func (r *recent) skip(sets []*herald.ChangeSet) {
	if len(sets) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq := sets[len(sets)-1].Seq; seq > r.last() {
		clear(r.sets)
		r.sets, r.head, r.floor = r.sets[:0], 0, seq
	}
}

// held is how many sets memory holds.
func (r *recent) held() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.sets)
}

// last is the position of the newest set held (the floor when none is).
func (r *recent) last() uint64 {
	if len(r.sets) == 0 {
		return r.floor
	}
	return r.sets[(r.head+len(r.sets)-1)%len(r.sets)].Seq
}

// after returns up to limit sets after position seq, and whether memory covers seq
// (false: read the log). Empty and true means nothing durable is held past seq yet.
func (r *recent) after(seq uint64, limit int) ([]*herald.ChangeSet, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.ok || seq < r.floor {
		return nil, false
	}
	n := len(r.sets)
	at := func(i int) *herald.ChangeSet { return r.sets[(r.head+i)%n] }
	i := sort.Search(n, func(i int) bool { return at(i).Seq > seq })
	out := make([]*herald.ChangeSet, 0, min(limit, n-i))
	for ; i < n && len(out) < limit; i++ {
		out = append(out, at(i))
	}
	return out, true
}

// changes returns up to limit durable change sets after position after: from memory
// when it still holds them, else from the change log. A position the log no longer
// keeps fails as it does there, whatever memory holds: what a stream may resume from
// does not depend on what this process happens to remember.
func (s *Service) changes(after uint64, limit int) ([]*herald.ChangeSet, error) {
	if after >= s.eng.Horizon() {
		if sets, ok := s.recent.after(after, limit); ok {
			return sets, nil
		}
	}
	return s.eng.Changes(context.Background(), after, limit)
}
