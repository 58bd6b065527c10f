// Package engine executes Herald statements: sessions, transactions, the single-writer
// commit pipeline with group commit, ticks and the durable change log.
// It owns the in-memory graph and keeps it in step with the store.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/store"
)

// Engine executes statements against one graph. It is safe for concurrent use.
//
// Writers serialize on mu: an auto-commit statement executes, is applied to the
// in-memory graph and handed to the commit pipeline while mu is held, then waits for its
// batch to be synced with mu released, so many writers share one sync. A read statement
// runs on a snapshot of the graph taken in constant time (graph.Snapshot) and holds no
// lock while it runs, so no commit waits for it; every answer waits until the position
// it read is durable. Services' short internal reads (View) hold mu shared.
type Engine struct {
	cfg   Config
	clock herald.Clock
	log   *slog.Logger

	mu        sync.RWMutex
	g         *graph.Graph
	seq, tick uint64
	// snap is a snapshot of g at snapSeq, shared by the reads that start before the
	// next commit (see snapshot); snapMu guards it.
	snapMu            sync.Mutex
	snap              *graph.Graph
	snapSeq, snapTick uint64
	snapshots         atomic.Uint64 // snapshots taken (herald_graph_snapshots_total)
	recent            recent        // the newest change sets, for ViewSince
	bodies            bodyCache
	// appliedListeners hear of each commit as it is applied (ListenApplied).
	appliedListeners listeners
	cons             *constraints

	pipe *pipeline

	extMu sync.Mutex
	exts  []Extension
	l0    *layer0
	space spaceState // the free-space reserve (space.go)

	sessListeners sessionListeners

	prep prepared

	sessMu   sync.Mutex
	sessions map[string]*Session
	// principalWatches counts the watches of each principal (layer0.go), under sessMu.
	principalWatches map[string]int

	// backendOwned: a successful Open takes the backend over (unless Config.KeepBackend),
	// and Close closes it.
	backendOwned bool

	closing  atomic.Bool
	inflight sync.WaitGroup
	stopOnce sync.Once
	stopTick chan struct{}
	tickDone chan struct{}
}

// Open loads the graph from cfg.Backend and starts the engine's background work
// (commit pipeline, tick timer).
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Backend == nil {
		return nil, errors.New("engine: Config.Backend is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = 10 * time.Minute
	}
	if cfg.MaxGroup <= 0 {
		cfg.MaxGroup = 1024
	}
	switch {
	case cfg.StatementTimeout == 0:
		cfg.StatementTimeout = DefaultStatementTimeout
	case cfg.StatementTimeout < 0:
		cfg.StatementTimeout = 0
	}
	switch {
	case cfg.MaxRowsScanned == 0:
		cfg.MaxRowsScanned = DefaultMaxRowsScanned
	case cfg.MaxRowsScanned < 0:
		cfg.MaxRowsScanned = 0
	}
	if cfg.MinFreeBytes == 0 {
		cfg.MinFreeBytes = DefaultMinFreeBytes
	}
	if cfg.MaxWatchesPerPrincipal <= 0 {
		cfg.MaxWatchesPerPrincipal = DefaultMaxWatchesPerPrincipal
	}
	if cfg.MaxWatchesPerSession <= 0 {
		cfg.MaxWatchesPerSession = DefaultMaxWatchesPerSession
	}
	if cfg.Layer0Interval <= 0 {
		cfg.Layer0Interval = DefaultLayer0Interval
	}
	if cfg.TickMode == TickInterval && cfg.TickInterval <= 0 {
		return nil, errors.New("engine: tick mode interval needs a positive TickInterval")
	}
	meta, err := cfg.Backend.Meta(ctx)
	if err != nil {
		return nil, fmt.Errorf("engine: read store position: %w", err)
	}
	// A _Watch node is written whenever its counters move, and is looked up by
	// attribute rarely: its dozen attributes are not worth an index entry each.
	g := graph.New(graph.UnindexedAttrs(typeWatch))
	if err := loadGraph(ctx, cfg.Backend, g, meta.Seq); err != nil {
		return nil, fmt.Errorf("engine: load graph: %w", err)
	}
	cons, err := loadConstraints(g)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cons:     cons,
		cfg:      cfg,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		g:        g,
		seq:      meta.Seq,
		tick:     meta.Tick,
		sessions: map[string]*Session{},

		principalWatches: map[string]int{},
		backendOwned:     !cfg.KeepBackend,
	}
	switch {
	case cfg.BodyCache == 0:
		e.bodies.budget = DefaultBodyCache
	case cfg.BodyCache > 0:
		e.bodies.budget = cfg.BodyCache
	}
	e.pipe = newPipeline(cfg.Backend, cfg.MaxGroup, cfg.Retention, meta, cfg.Clock.Now, e.log)
	e.pipe.afterSync = e.bodies.trim
	e.pipe.start()
	if cfg.Follower {
		e.log.Info("engine open as a follower", "seq", meta.Seq, "tick", meta.Tick, "nodes", g.NodeCount())
		return e, nil
	}
	e.l0 = newLayer0(e, cfg.Layer0Interval)
	go e.l0.loop()
	if err := e.cleanSessions(ctx); err != nil {
		e.backendOwned = false // a failed Open leaves the backend to its caller
		_ = e.Close(context.Background())
		return nil, fmt.Errorf("engine: remove the sessions of the last run: %w", err)
	}
	if cfg.TickMode == TickInterval {
		e.stopTick = make(chan struct{})
		e.tickDone = make(chan struct{})
		go e.tickLoop()
	}
	e.log.Info("engine open", "seq", meta.Seq, "tick", meta.Tick, "nodes", g.NodeCount(), "edges", g.EdgeCount(), "types", len(g.Types()))
	return e, nil
}

// Close stops accepting work, waits for in-flight calls and commits, stops background
// work and closes the backend, which a successful Open took over (a failed one leaves
// it to the caller). It is idempotent.
func (e *Engine) Close(ctx context.Context) error {
	var err error
	e.stopOnce.Do(func() {
		e.closing.Store(true)
		if e.l0 != nil {
			e.l0.close()
		}
		if e.stopTick != nil {
			close(e.stopTick)
			<-e.tickDone
		}
		done := make(chan struct{})
		go func() { e.inflight.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		e.pipe.stop()
		if e.backendOwned {
			if cerr := e.cfg.Backend.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		e.log.Info("engine closed", "seq", e.pipe.durableSeq())
	})
	return err
}

// IsFollower reports whether the engine follows another node's change log
// (Config.Follower): it commits nothing, so what it serves writes no node.
func (e *Engine) IsFollower() bool { return e.cfg.Follower }

// snapshot returns a read-only copy of the committed graph and its position. Reads
// that start between two commits share one copy; a copy costs constant time, and the
// writer pays for it by copying the tree nodes it next changes.
func (e *Engine) snapshot() (*graph.Graph, uint64, uint64) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	if e.snap == nil || e.snapSeq != e.seq || e.snapTick != e.tick {
		// Snapshot changes only the trees' copy-on-write marks, which readers of g
		// (holding mu shared, as here) never look at; writers are shut out by mu.
		e.snap, e.snapSeq, e.snapTick = e.g.Snapshot(), e.seq, e.tick
		e.snapshots.Add(1)
	}
	return e.snap, e.snapSeq, e.snapTick
}

// Position returns the committed position (seq, tick) visible to new reads.
func (e *Engine) Position() (seq, tick uint64) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.seq, e.tick
}

// Err reports the storage error that stopped the engine, or E5005 while the store's disk
// is below its free-space reserve, or nil. Readiness checks use it.
func (e *Engine) Err() error {
	if err := e.pipe.failure(); err != nil {
		return storageError(err)
	}
	return e.spaceOK() // below the free-space reserve: writes are refused (E5005)
}

// Ready reports whether the engine accepts work: open, not closing, not failed.
func (e *Engine) Ready() bool { return !e.closing.Load() && e.pipe.failure() == nil }

// Changes reads the durable change log: up to limit change sets after position after.
// A position older than the retention horizon answers CHANGES_COMPACTED.
func (e *Engine) Changes(ctx context.Context, after uint64, limit int) ([]*herald.ChangeSet, error) {
	cs, err := e.cfg.Backend.Changes(ctx, after, limit)
	// The store holds commits that are written but not yet synced (the pipeline writes
	// the next group during the last one's sync); the log ends at the durable position.
	durable := e.pipe.durableSeq()
	for len(cs) > 0 && cs[len(cs)-1].Seq > durable {
		cs = cs[:len(cs)-1]
	}
	if errors.Is(err, store.ErrCompacted) {
		meta, _ := e.cfg.Backend.Meta(ctx)
		return nil, &herald.Error{Code: herald.CodeCompacted, Message: fmt.Sprintf("position %d is before the change-log horizon %d", after, meta.Horizon), Err: err}
	}
	return cs, err
}

// Horizon is the position up to which the change log has been truncated: Changes
// after an earlier position fails with E6001.
func (e *Engine) Horizon() uint64 {
	e.pipe.mu.Lock()
	defer e.pipe.mu.Unlock()
	return e.pipe.horizon
}

// Syncs reports how many group commits the pipeline has made and how many transactions
// they held, for the group-commit benchmark.
func (e *Engine) Syncs() (groups, txns uint64) { return e.pipe.stats() }

func (e *Engine) tickLoop() {
	defer close(e.tickDone)
	t := e.clock.NewTimer(e.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-e.stopTick:
			return
		case <-t.C():
			if err := e.advanceTick(context.Background(), 1); err != nil {
				e.log.Error("interval tick failed", "err", err)
			}
			t.Reset(e.cfg.TickInterval)
		}
	}
}

// advanceTick commits an empty change set that moves tick forward by n and waits for it.
func (e *Engine) advanceTick(ctx context.Context, n uint64) error {
	p, _, _, err := e.queueTick(n)
	if err != nil {
		return err
	}
	return p.wait(ctx)
}

// queueTick applies a tick commit and queues it without waiting for the sync.
func (e *Engine) queueTick(n uint64) (*pending, uint64, uint64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, err := e.commitLocked(e.g.Begin(), n, "")
	return p, e.seq, e.tick, err
}

// commitLocked assigns the next seq to tx's changes, applies them to the graph and hands
// them to the pipeline. e.mu must be held for writing. It returns nil when there is
// nothing to commit.
func (e *Engine) commitLocked(tx *graph.Tx, tickBy uint64, actor herald.NodeID) (*pending, error) {
	return e.commitLockedAnnounce(tx, nil, tickBy, actor, nil)
}

// commitLockedAnnounce is commitLocked that also writes the auxiliary records aux, and
// calls announce with the commit's seq before the change set goes to the pipeline, so
// nothing can see it durable before that. A commit of auxiliary records alone takes no
// seq.
func (e *Engine) commitLockedAnnounce(tx *graph.Tx, aux []store.AuxOp, tickBy uint64, actor herald.NodeID, announce func(seq uint64)) (*pending, error) {
	if e.cfg.Follower {
		return nil, errFollower
	}
	if err := e.pipe.failure(); err != nil {
		return nil, storageError(err)
	}
	if what := tx.Validate(); what != "" {
		return nil, herald.Errorf(herald.CodeTxConflict, "%s was changed by a concurrent commit; the transaction was rolled back", what)
	}
	changes := tx.Changes()
	if len(changes) == 0 && tickBy == 0 {
		if len(aux) == 0 {
			return nil, nil
		}
		return e.pipe.submit(nil, aux), nil
	}
	if err := e.cons.verify(tx, changes, func() eval.Context { return eval.Context{Now: e.clock.Now().UTC()} }); err != nil {
		return nil, err
	}
	tick := e.tick + tickBy
	if e.cfg.TickMode == TickCommit && tickBy == 0 {
		tick = e.tick + 1
	}
	cs := &herald.ChangeSet{Seq: e.seq + 1, Tick: tick, Time: e.clock.Now().UTC(), Actor: actor, Changes: changes}
	for i := range changes {
		// After images are this transaction's own values: stamp their creation seq and
		// move their large values to a body.
		if c := &changes[i]; c.Kind == herald.NodeChange && c.NodeAfter != nil {
			if c.NodeBefore == nil {
				c.NodeAfter.Created = cs.Seq
			} else {
				c.NodeAfter.Created = c.NodeBefore.Created
			}
			n, err := e.externalize(c.NodeAfter, cs.Seq)
			if err != nil {
				return nil, err
			}
			c.NodeAfter = n
		}
	}
	e.g.Apply(cs)
	e.cons.applied(changes)
	e.recent.add(cs)
	e.appliedListeners.notify([]*herald.ChangeSet{cs})
	e.seq, e.tick = cs.Seq, cs.Tick
	if announce != nil {
		announce(cs.Seq)
	}
	return e.pipe.submit(cs, aux), nil
}

func storageError(err error) error {
	return &herald.Error{Code: herald.CodeStorage, Message: "the store failed and the server refuses work until it is restarted: " + err.Error(), Err: err}
}
