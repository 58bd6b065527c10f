package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/store/memstore"
)

// shared lets a second engine use a store without closing it: the writer owns it.
type shared struct{ *memstore.Store }

func (shared) Close() error { return nil }

// A follower applies what the writer commits to its own graph, in order, answers MATCH
// from it, hands the change sets to its listeners, and commits nothing itself.
func TestFollowerFollowsTheChangeLog(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	leader, err := engine.Open(ctx, engine.Config{Backend: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close(ctx)
	if _, err := leader.Exec(ctx, "", `SPAWN #a: Job { n = 1 }`, nil); err != nil {
		t.Fatal(err)
	}
	follower, err := engine.Open(ctx, engine.Config{Backend: shared{st}, Logger: quiet, Follower: true})
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close(ctx)

	var mu sync.Mutex
	var seen []uint64
	follower.Listen(func(sets []*herald.ChangeSet) {
		mu.Lock()
		defer mu.Unlock()
		for _, cs := range sets {
			seen = append(seen, cs.Seq)
		}
	})
	// The writer's commits wake the follower, as a store's notifications would.
	wake := make(chan struct{}, 1)
	leader.Listen(func([]*herald.ChangeSet) {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	wait := func(ctx context.Context, after uint64) error {
		select {
		case <-wake:
			return nil
		case <-time.After(20 * time.Millisecond): // the store's own poll
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- follower.Follow(fctx, wait) }()

	for i := 2; i <= 5; i++ {
		if _, err := leader.Exec(ctx, "", fmt.Sprintf(`SPAWN j: Job { n = %d }`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := leader.Position()
	deadline := time.Now().Add(10 * time.Second)
	for seq, _ := follower.Position(); seq < want; seq, _ = follower.Position() {
		if time.Now().After(deadline) {
			t.Fatalf("follower at seq %d, writer at %d", seq, want)
		}
		time.Sleep(time.Millisecond)
	}
	resp, err := follower.Exec(ctx, "", `MATCH j: Job RETURN sum(j.n)`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Results[0].Rows[0][0].AsInt(); got != 15 {
		t.Fatalf("sum on the follower %d, want 15", got)
	}
	mu.Lock()
	if len(seen) == 0 || seen[len(seen)-1] != want {
		t.Fatalf("listener saw %v, want up to %d", seen, want)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] != seen[i-1]+1 {
			t.Fatalf("listener saw %v: not in order", seen)
		}
	}
	mu.Unlock()
	if _, err := follower.Exec(ctx, "", `SPAWN j: Job { n = 9 }`, nil); herald.CodeOf(err) != herald.CodeNotLeader {
		t.Fatalf("a write on the follower: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow ended with %v", err)
	}
}
