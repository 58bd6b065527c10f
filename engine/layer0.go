package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/herald-mq/herald"
)

// Layer 0 upkeep: the _Session nodes and _session_has_watch edges that show which
// session holds which watch (a session's node is written with its first watch and
// removed when the session ends), the per-session watch limit shared by both modes
// (E8006), and the periodic commits of flushers, through which services write what
// changes too often to write each time (the standing queries' _Watch counters). None of
// it is durable: Open deletes the _Session nodes a previous run left, and flushers
// write at most once per Config.Layer0Interval.

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

// Flusher writes, in a Layer 0 commit every Config.Layer0Interval, what a service keeps
// up to date that way. It must only touch nodes that exist and should write nothing
// when nothing changed. A round of writes too large for one commit is spread over the
// interval: the flusher writes a share and returns how many more commits its round
// takes (rest) and how many it takes in all (round); the loop calls it again after
// interval/round until rest is 0.
type Flusher func(tx *SysTx) (rest, round int)

// layer0 queues Layer 0 writes and commits them from one goroutine, so that callers
// holding their own locks never wait on a commit.
type layer0 struct {
	e        *Engine
	interval time.Duration

	mu       sync.Mutex
	ops      []func(tx *SysTx)
	flushers map[int]*flusher
	next     int

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// flusher is a registered Flusher and what its last call said of its round.
type flusher struct {
	fn          Flusher
	rest, round int
}

func newLayer0(e *Engine, interval time.Duration) *layer0 {
	return &layer0{e: e, interval: interval, flushers: map[int]*flusher{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
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
		if flush {
			ops = append(ops, l.flushOpsLocked(l.roundUnderWayLocked())...)
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

// roundUnderWayLocked reports whether a flusher has commits of its round left.
func (l *layer0) roundUnderWayLocked() bool {
	for _, f := range l.flushers {
		if f.rest > 0 {
			return true
		}
	}
	return false
}

// flushOpsLocked returns one commit's share of the flushers: those with a round under
// way when onlyRounds (the next share of it), else every flusher.
func (l *layer0) flushOpsLocked(onlyRounds bool) []func(tx *SysTx) {
	var ops []func(tx *SysTx)
	for _, f := range l.flushers {
		if onlyRounds && f.rest == 0 {
			continue
		}
		ops = append(ops, func(tx *SysTx) {
			rest, round := f.fn(tx)
			l.mu.Lock()
			f.rest, f.round = rest, round
			l.mu.Unlock()
		})
	}
	return ops
}

// nextTick is the wait before the next flush commit: the commits of a round are spread
// evenly over the interval, so that a round of thousands of nodes never comes as one
// burst.
func (l *layer0) nextTick() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	round := 1
	for _, f := range l.flushers {
		if f.rest > 0 {
			round = max(round, f.round)
		}
	}
	return l.interval / time.Duration(round)
}

func (l *layer0) close() {
	close(l.stop)
	<-l.done
}

// AddFlusher registers fn to run in a Layer 0 commit every Config.Layer0Interval; the
// returned function unregisters it.
func (e *Engine) AddFlusher(fn Flusher) (remove func()) {
	l := e.l0
	if l == nil { // a follower writes nothing
		return func() {}
	}
	l.mu.Lock()
	id := l.next
	l.next++
	l.flushers[id] = &flusher{fn: fn}
	l.mu.Unlock()
	l.arm()
	return func() {
		l.mu.Lock()
		delete(l.flushers, id)
		l.mu.Unlock()
	}
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

// FlushLayer0 runs the queued writes and every flusher now, each flusher until its
// round is done, and waits until their commits are applied. Tests use it instead of
// waiting for the interval.
func (e *Engine) FlushLayer0(ctx context.Context) error {
	l := e.l0
	l.mu.Lock()
	ops := append(l.ops, l.flushOpsLocked(false)...)
	l.ops = nil
	l.mu.Unlock()
	for len(ops) > 0 {
		if _, _, err := e.System(ctx, applyAll(ops)); err != nil {
			return err
		}
		l.mu.Lock()
		ops = nil
		if l.roundUnderWayLocked() {
			ops = l.flushOpsLocked(true)
		}
		l.mu.Unlock()
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
