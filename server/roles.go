package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/store/pgstore"
)

// A node on a shared PostgreSQL store is the leader or a follower. The leader holds the
// store's leadership lease and renews it; a follower reads the lease to learn where
// the leader is, and takes the lease when it has expired. Only the lease's term may
// commit (the store checks it inside every commit), so a leader that cannot renew in
// time steps down before another can take over, and one that was paused past its
// lease fails its next commit instead of writing.

// Roles a node can have (the seam's names for them).
const (
	RoleLeader   = broker.RoleLeader
	RoleFollower = broker.RoleFollower
)

// leaseStore is what the roles loop needs from the store (*pgstore.Store).
type leaseStore interface {
	Acquire(ctx context.Context, holder, address string, ttl time.Duration) (term uint64, ok bool, err error)
	Renew(ctx context.Context, term uint64, ttl time.Duration) (bool, error)
	Release(ctx context.Context, term uint64) error
	Leader(ctx context.Context) (pgstore.Lease, error)
}

// roles runs the node's part in leadership: every tick (a quarter of the lease's ttl)
// the leader renews its lease, a follower reads it and takes it once it has expired.
// become switches the node's services to a role; it runs on the loop's goroutine.
type roles struct {
	lease   leaseStore
	clock   herald.Clock
	log     *slog.Logger
	name    string // the holder name, unique among the nodes
	address string // where this node serves clients
	ttl     time.Duration
	become  func(ctx context.Context, role string, term uint64) error
	report  func(ctx context.Context) // after each round: the node reports itself
	// failed, when set, reports why the node's services stopped working (a leader's
	// engine failed a commit: the store dropped its connection, PostgreSQL failed over;
	// a follower's graph can no longer follow the store); nil while they work. The
	// node then starts again as a follower, from what the store holds, a leader giving
	// the lease up first.
	failed func() error

	mu      sync.Mutex
	role    string
	term    uint64    // the term this node commits under while it leads; 0 otherwise
	known   uint64    // the lease's term as last read or taken: what the node knows of
	leader  string    // the leader's address, as last read
	renewed time.Time // when the last renewal that succeeded was sent
	changes int       // role changes so far

	stop chan struct{}
	done chan struct{}
}

// tick is how often the loop acts.
func (r *roles) tick() time.Duration { return max(r.ttl/4, time.Millisecond) }

// start settles the first role (leader if the lease is free) and starts the loop.
func (r *roles) start(ctx context.Context) error {
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	if err := r.step(ctx); err != nil {
		return err
	}
	go r.loop()
	return nil
}

// close stops the loop and, if this node leads, releases the lease so that another can
// take it at once.
func (r *roles) close(ctx context.Context) {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	role, term := r.role, r.term
	r.mu.Unlock()
	if role == RoleLeader {
		if err := r.lease.Release(ctx, term); err != nil {
			r.log.Warn("releasing the leadership lease", "term", term, "err", err)
		}
	}
}

func (r *roles) loop() {
	defer close(r.done)
	t := r.clock.NewTimer(r.tick())
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C():
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.ttl)
		if err := r.step(ctx); err != nil {
			r.log.Error("changing role", "err", err)
		}
		if r.report != nil {
			r.report(ctx)
		}
		cancel()
		t.Reset(r.tick())
	}
}

// step does one round: renew or step down as the leader, follow or take over as a
// follower. It returns the error of a role change.
func (r *roles) step(ctx context.Context) error {
	r.mu.Lock()
	role, term, renewed := r.role, r.term, r.renewed
	r.mu.Unlock()
	if role != "" && r.failed != nil {
		if why := r.failed(); why != nil {
			r.log.Error("the node's services failed: starting again as a follower, from the store", "role", role, "term", term, "err", why)
			if role == RoleLeader {
				if err := r.lease.Release(ctx, term); err != nil {
					r.log.Warn("releasing the leadership lease", "term", term, "err", err)
				}
			}
			return r.change(ctx, RoleFollower, 0)
		}
	}
	if role == RoleLeader {
		// The renewal must be answered within three quarters of the ttl from the last
		// one that succeeded: a store that does not answer (the network cut) must not
		// hold the leader past the point where it has to step down.
		sent := r.clock.Now()
		left := renewed.Add(r.ttl * 3 / 4).Sub(sent)
		ok, late, err := false, true, error(nil)
		if left > 0 {
			rctx, cancel := context.WithTimeout(ctx, left)
			ok, err = r.lease.Renew(rctx, term, r.ttl)
			late = err != nil && rctx.Err() != nil && ctx.Err() == nil
			cancel()
		}
		switch {
		case left > 0 && err == nil && ok:
			r.mu.Lock()
			r.renewed, r.leader = sent, r.address
			r.mu.Unlock()
			return nil
		case left > 0 && err == nil:
			r.log.Warn("the leadership lease moved to another node: stepping down", "term", term)
		case !late && r.clock.Now().Sub(renewed) < r.ttl*3/4:
			r.log.Warn("renewing the leadership lease failed; retrying", "term", term, "err", err)
			return nil
		default:
			r.log.Error("the leadership lease could not be renewed in time: stepping down", "term", term, "err", err)
		}
		return r.change(ctx, RoleFollower, 0)
	}
	l, err := r.lease.Leader(ctx)
	if err != nil {
		r.log.Warn("reading the leadership lease", "err", err)
		if role == "" {
			return r.change(ctx, RoleFollower, 0)
		}
		return nil
	}
	// A lease held under this node's own name is a past run's (names are unique among
	// live nodes): take it back at once rather than follow a leader that is gone.
	r.mu.Lock()
	r.known = max(r.known, l.Term)
	r.mu.Unlock()
	if l.Held && l.Holder != r.name {
		r.mu.Lock()
		r.leader = l.Address
		r.mu.Unlock()
		if role == "" {
			return r.change(ctx, RoleFollower, 0)
		}
		return nil
	}
	sent := r.clock.Now()
	term, ok, err := r.lease.Acquire(ctx, r.name, r.address, r.ttl)
	if err != nil || !ok {
		if err != nil {
			r.log.Warn("taking the leadership lease", "err", err)
		}
		if role == "" {
			return r.change(ctx, RoleFollower, 0)
		}
		return nil
	}
	r.mu.Lock()
	r.renewed, r.leader, r.known = sent, r.address, term
	r.mu.Unlock()
	r.log.Info("took the leadership lease", "term", term, "previous", l.Holder)
	return r.change(ctx, RoleLeader, term)
}

// change switches the node to role; a leader that cannot start its services gives the
// lease back and follows.
func (r *roles) change(ctx context.Context, role string, term uint64) error {
	err := r.become(ctx, role, term)
	if err != nil && role == RoleLeader {
		r.log.Error("could not start as the leader: giving the lease back", "term", term, "err", err)
		_ = r.lease.Release(ctx, term)
		role, term = RoleFollower, 0
		err = r.become(ctx, role, 0)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		// Neither role could start: the next round tries again.
		r.role, r.term = "", 0
		return err
	}
	if r.role != "" && r.role != role {
		r.changes++
	}
	r.role, r.term = role, term
	if role == RoleFollower && r.leader == r.address {
		r.leader = ""
	}
	return nil
}

// state reports the node's role, the leadership term it knows of (its own while it
// leads, the lease's as last read while it follows), the leader's address ("" when
// unknown) and the role changes so far.
func (r *roles) state() (role string, term uint64, leader string, changes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.role, max(r.term, r.known), r.leader, r.changes
}
