package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-mq/herald"
)

// Layer 0 upkeep: the _Session nodes and _session_has_watch edges that show which
// session holds which watch (a session's node is written with its first watch and
// removed when the session ends), the per-session watch limit shared by both modes (E8006),
// and the periodic flush through which services write their _Watch counters. None of
// it is durable: Open deletes the _Session nodes a previous run left, and counters are
// written at most once per Config.Layer0Interval.

const (
	// TypeSession is the Layer 0 node type of an open session.
	TypeSession = "_Session"
	// EdgeSessionWatch links a _Session to the _Watch of each watch opened in it.
	EdgeSessionWatch = "_session_has_watch"
	// DefaultMaxWatchesPerSession is Config.MaxWatchesPerSession's default.
	DefaultMaxWatchesPerSession = 100
	// DefaultMaxWatchesPerPrincipal is Config.MaxWatchesPerPrincipal's default.
	DefaultMaxWatchesPerPrincipal = 1000
	// DefaultLayer0Interval is Config.Layer0Interval's default.
	DefaultLayer0Interval = 2 * time.Second
)

// SessionNodeID is the id of a session's _Session node. It is derived from the session
// id by a one-way hash: a session id is a capability, and the graph is readable by
// anyone who may query it.
func SessionNodeID(session string) herald.NodeID {
	sum := sha256.Sum256([]byte("session\x00" + session))
	return herald.NodeID("ss" + hex.EncodeToString(sum[:10]))
}

// layer0 queues Layer 0 writes and commits them from one goroutine, so that callers
// holding their own locks never wait on a commit.
type layer0 struct {
	e        *Engine
	interval time.Duration

	mu       sync.Mutex
	ops      []func(tx *SysTx)
	flushers []func(tx *SysTx)
	stats    map[herald.NodeID]*WatchStats
	gone     []*WatchStats // untracked since the last flush: their last counts go out
	statsOn  bool          // flushStats is among the flushers
	todo     []*WatchStats // counters of the round under way, for the next commits
	round    int           // commits the round under way takes

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newLayer0(e *Engine, interval time.Duration) *layer0 {
	return &layer0{e: e, interval: interval, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// queue adds a write to the next Layer 0 commit.
func (l *layer0) queue(op func(tx *SysTx)) {
	l.mu.Lock()
	l.ops = append(l.ops, op)
	l.mu.Unlock()
	l.arm()
}

// arm wakes the loop, which commits what is queued and arms its timer once there are
// flushers.
func (l *layer0) arm() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// loop commits queued writes as they come and runs the flushers every interval (its
// timer is armed once a flusher is registered).
func (l *layer0) loop() {
	defer close(l.done)
	var t herald.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		var tick <-chan time.Time
		if t != nil {
			tick = t.C()
		}
		flush := false
		select {
		case <-l.stop:
			return
		case <-l.wake:
		case <-tick:
			flush = true
		}
		l.mu.Lock()
		ops := l.ops
		l.ops = nil
		switch {
		case flush && len(l.todo) > 0:
			ops = append(ops, l.flushStats) // the next share of the round under way
		case flush:
			ops = append(ops, l.flushers...)
		}
		if t == nil && len(l.flushers) > 0 {
			t = l.e.clock.NewTimer(l.interval)
		}
		l.mu.Unlock()
		if len(ops) > 0 {
			_, _, _, err := l.e.SystemAsync(applyAll(ops))
			if err != nil && !l.e.closing.Load() {
				l.e.log.Warn("layer 0: writing session and watch nodes failed", "err", err)
			}
		}
		if flush {
			t.Reset(l.nextTick())
		}
	}
}

// nextTick is the wait before the next flush commit: a round of statsPerCommit-node
// commits is spread evenly over the interval, so the writes of thousands of watches'
// counters never come as one burst.
func (l *layer0) nextTick() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.todo) == 0 || l.round <= 1 {
		return l.interval
	}
	return l.interval / time.Duration(l.round)
}

// flushing reports whether a stats flush has counters left for further commits.
func (l *layer0) flushing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.todo) > 0
}

func (l *layer0) close() {
	close(l.stop)
	<-l.done
}

// AddFlusher registers fn to run in a Layer 0 commit every Config.Layer0Interval.
// Services write their _Watch counters this way; fn must only touch nodes that exist
// and should write nothing when nothing changed.
func (e *Engine) AddFlusher(fn func(tx *SysTx)) {
	e.l0.mu.Lock()
	e.l0.flushers = append(e.l0.flushers, fn)
	e.l0.mu.Unlock()
	e.l0.arm()
}

// cleanSessions deletes the _Session nodes of a previous run: their sessions are gone.
func (e *Engine) cleanSessions(ctx context.Context) error {
	e.mu.RLock()
	n := e.g.TypeCount(TypeSession)
	e.mu.RUnlock()
	if n == 0 {
		return nil
	}
	_, _, err := e.System(ctx, func(tx *SysTx) error {
		for _, id := range tx.NodesOfType(TypeSession) {
			tx.DeleteNode(id)
		}
		return nil
	})
	return err
}

// WatchSlot is one watch's place in its session and its principal's share: its part
// of their watch limits and its _session_has_watch edge. A nil slot (a watch with
// neither) does nothing.
type WatchSlot struct {
	e         *Engine
	s         *Session // nil without a session
	principal string   // "" without one
	watch     herald.NodeID
	once      sync.Once
}

// AttachWatch takes a watch slot for a watch opened in session by the principal ctx
// carries: E3004 when the session is unknown, E8006 when the session already holds
// Config.MaxWatchesPerSession watches or the principal Config.MaxWatchesPerPrincipal,
// both modes counted together. A session that holds watches is not closed for
// idleness. With neither a session nor a principal it returns a nil slot.
func (e *Engine) AttachWatch(ctx context.Context, session string) (*WatchSlot, error) {
	p := herald.PrincipalFrom(ctx)
	if session == "" && p == nil {
		return nil, nil
	}
	e.sessMu.Lock()
	defer e.sessMu.Unlock()
	slot := &WatchSlot{e: e}
	if p != nil {
		if n := e.principalWatches[p.Name]; n >= e.cfg.MaxWatchesPerPrincipal {
			return nil, herald.Errorf(herald.CodeWatchLimitExceeded, "%s already holds %d watches (watch and consume mode together); the most is %d", p.Name, n, e.cfg.MaxWatchesPerPrincipal)
		}
	}
	if session != "" {
		e.sweepSessionsLocked()
		s, ok := e.sessions[session]
		if !ok || !s.usableBy(p) {
			return nil, herald.Errorf(herald.CodeNoSession, "unknown, closed or expired session %q", session)
		}
		if s.slots >= e.cfg.MaxWatchesPerSession {
			return nil, herald.Errorf(herald.CodeWatchLimitExceeded, "the session already holds %d watches (watch and consume mode together); the most is %d", s.slots, e.cfg.MaxWatchesPerSession)
		}
		s.slots++
		s.lastUsed = e.clock.Now()
		slot.s = s
	}
	if p != nil {
		e.principalWatches[p.Name]++
		slot.principal = p.Name
	}
	return slot, nil
}

// LinkIn records, in the transaction that writes the watch's _Watch node, that the
// slot's watch is that node: the session's _Session node (written with the session's
// first watch) gets an edge to it. Call LinkIn or Link once per slot.
func (w *WatchSlot) LinkIn(tx *SysTx, watch herald.NodeID) {
	if op := w.link(watch); op != nil {
		op(tx)
	}
}

// Link is LinkIn for a _Watch node that exists already (a group's, joined by one more
// member): the edge is written by the next Layer 0 commit.
func (w *WatchSlot) Link(watch herald.NodeID) {
	if op := w.link(watch); op != nil {
		w.e.l0.queue(op)
	}
}

func (w *WatchSlot) link(watch herald.NodeID) func(tx *SysTx) {
	if w == nil || w.s == nil || watch == "" {
		return nil
	}
	e, s := w.e, w.s
	e.sessMu.Lock()
	w.watch = watch
	s.watches[watch]++
	open := e.sessions[s.id] == s
	s.node = s.node || open
	created := s.created
	e.sessMu.Unlock()
	if !open {
		return nil // the session ended meanwhile: nothing to show
	}
	from := SessionNodeID(s.id)
	return func(tx *SysTx) {
		if tx.Node(watch) == nil {
			return
		}
		if tx.Node(from) == nil {
			tx.PutNode(&herald.Node{ID: from, Type: TypeSession, Attrs: herald.AttrsOf(map[string]herald.Value{
				"created_at": herald.Timestamp(created),
			})})
		}
		tx.PutEdge(&herald.Edge{Type: EdgeSessionWatch, Endpoints: []herald.NodeID{from, watch}})
	}
}

// Release gives the slot back; the edge goes when no other watch of the session uses
// the same _Watch node (members of one group share it). It is idempotent.
func (w *WatchSlot) Release() {
	if w == nil {
		return
	}
	w.once.Do(func() {
		e, s := w.e, w.s
		e.sessMu.Lock()
		if w.principal != "" {
			if e.principalWatches[w.principal]--; e.principalWatches[w.principal] <= 0 {
				delete(e.principalWatches, w.principal)
			}
		}
		unlink := false
		if s != nil {
			s.slots--
			s.lastUsed = e.clock.Now()
			if w.watch != "" {
				if s.watches[w.watch]--; s.watches[w.watch] <= 0 {
					delete(s.watches, w.watch)
					unlink = true
				}
			}
		}
		e.sessMu.Unlock()
		if !unlink {
			return
		}
		// The _Watch node may be gone already (its edges with it); otherwise it outlives
		// this watch (a group's, or one kept as cancelled) and the edge is removed.
		from, watch := SessionNodeID(s.id), w.watch
		e.l0.queue(func(tx *SysTx) {
			k := (&herald.Edge{Type: EdgeSessionWatch, Endpoints: []herald.NodeID{from, watch}}).Key()
			if tx.Edge(k) != nil && tx.Node(watch) != nil {
				tx.DeleteEdge(k)
			}
		})
	})
}

// dropSessionNode queues the removal of an ended session's node and its edges.
func (e *Engine) dropSessionNode(id string) {
	node := SessionNodeID(id)
	e.l0.queue(func(tx *SysTx) {
		if tx.Node(node) != nil {
			tx.DeleteNode(node)
		}
	})
}

// WatchStats are a watch's counters as its _Watch node shows them: events (or, in
// consume mode, deliveries) sent, those not yet taken up, and the time of the last one.
// Services update them as they go; the engine writes those that changed to the _Watch
// node every Config.Layer0Interval, so the node may lag the stream by that much.
type WatchStats struct {
	id        herald.NodeID
	delivered atomic.Int64
	pending   atomic.Int64
	last      atomic.Int64 // unix nanoseconds; 0: none yet
	pendingFn func() int64 // when set, read at each flush instead of pending

	refs    int // guarded by layer0.mu: members of one group share the stats
	flushed [3]int64
}

// Delivered counts n events sent at t.
func (st *WatchStats) Delivered(n int, t time.Time) {
	if st == nil {
		return
	}
	st.delivered.Add(int64(n))
	st.last.Store(t.UnixNano())
}

// AddPending moves the pending count by n.
func (st *WatchStats) AddPending(n int) {
	if st != nil {
		st.pending.Add(int64(n))
	}
}

// TrackWatch returns the counters of the _Watch node id, shared by every caller until
// each has called UntrackWatch. pending, when not nil, is read at each flush for the
// events_pending figure; it must not take locks that are held around engine calls.
func (e *Engine) TrackWatch(id herald.NodeID, pending func() int64) *WatchStats {
	l := e.l0
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stats == nil {
		l.stats = map[herald.NodeID]*WatchStats{}
	}
	st := l.stats[id]
	if st == nil {
		st = &WatchStats{id: id, pendingFn: pending}
		l.stats[id] = st
		if !l.statsOn {
			l.statsOn = true
			l.flushers = append(l.flushers, l.flushStats)
			defer l.arm()
		}
	}
	st.refs++
	return st
}

// UntrackWatch ends one TrackWatch; its last counts are flushed with the others.
func (e *Engine) UntrackWatch(st *WatchStats) {
	if st == nil {
		return
	}
	l := e.l0
	l.mu.Lock()
	defer l.mu.Unlock()
	if st.refs--; st.refs <= 0 && l.stats[st.id] == st {
		delete(l.stats, st.id)
		l.gone = append(l.gone, st)
	}
}

// statsPerCommit bounds the _Watch nodes one Layer 0 commit writes: a round of
// thousands of watches goes out over several commits spread over the interval, and
// client writes take turns with them rather than wait behind one large commit.
const statsPerCommit = 64

// flushStats writes the counters that changed since the last flush, statsPerCommit of
// them at most; the rest wait in todo for the next commits.
func (l *layer0) flushStats(tx *SysTx) {
	l.mu.Lock()
	if len(l.todo) == 0 {
		for _, st := range l.stats {
			l.todo = append(l.todo, st)
		}
		l.todo = append(l.todo, l.gone...)
		l.gone = nil
		// In node order, so that each watch comes at the same point of every round.
		slices.SortFunc(l.todo, func(a, b *WatchStats) int { return strings.Compare(string(a.id), string(b.id)) })
		l.round = (len(l.todo) + statsPerCommit - 1) / statsPerCommit
	}
	k := min(len(l.todo), statsPerCommit)
	batch := l.todo[:k:k]
	l.todo = l.todo[k:]
	if len(l.todo) == 0 {
		l.todo = nil
	}
	l.mu.Unlock()
	for _, st := range batch {
		pending := st.pending.Load()
		if st.pendingFn != nil {
			pending = st.pendingFn()
		}
		now := [3]int64{st.delivered.Load(), max(pending, 0), st.last.Load()}
		if now == st.flushed {
			continue
		}
		n := tx.Node(st.id)
		if n == nil || n.Type != typeWatch {
			continue
		}
		st.flushed = now
		attrs := n.Attrs.With("events_delivered", herald.Int(now[0])).With("events_pending", herald.Int(now[1]))
		if now[2] != 0 {
			attrs = attrs.With("last_event_at", herald.Timestamp(time.Unix(0, now[2]).UTC()))
		}
		tx.PutNode(&herald.Node{ID: n.ID, Type: n.Type, Attrs: attrs})
	}
}

// FlushLayer0 runs the flushers now and waits until their commit is applied. Tests use
// it instead of waiting for the interval.
func (e *Engine) FlushLayer0(ctx context.Context) error {
	e.l0.mu.Lock()
	ops := append(e.l0.ops, e.l0.flushers...)
	e.l0.ops = nil
	e.l0.mu.Unlock()
	for len(ops) > 0 {
		if _, _, err := e.System(ctx, applyAll(ops)); err != nil {
			return err
		}
		ops = nil
		if e.l0.flushing() {
			ops = append(ops, e.l0.flushStats)
		}
	}
	return nil
}

// applyAll is one Layer 0 commit of ops, in order.
func applyAll(ops []func(tx *SysTx)) func(tx *SysTx) error {
	return func(tx *SysTx) error {
		for _, op := range ops {
			op(tx)
		}
		return nil
	}
}
