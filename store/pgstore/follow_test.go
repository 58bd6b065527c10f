package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/pgstore"
)

func waitAsync(s *pgstore.Store, after uint64) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- s.WaitChanges(ctx, after)
	}()
	return done
}

// TestWaitChangesNotified wakes a follower with the leader's announcements: with a
// poll interval of an hour, only a notification (or the look the listener takes when
// it connects, once) can wake it.
func TestWaitChangesNotified(t *testing.T) {
	schema := newSchema(t)
	leader := mustOpen(t, schema, pgstore.Options{})
	defer leader.Close()
	follower := mustOpen(t, schema, pgstore.Options{Poll: time.Hour})
	defer follower.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := follower.WaitChanges(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitChanges with nothing committed = %v", err)
	}
	for seq := uint64(1); seq <= 4; seq++ {
		done := waitAsync(follower, seq-1)
		if seq%2 == 0 {
			commit(t, leader, put(seq, node("n", seq)))
		} else {
			errs, wait, err := leader.CommitAsync(context.Background(), []*store.Batch{put(seq, node("n", seq))})
			if err != nil || errs[0] != nil || wait() != nil {
				t.Fatalf("CommitAsync = %v, %v", errs, err)
			}
		}
		if err := <-done; err != nil {
			t.Fatalf("WaitChanges(%d) = %v", seq-1, err)
		}
		cs, err := follower.Changes(context.Background(), seq-1, 0)
		if err != nil || len(cs) != 1 || cs[0].Seq != seq {
			t.Fatalf("Changes(%d) = %v, %v", seq-1, cs, err)
		}
	}
	// What is known already answers at once.
	if err := follower.WaitChanges(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
}

// TestWaitChangesPolls loses every notification: the follower still sees the commit at
// its next poll, which its clock times: not before the clock moves, at once after.
func TestWaitChangesPolls(t *testing.T) {
	schema := newSchema(t)
	leader := mustOpen(t, schema, pgstore.Options{})
	defer leader.Close()
	pgstore.Silence(leader)
	clk := clock.NewManual(time.Unix(1700000000, 0))
	const poll = 500 * time.Millisecond
	follower := mustOpen(t, schema, pgstore.Options{Poll: poll, Clock: clk})
	defer follower.Close()
	// The first wait starts the listener, which looks once when it connects; after that
	// only a poll can wake the follower.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := follower.WaitChanges(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitChanges with nothing committed = %v", err)
	}
	select {
	case <-pgstore.Listening(follower):
	case <-time.After(20 * time.Second):
		t.Fatal("the follower's listener never listened")
	}
	for seq := uint64(1); seq <= 2; seq++ {
		done := waitAsync(follower, seq-1)
		for deadline := time.Now().Add(20 * time.Second); clk.Pending() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("WaitChanges armed no poll timer")
			}
		}
		commit(t, leader, put(seq, node("n", seq)))
		select {
		case err := <-done:
			t.Fatalf("WaitChanges(%d) returned %v before its clock reached the poll", seq-1, err)
		case <-time.After(2 * poll): // a poll timed by the wall clock would have come
		}
		clk.Advance(poll)
		if err := <-done; err != nil {
			t.Fatalf("WaitChanges(%d) = %v", seq-1, err)
		}
	}
}

func TestWaitChangesClosed(t *testing.T) {
	s := mustOpen(t, newSchema(t), pgstore.Options{Poll: time.Hour})
	done := waitAsync(s, 0)
	// Close waits for no waiter: WaitChanges holds no lock while it waits.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrClosed) {
		t.Fatalf("WaitChanges across Close = %v, want ErrClosed", err)
	}
	if err := s.WaitChanges(context.Background(), 0); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("WaitChanges after Close = %v", err)
	}
}
