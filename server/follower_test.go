package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/memstore"
)

// sharedStore lets a follower's engine use the leader's store without closing it.
type sharedStore struct{ *memstore.Store }

func (sharedStore) Close() error { return nil }

// truncated is a store whose change log no longer holds anything the follower needs.
type truncated struct{ sharedStore }

func (truncated) Changes(context.Context, uint64, int) ([]*herald.ChangeSet, error) {
	return nil, store.ErrCompacted
}

func openEngines(t *testing.T, follower func(*memstore.Store) store.Backend) (leader, f *engine.Engine) {
	t.Helper()
	ctx := context.Background()
	st := memstore.New()
	leader, err := engine.Open(ctx, engine.Config{Backend: st, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leader.Close(ctx) })
	f, err = engine.Open(ctx, engine.Config{Backend: follower(st), Logger: quietLogger(), Follower: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(ctx) })
	return leader, f
}

// A follower whose reads of the change log fail (the store restarting, a connection
// cut) retries them, and catches up once the store answers again, rather than stop
// following and serve an ever older graph.
func TestFollowRetriesFailedReads(t *testing.T) {
	ctx := context.Background()
	leader, f := openEngines(t, func(st *memstore.Store) store.Backend { return sharedStore{st} })
	var mu sync.Mutex
	failures := 3 // the store does not answer the follower's next three waits
	wait := func(ctx context.Context, after uint64) error {
		mu.Lock()
		fail := failures > 0
		failures--
		mu.Unlock()
		if fail {
			return errors.New("pgstore: reading the position: connection reset by peer")
		}
		select {
		case <-time.After(10 * time.Millisecond): // the store's poll
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var failed error
	go func() {
		defer close(done)
		follow(fctx, f, wait, clock.Real(), quietLogger(), func(err error) { failed = err })
	}()
	defer func() { cancel(); <-done }()

	if _, err := leader.Exec(ctx, "", `SPAWN j: Job { n = 1 }`, nil); err != nil {
		t.Fatal(err)
	}
	want, _ := leader.Position()
	deadline := time.Now().Add(10 * time.Second)
	for seq, _ := f.Position(); seq < want; seq, _ = f.Position() {
		if time.Now().After(deadline) {
			t.Fatalf("the follower stopped at seq %d after its reads failed; the leader is at %d", seq, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if failed != nil {
		t.Fatalf("the follow loop gave up: %v", failed)
	}
}

// A change log truncated past the follower's position ends the loop for good, and the
// follower's stack reports itself not ready (E5002), so that a load balancer stops
// sending it reads until the roles loop has loaded its graph again.
func TestFollowStopsOnATruncatedLog(t *testing.T) {
	_, f := openEngines(t, func(st *memstore.Store) store.Backend { return truncated{sharedStore{st}} })
	st := &stack{role: RoleFollower, eng: f}
	if err := st.err(); err != nil {
		t.Fatalf("before following: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		follow(context.Background(), f, func(context.Context, uint64) error { return nil }, clock.Real(), quietLogger(),
			func(err error) { st.followErr.Store(&err) })
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the follow loop goes on over a truncated log")
	}
	if err := st.err(); herald.CodeOf(err) != herald.CodeStorage || !errors.Is(err, herald.CodeStorage) {
		t.Fatalf("not ready with E5002: %v", err)
	}
}
