package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-mq/herald/store"
)

// follower announces this store's commits to other processes and wakes WaitChanges when
// another process's commits are announced.
//
// After a commit has committed, the notifier goroutine sends NOTIFY <schema>_changes
// with the seq, in a statement of its own: NOTIFY inside the commit's transaction would
// take PostgreSQL's global notification lock at every commit. Commits that come while
// one is being announced are announced together, by the last seq. WaitChanges listens
// on a dedicated connection (started at its first call) and also asks the database
// every poll interval, so that a lost notification only delays it.
type follower struct {
	s      *Store
	cfg    *pgx.ConnConfig
	ctx    context.Context // cancelled by stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	latest  atomic.Uint64 // the highest seq known committed
	mu      sync.Mutex
	changed chan struct{} // closed when latest moves, or a waiter should look again

	pending   atomic.Uint64 // seq to announce, 0 if none
	wake      chan struct{}
	listening sync.Once
	listened  sync.Once
	heard     chan struct{} // closed once the listener first listens (tests wait for it)
	silent    bool          // tests: announce nothing
}

func (f *follower) start(s *Store, cfg *pgx.ConnConfig) {
	f.s, f.cfg = s, cfg
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.changed = make(chan struct{})
	f.wake = make(chan struct{}, 1)
	f.heard = make(chan struct{})
	f.wg.Add(1)
	go f.notifier()
}

// stop ends the goroutines, after announcing the last commit.
func (f *follower) stop() {
	f.cancel()
	f.wg.Wait()
}

// committed records a commit of this store, to announce.
func (f *follower) committed(seq uint64) {
	f.advance(seq)
	if f.silent {
		return
	}
	for {
		old := f.pending.Load()
		if seq <= old || f.pending.CompareAndSwap(old, seq) {
			break
		}
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// advance raises latest to seq, waking the waiters if it moved.
func (f *follower) advance(seq uint64) {
	for {
		old := f.latest.Load()
		if seq <= old {
			return
		}
		if f.latest.CompareAndSwap(old, seq) {
			break
		}
	}
	f.kick()
}

// kick wakes every waiter to look again.
func (f *follower) kick() {
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *follower) changedChan() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *follower) notifier() {
	defer f.wg.Done()
	for {
		select {
		case <-f.wake:
			f.announce(f.ctx)
		case <-f.ctx.Done():
			f.announce(context.Background())
			return
		}
	}
}

// announce sends the pending seq, if any. A failure only delays the followers, which
// poll as well, so it is logged, not returned.
func (f *follower) announce(ctx context.Context) {
	seq := f.pending.Swap(0)
	if seq == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := f.s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, f.s.channel, strconv.FormatUint(seq, 10)); err != nil {
		f.s.log.Warn("announcing a commit to followers failed; they will see it at their next poll", "seq", seq, "err", err)
	}
}

// listen keeps a connection listening for announcements until stop, reconnecting
// after a failure.
func (f *follower) listen() {
	defer f.wg.Done()
	backoff := 50 * time.Millisecond
	for {
		err := f.session()
		if f.ctx.Err() != nil {
			return
		}
		f.s.log.Debug("listening for commits failed; reconnecting", "err", err)
		t := f.s.clock.NewTimer(backoff)
		select {
		case <-f.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		backoff = min(2*backoff, f.s.poll)
	}
}

func (f *follower) session() error {
	conn, err := pgx.ConnectConfig(f.ctx, f.cfg.Copy())
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(f.ctx, "LISTEN "+pgx.Identifier{f.s.channel}.Sanitize()); err != nil {
		return err
	}
	f.kick() // announcements sent while nobody listened are lost: look again
	f.listened.Do(func() { close(f.heard) })
	for {
		n, err := conn.WaitForNotification(f.ctx)
		if err != nil {
			return err
		}
		if seq, err := strconv.ParseUint(n.Payload, 10, 64); err == nil {
			f.advance(seq)
		}
	}
}

// WaitChanges returns once a change set with seq > after may have been committed (a
// Changes call then finds it, unless another error intervenes), when ctx is done, or
// with ErrClosed when the store closes. It wakes on the commits of this store and on
// those other processes announce, and asks the database every poll interval.
func (s *Store) WaitChanges(ctx context.Context, after uint64) error {
	f := &s.follow
	if err := s.acquire(ctx); err != nil {
		return err
	}
	f.listening.Do(func() {
		f.wg.Add(1)
		go f.listen()
	})
	s.mu.RUnlock()
	timer := s.clock.NewTimer(s.poll)
	defer timer.Stop()
	for {
		changed := f.changedChan()
		if f.latest.Load() > after {
			return nil
		}
		seq, err := s.readSeq(ctx)
		if err != nil {
			return err
		}
		if f.advance(seq); seq > after {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C():
			timer.Reset(s.poll)
		case <-ctx.Done():
			return ctx.Err()
		case <-f.ctx.Done():
			return store.ErrClosed
		}
	}
}

// readSeq reads the committed seq.
func (s *Store) readSeq(ctx context.Context) (uint64, error) {
	if err := s.acquire(ctx); err != nil {
		return 0, err
	}
	defer s.mu.RUnlock()
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var seq int64
	if err := s.pool.QueryRow(ctx, s.q.seq).Scan(&seq); err != nil {
		return 0, fmt.Errorf("pgstore: reading the position: %w", err)
	}
	return uint64(seq), nil
}
