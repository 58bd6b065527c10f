package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/pgstore"
)

// fakeLease is the leadership lease on a manual clock, shared by several roles.
type fakeLease struct {
	mu       sync.Mutex
	clk      *clock.Manual
	term     uint64
	holder   string
	address  string
	expires  time.Time
	renewErr error // when set, Renew fails with it
	hang     bool  // when set, Renew waits for its context to end
}

func (f *fakeLease) Acquire(_ context.Context, holder, address string, ttl time.Duration) (uint64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holder != "" && f.holder != holder && f.clk.Now().Before(f.expires) {
		return 0, false, nil
	}
	f.term++
	f.holder, f.address, f.expires = holder, address, f.clk.Now().Add(ttl)
	return f.term, true, nil
}

func (f *fakeLease) Renew(ctx context.Context, term uint64, ttl time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hang {
		f.mu.Unlock()
		<-ctx.Done()
		f.mu.Lock()
		return false, ctx.Err()
	}
	if f.renewErr != nil {
		return false, f.renewErr
	}
	if term != f.term || f.holder == "" {
		return false, nil
	}
	f.expires = f.clk.Now().Add(ttl)
	return true, nil
}

func (f *fakeLease) Release(_ context.Context, term uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if term == f.term {
		f.holder, f.address = "", ""
	}
	return nil
}

func (f *fakeLease) Leader(context.Context) (pgstore.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return pgstore.Lease{Term: f.term, Holder: f.holder, Address: f.address, Expires: f.expires,
		Held: f.holder != "" && f.clk.Now().Before(f.expires)}, nil
}

// roleNode returns roles for a node named name on the lease, recording its role changes.
func roleNode(l *fakeLease, name string, fail func(role string) error) (*roles, *[]string) {
	var seen []string
	r := &roles{lease: l, clock: l.clk, log: quietLogger(), name: name, address: "http://" + name, ttl: 4 * time.Second,
		become: func(_ context.Context, role string, term uint64) error {
			if fail != nil {
				if err := fail(role); err != nil {
					return err
				}
			}
			seen = append(seen, role)
			return nil
		}}
	return r, &seen
}

func wantRole(t *testing.T, r *roles, role, leader string) {
	t.Helper()
	if got, _, l, _ := r.state(); got != role || l != leader {
		t.Fatalf("%s: role %q leader %q, want %q and %q", r.name, got, l, role, leader)
	}
}

// One node leads, the other follows and knows where the leader is; when the leader
// stops renewing, it steps down before its lease expires, and the follower takes over
// once it has.
func TestRolesFailover(t *testing.T) {
	ctx := context.Background()
	l := &fakeLease{clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	a, aSeen := roleNode(l, "a", nil)
	b, bSeen := roleNode(l, "b", nil)
	for _, r := range []*roles{a, b} {
		if err := r.step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wantRole(t, a, RoleLeader, "http://a")
	wantRole(t, b, RoleFollower, "http://a")
	if _, term, _, _ := b.state(); term != 1 {
		t.Fatalf("the follower knows of term %d, want the leader's, 1", term)
	}

	// The leader renews; the follower waits.
	for range 8 {
		l.clk.Advance(time.Second)
		_ = a.step(ctx)
		_ = b.step(ctx)
	}
	wantRole(t, a, RoleLeader, "http://a")
	wantRole(t, b, RoleFollower, "http://a")

	// The store stops answering the leader's renewals: it retries, then steps down
	// before the lease (4 s) runs out.
	l.mu.Lock()
	l.renewErr = errors.New("connection refused")
	l.mu.Unlock()
	l.clk.Advance(time.Second)
	_ = a.step(ctx)
	wantRole(t, a, RoleLeader, "http://a")
	l.clk.Advance(2 * time.Second)
	_ = a.step(ctx)
	wantRole(t, a, RoleFollower, "")
	_ = b.step(ctx)
	wantRole(t, b, RoleFollower, "http://a") // the lease has not expired yet
	l.clk.Advance(2 * time.Second)
	_ = b.step(ctx)
	wantRole(t, b, RoleLeader, "http://b")
	_ = a.step(ctx)
	wantRole(t, a, RoleFollower, "http://b")
	if _, term, _, changes := b.state(); term != 2 || changes != 1 {
		t.Fatalf("b: term %d, %d changes", term, changes)
	}
	if _, term, _, _ := a.state(); term != 2 {
		t.Fatalf("a, following b: knows of term %d, want 2", term)
	}
	if len(*aSeen) != 2 || len(*bSeen) != 2 {
		t.Fatalf("changes seen: a %v, b %v", *aSeen, *bSeen)
	}
}

// A leader whose lease moved to another term steps down at its next renewal.
func TestRolesDeposedLeaderStepsDown(t *testing.T) {
	ctx := context.Background()
	l := &fakeLease{clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	a, _ := roleNode(l, "a", nil)
	_ = a.step(ctx)
	wantRole(t, a, RoleLeader, "http://a")
	// a is paused past its lease, and b takes over.
	l.clk.Advance(5 * time.Second)
	b, _ := roleNode(l, "b", nil)
	_ = b.step(ctx)
	wantRole(t, b, RoleLeader, "http://b")
	_ = a.step(ctx)
	wantRole(t, a, RoleFollower, "")
	_ = a.step(ctx)
	wantRole(t, a, RoleFollower, "http://b")
}

// A node that takes the lease but cannot start its leader's services gives the lease
// back and follows, so that another can lead.
func TestRolesLeaderThatCannotStart(t *testing.T) {
	ctx := context.Background()
	l := &fakeLease{clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	a, _ := roleNode(l, "a", func(role string) error {
		if role == RoleLeader {
			return errors.New("disk full")
		}
		return nil
	})
	if err := a.step(ctx); err != nil {
		t.Fatalf("following after a failed start: %v", err)
	}
	wantRole(t, a, RoleFollower, "")
	b, _ := roleNode(l, "b", nil)
	_ = b.step(ctx)
	wantRole(t, b, RoleLeader, "http://b")
}

// The loop starts and stops with the node, and a leader gives its lease back on close.
func TestRolesLoopStops(t *testing.T) {
	l := &fakeLease{clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	a, _ := roleNode(l, "a", nil)
	if err := a.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.close(context.Background())
	if got, _ := l.Leader(context.Background()); got.Held {
		t.Fatalf("lease still held after close: %+v", got)
	}
}

// A node restarted under its name while its past run's lease is still held takes it
// back at once, instead of following (and sending clients to) a leader that is gone.
func TestRolesRestartedLeaderTakesItsLeaseBack(t *testing.T) {
	ctx := context.Background()
	l := &fakeLease{clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	a, _ := roleNode(l, "a", nil)
	_ = a.step(ctx)
	again, _ := roleNode(l, "a", nil) // the same name, a new process
	_ = again.step(ctx)
	wantRole(t, again, RoleLeader, "http://a")
	if _, term, _, _ := again.state(); term != 2 {
		t.Fatalf("term %d, want a new one", term)
	}
}

// A leader whose services failed (a commit failed: the store dropped its connection)
// gives the lease up at its next round and follows, from a new start; another node
// takes over at once rather than after the lease's TTL.
func TestRolesLeaderWhoseServicesFailedStepsDown(t *testing.T) {
	ctx := context.Background()
	l := &fakeLease{clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	a, aSeen := roleNode(l, "a", nil)
	b, _ := roleNode(l, "b", nil)
	_ = a.step(ctx)
	_ = b.step(ctx)
	var mu sync.Mutex
	var broken error
	a.failed = func() error { mu.Lock(); defer mu.Unlock(); return broken }
	_ = a.step(ctx)
	wantRole(t, a, RoleLeader, "http://a")

	mu.Lock()
	broken = errors.New("E5002 STORAGE_FAILED: pgstore: commit: connection reset")
	mu.Unlock()
	_ = a.step(ctx)
	wantRole(t, a, RoleFollower, "")
	mu.Lock()
	broken = nil // its services were opened again
	mu.Unlock()
	if got, _ := l.Leader(ctx); got.Held {
		t.Fatalf("the lease is still held after the leader stepped down: %+v", got)
	}
	_ = b.step(ctx) // no time has passed
	wantRole(t, b, RoleLeader, "http://b")
	_ = a.step(ctx)
	wantRole(t, a, RoleFollower, "http://b")
	if got := *aSeen; len(got) != 2 || got[1] != RoleFollower {
		t.Fatalf("a's role changes: %v", got)
	}
}

// A follower whose services failed (the change log was truncated past its graph's
// position) starts again as a follower, loading the graph from the store; the leader
// is not disturbed.
func TestRolesFollowerWhoseServicesFailedStartsAgain(t *testing.T) {
	ctx := context.Background()
	l := &fakeLease{clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	a, _ := roleNode(l, "a", nil)
	b, bSeen := roleNode(l, "b", nil)
	_ = a.step(ctx)
	_ = b.step(ctx)
	broken := errors.New("engine: read the change log after seq 7: store: position compacted")
	b.failed = func() error { return broken }
	_ = b.step(ctx)
	b.failed = nil
	wantRole(t, b, RoleFollower, "http://a")
	if got := *bSeen; len(got) != 2 || got[0] != RoleFollower || got[1] != RoleFollower {
		t.Fatalf("b's services were not started again: %v", got)
	}
	if _, _, _, changes := b.state(); changes != 0 {
		t.Fatalf("starting again in the same role counted as %d role changes", changes)
	}
	_ = a.step(ctx)
	wantRole(t, a, RoleLeader, "http://a")
}

// A renewal the store does not answer (the network to it cut) is given up at three
// quarters of the ttl from the last one that succeeded, and the leader steps down
// then, before the lease can expire and another node take it.
func TestRolesLeaderWhoseRenewalHangsStepsDownInTime(t *testing.T) {
	ctx := context.Background()
	l := &fakeLease{clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	a, _ := roleNode(l, "a", nil)
	a.ttl = 400 * time.Millisecond
	_ = a.step(ctx)
	wantRole(t, a, RoleLeader, "http://a")
	l.mu.Lock()
	l.hang = true
	l.mu.Unlock()
	l.clk.Advance(100 * time.Millisecond) // a round later: 200 ms of the 300 left
	start := time.Now()
	_ = a.step(ctx)
	if waited := time.Since(start); waited < 150*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("the hanging renewal was given up after %v, want about 200ms", waited)
	}
	wantRole(t, a, RoleFollower, "")
}
