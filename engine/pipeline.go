package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store"
)

// retentionSlack is how far the change log may grow past its retention before the
// pipeline truncates it, so truncation runs in steps rather than after every commit.
const retentionSlack = 256

// pending is one transaction waiting for its group commit: a change set, auxiliary
// records, or both.
type pending struct {
	cs   *herald.ChangeSet
	aux  []store.AuxOp
	done chan error // receives exactly one value
	err  error
	got  bool
}

// wait blocks until the transaction is durable (nil) or failed.
func (p *pending) wait(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if p.got {
		return p.err
	}
	select {
	case err := <-p.done:
		p.got, p.err = true, err
		return err
	case <-ctx.Done():
		// The commit still completes; the caller just stops waiting for it.
		return ctx.Err()
	}
}

// pipeline is the single writer to the backend. Transactions queue in seq order; the
// writer takes everything queued (up to maxGroup) and commits it as one group with one
// sync. With a backend that can write without waiting for the sync
// (store.AsyncCommitter), the writer goes on to the next group while the last one
// syncs, up to maxInFlight groups, and the syncer completes them in order: a group's
// transactions are answered, and the durable position moves, only once it and every
// group before it are synced.
type pipeline struct {
	backend   store.Backend
	async     store.AsyncCommitter // nil when the backend only commits synchronously
	maxGroup  int
	retention uint64
	log       *slog.Logger

	mu          sync.Mutex
	queue       []*pending
	wake        chan struct{}
	durable     uint64
	durableTick uint64
	horizon     uint64
	err         error
	stopped     bool
	groups      uint64
	txns        uint64
	lastGroup   int // size of the last group taken
	// advanced is closed and replaced each time durable moves or the pipeline fails.
	advanced chan struct{}

	listeners listeners
	// afterSync hears the durable seq after each group commit (the body cache's trim).
	afterSync func(durable uint64)

	// now reads the engine's clock; commitTime is how long each group took from the
	// start of its write to the end of its sync (herald_commit_sync_seconds).
	now        func() time.Time
	commitTime *herald.Durations

	// broken is the writer's own: the first error of a group it wrote, after which it
	// writes nothing more (the syncer reports it in order).
	broken   error
	inflight chan *group // written groups waiting for their sync, oldest first

	quit       chan struct{}
	done       chan struct{}
	syncerDone chan struct{}
}

// maxInFlight bounds the groups written and not yet synced.
const maxInFlight = 4

// group is one group commit on its way: its transactions, and how to wait for its sync.
type group struct {
	pds   []*pending
	wait  func() error
	err   error     // the write failed: every transaction of the group fails with it
	start time.Time // when its write began
}

// commitBounds are the buckets of herald_commit_sync_seconds: 0.1 ms to 3.3 s, each
// twice the last.
var commitBounds = []float64{0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064, 0.0128,
	0.0256, 0.0512, 0.1024, 0.2048, 0.4096, 0.8192, 1.6384, 3.2768}

func newPipeline(b store.Backend, maxGroup int, retention uint64, meta store.Meta, now func() time.Time, log *slog.Logger) *pipeline {
	p := &pipeline{
		now:         now,
		commitTime:  herald.NewDurations(commitBounds...),
		backend:     b,
		maxGroup:    maxGroup,
		retention:   retention,
		log:         log,
		wake:        make(chan struct{}, 1),
		durable:     meta.Seq,
		durableTick: meta.Tick,
		horizon:     meta.Horizon,
		advanced:    make(chan struct{}),
		inflight:    make(chan *group, maxInFlight-1),
		quit:        make(chan struct{}),
		done:        make(chan struct{}),
		syncerDone:  make(chan struct{}),
	}
	p.async, _ = b.(store.AsyncCommitter)
	return p
}

func (p *pipeline) start() {
	go p.syncer()
	go p.loop()
}

// stop lets the writer drain what is queued, then ends it and the syncer.
func (p *pipeline) stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	p.mu.Unlock()
	close(p.quit)
	<-p.done
	<-p.syncerDone
}

func (p *pipeline) submit(cs *herald.ChangeSet, aux []store.AuxOp) *pending {
	pd := &pending{cs: cs, aux: aux, done: make(chan error, 1)}
	p.mu.Lock()
	if p.err != nil || p.stopped {
		err := p.err
		if err == nil {
			err = herald.Errorf(herald.CodeShuttingDown, "the engine is closing")
		} else {
			err = storageError(err)
		}
		p.mu.Unlock()
		pd.done <- err
		return pd
	}
	p.queue = append(p.queue, pd)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return pd
}

func (p *pipeline) loop() {
	defer close(p.done)
	defer close(p.inflight)
	for {
		select {
		case <-p.wake:
			p.runOnce()
		case <-p.quit:
			for p.runOnce() {
			}
			return
		}
	}
}

// gatherRounds bounds how often the writer yields to let writers join a group (see
// runOnce).
const gatherRounds = 16

// runOnce writes one group and hands it to the syncer. It reports whether there was
// anything to write.
func (p *pipeline) runOnce() bool {
	p.mu.Lock()
	n := len(p.queue)
	if n == 0 {
		p.mu.Unlock()
		return false
	}
	// A group smaller than the last one means writers that the last sync answered have
	// not submitted again yet: let them run for a moment so that they join this group
	// instead of waiting for a sync of their own. Otherwise a few busy writers settle
	// into groups of alternating sizes, each paying a sync. This yields the processor a
	// few times; it waits for no clock.
	for i := 0; i < gatherRounds && n < p.lastGroup; i++ {
		p.mu.Unlock()
		runtime.Gosched()
		p.mu.Lock()
		n = len(p.queue)
	}
	if n > p.maxGroup {
		n = p.maxGroup
	}
	p.lastGroup = n
	g := &group{pds: p.queue[:n:n], start: p.now()}
	p.queue = p.queue[n:]
	more := len(p.queue) > 0
	p.mu.Unlock()
	if more {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	g.wait, g.err = p.write(g.pds)
	p.inflight <- g
	return true
}

// write starts the commit of a group: it returns how to wait for its sync, or why it
// failed. After a failure it writes nothing more.
func (p *pipeline) write(pds []*pending) (func() error, error) {
	if p.broken != nil {
		return nil, p.broken
	}
	batches := make([]*store.Batch, len(pds))
	for i, pd := range pds {
		batches[i] = &store.Batch{Changes: pd.cs, Aux: pd.aux}
	}
	var (
		errs []error
		wait func() error
		err  error
	)
	if p.async != nil {
		errs, wait, err = p.async.CommitAsync(context.Background(), batches)
	} else {
		errs, err = p.backend.Commit(context.Background(), batches)
		wait = func() error { return nil }
	}
	if err == nil {
		for i, e := range errs {
			if e != nil {
				err = fmt.Errorf("batch %d of the group: %w", i, e)
				break
			}
		}
		if err != nil && wait != nil {
			_ = wait() // what was written still syncs; the group fails all the same
		}
	}
	if err != nil {
		p.broken = err
		return nil, err
	}
	return wait, nil
}

// syncer completes written groups in order as their syncs finish, until the writer has
// ended and every group is done.
func (p *pipeline) syncer() {
	defer close(p.syncerDone)
	for g := range p.inflight {
		err := g.err
		if err == nil {
			err = g.wait()
		}
		if err == nil {
			p.mu.Lock()
			err = p.err // an earlier group failed: so does every later one
			p.mu.Unlock()
		}
		if err != nil {
			p.fail(g, err)
			continue
		}
		p.commitTime.Observe(p.now().Sub(g.start))
		p.synced(g)
	}
}

// fail stops the pipeline for good: the in-memory graph is ahead of the store now.
func (p *pipeline) fail(g *group, err error) {
	p.mu.Lock()
	first := p.err == nil
	if first {
		p.err = err
		close(p.advanced)
		p.advanced = make(chan struct{})
	}
	p.mu.Unlock()
	if first {
		p.log.Error("group commit failed; the engine stops accepting work", "err", err)
	}
	for _, pd := range g.pds {
		pd.done <- storageError(err)
	}
}

// synced completes a durable group: listeners hear of it, the durable position moves,
// its transactions are answered, and the change log is truncated to its retention.
func (p *pipeline) synced(g *group) {
	// Listeners hear of the group before the durable position moves past it, so anyone
	// who reads the durable position knows every change set up to it was handed out.
	sets := make([]*herald.ChangeSet, 0, len(g.pds))
	for _, pd := range g.pds {
		if pd.cs != nil {
			sets = append(sets, pd.cs)
		}
	}
	if len(sets) > 0 {
		p.listeners.notify(sets)
	}
	p.mu.Lock()
	if len(sets) > 0 {
		last := sets[len(sets)-1]
		p.durable, p.durableTick = last.Seq, last.Tick
	}
	durable := p.durable
	p.groups++
	p.txns += uint64(len(g.pds))
	close(p.advanced)
	p.advanced = make(chan struct{})
	horizon := p.horizon
	p.mu.Unlock()
	if p.afterSync != nil {
		p.afterSync(durable)
	}
	for _, pd := range g.pds {
		pd.done <- nil
	}
	if p.retention > 0 && durable > horizon+p.retention+retentionSlack {
		upTo := durable - p.retention
		if err := p.backend.Truncate(context.Background(), upTo); err != nil {
			p.log.Warn("change-log truncation failed", "err", err)
		} else {
			p.mu.Lock()
			p.horizon = upTo
			p.mu.Unlock()
		}
	}
}

// followed makes change sets another node committed durable here: listeners hear of
// them and the durable position moves, as after a group commit of this node's own.
func (p *pipeline) followed(sets []*herald.ChangeSet) {
	p.listeners.notify(sets)
	p.mu.Lock()
	last := sets[len(sets)-1]
	p.durable, p.durableTick = last.Seq, last.Tick
	close(p.advanced)
	p.advanced = make(chan struct{})
	durable := p.durable
	p.mu.Unlock()
	if p.afterSync != nil {
		p.afterSync(durable)
	}
}

// waitDurable blocks until seq is durable.
func (p *pipeline) waitDurable(ctx context.Context, seq uint64) error {
	for {
		p.mu.Lock()
		d, err, ch := p.durable, p.err, p.advanced
		p.mu.Unlock()
		if d >= seq {
			return nil
		}
		if err != nil {
			return storageError(err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *pipeline) durablePosition() (seq, tick uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.durable, p.durableTick
}

func (p *pipeline) durableSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.durable
}

func (p *pipeline) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *pipeline) stats() (groups, txns uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.groups, p.txns
}
