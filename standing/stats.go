package standing

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
)

// Stats are a watch's counters as its _Watch node shows them: events (or, in consume
// mode, deliveries) sent, those not yet taken up, and the time of the last one. The
// services update them as they go; the core writes those that changed to the _Watch
// nodes every engine.Config.Layer0Interval (an engine flusher), so a node may lag its
// stream by that much.
type Stats struct {
	id        herald.NodeID
	delivered atomic.Int64
	pending   atomic.Int64
	last      atomic.Int64 // unix nanoseconds; 0: none yet
	pendingFn func() int64 // when set, read at each flush instead of pending

	refs    int // guarded by stats.mu: members of one group share the stats
	flushed [3]int64
}

// Delivered counts n events sent at t.
func (st *Stats) Delivered(n int, t time.Time) {
	if st == nil {
		return
	}
	st.delivered.Add(int64(n))
	st.last.Store(t.UnixNano())
}

// AddPending moves the pending count by n.
func (st *Stats) AddPending(n int) {
	if st != nil {
		st.pending.Add(int64(n))
	}
}

// stats are the counters of the watches of one core, and the round of writes under way.
type stats struct {
	mu      sync.Mutex
	byNode  map[herald.NodeID]*Stats
	gone    []*Stats // untracked since the last flush: their last counts go out
	todo    []*Stats // counters of the round under way, for the next commits
	round   int      // commits the round under way takes
	unflush func()   // removes the core's flusher (nil: not registered yet)
}

// statsPerCommit bounds the _Watch nodes one flush commit writes: a round of thousands
// of watches goes out over several commits spread over the interval, and client writes
// take turns with them rather than wait behind one large commit.
const statsPerCommit = 64

// Track returns the counters of the _Watch node id, shared by every caller until each
// has called Untrack. pending, when not nil, is read at each flush for the
// events_pending figure; it must not take locks that are held around engine calls.
func (c *Core) Track(id herald.NodeID, pending func() int64) *Stats {
	s := &c.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byNode == nil {
		s.byNode = map[herald.NodeID]*Stats{}
	}
	st := s.byNode[id]
	if st == nil {
		st = &Stats{id: id, pendingFn: pending}
		s.byNode[id] = st
		if s.unflush == nil && !c.eng.IsFollower() {
			s.unflush = c.eng.AddFlusher(c.flushStats)
		}
	}
	st.refs++
	return st
}

// Untrack ends one Track; its last counts are flushed with the others.
func (c *Core) Untrack(st *Stats) {
	if st == nil {
		return
	}
	s := &c.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.refs--; st.refs <= 0 && s.byNode[st.id] == st {
		delete(s.byNode, st.id)
		s.gone = append(s.gone, st)
	}
}

// flushStats is the core's engine flusher: it writes the counters that changed since
// the last flush, statsPerCommit of them at most, and leaves the rest of the round for
// the next commits.
func (c *Core) flushStats(tx *engine.SysTx) (rest, round int) {
	s := &c.stats
	s.mu.Lock()
	if len(s.todo) == 0 {
		for _, st := range s.byNode {
			s.todo = append(s.todo, st)
		}
		s.todo = append(s.todo, s.gone...)
		s.gone = nil
		// In node order, so that each watch comes at the same point of every round.
		slices.SortFunc(s.todo, func(a, b *Stats) int { return strings.Compare(string(a.id), string(b.id)) })
		s.round = (len(s.todo) + statsPerCommit - 1) / statsPerCommit
	}
	k := min(len(s.todo), statsPerCommit)
	batch := s.todo[:k:k]
	s.todo = s.todo[k:]
	if len(s.todo) == 0 {
		s.todo = nil
	}
	rest = (len(s.todo) + statsPerCommit - 1) / statsPerCommit
	round = s.round
	s.mu.Unlock()
	for _, st := range batch {
		writeCounters(tx, st)
	}
	return rest, round
}

// writeCounters writes st's counters to its _Watch node when they changed.
func writeCounters(tx *engine.SysTx, st *Stats) {
	pending := st.pending.Load()
	if st.pendingFn != nil {
		pending = st.pendingFn()
	}
	now := [3]int64{st.delivered.Load(), max(pending, 0), st.last.Load()}
	if now == st.flushed {
		return
	}
	n := tx.Node(st.id)
	if n == nil || n.Type != TypeWatch {
		return
	}
	st.flushed = now
	attrs := n.Attrs.With("events_delivered", herald.Int(now[0])).With("events_pending", herald.Int(now[1]))
	if now[2] != 0 {
		attrs = attrs.With("last_event_at", herald.Timestamp(time.Unix(0, now[2]).UTC()))
	}
	tx.PutNode(&herald.Node{ID: n.ID, Type: n.Type, Attrs: attrs})
}
