package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// mustSubscribe subscribes and fails the test if the server refuses the subscription;
// the subscription is closed when the test ends.
func mustSubscribe(t *testing.T, c *client.Client, watch string, h client.Handler, opts ...client.SubscribeOption) *client.Subscription {
	t.Helper()
	sub, err := c.Subscribe(context.Background(), watch, h, opts...)
	if err != nil {
		t.Fatalf("Subscribe %s: %v", watch, err)
	}
	t.Cleanup(func() { _ = sub.Close(context.Background()) })
	return sub
}

// An expired lease cancels the handler's context, refuses its settlement, and the
// message comes back with the next attempt — on the server's manual clock.
func TestLeaseExpiryAgainstServer(t *testing.T) {
	srv := heraldtest.NewServer(t, heraldtest.WithManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	srv.Exec(`node Job { name: String }`, nil)
	ctx := context.Background()
	c := srv.Client()
	if _, err := c.Publish(ctx, "Job", map[string]any{"name": "slow"}); err != nil {
		t.Fatal(err)
	}
	started := make(chan int, 4)
	expired := make(chan error, 1)
	mustSubscribe(t, c, `WATCH j: Job [mode: consume, ack_timeout: 5s] RETURN j.name AS name`,
		func(ctx context.Context, m *client.Message) error {
			started <- m.Attempt
			if m.Attempt > 1 {
				return nil
			}
			<-ctx.Done()
			expired <- m.Ack(ctx)
			return nil
		}, client.WithPolicy(client.NackOnError), client.WithPrefetch(1))
	if a := recvT(t, started); a != 1 {
		t.Fatalf("first attempt %d", a)
	}
	srv.Advance(6 * time.Second)
	if err := recvT(t, expired); !errors.Is(err, client.ErrLeaseExpired) || !errors.Is(err, herald.CodeAckTimeout) || herald.CodeOf(err) != herald.CodeAckTimeout {
		t.Fatalf("Ack after expiry: %v", err)
	}
	if a := recvT(t, started); a != 2 {
		t.Fatalf("redelivery attempt %d, want 2", a)
	}
}

func recvT[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting")
		var zero T
		return zero
	}
}

// Transactional: the handler's writes and the ACK commit together; a handler that
// fails writes nothing and its message is NACKed by the policy; a commit refused
// because the lease lapsed meanwhile writes nothing either, and the message comes back.
func TestTransactionalHandlerAgainstServer(t *testing.T) {
	srv := heraldtest.NewServer(t, heraldtest.WithManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	srv.Exec(`node TJob { n: Int } node TOut { n: Int }`, nil)
	ctx := context.Background()
	c := srv.Client()
	for _, n := range []int{1, 2, 3} {
		if _, err := c.Publish(ctx, "TJob", map[string]any{"n": n}); err != nil {
			t.Fatal(err)
		}
	}
	type seen struct{ n, attempt int }
	calls := make(chan seen, 16)
	lapse := make(chan struct{})
	mustSubscribe(t, c, `WATCH j: TJob [mode: consume, ack_timeout: 5s] RETURN j.n AS n`,
		c.Transactional(func(ctx context.Context, m *client.Message, tx *client.Tx) error {
			n := int(m.Match["n"].(int64))
			if _, err := tx.Exec(ctx, `SPAWN o: TOut { n = $n }`, map[string]any{"n": n}); err != nil {
				return err
			}
			calls <- seen{n, m.Attempt}
			switch {
			case n == 2 && m.Attempt == 1:
				return errors.New("fails once")
			case n == 3 && m.Attempt == 1:
				<-lapse // the test lets the lease lapse before the commit
			}
			return nil
		}), client.WithPolicy(client.NackOnError), client.WithPrefetch(1))

	outs := func() map[int64]int {
		r, err := c.Exec(ctx, `MATCH o: TOut RETURN o.n`, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]int{}
		for _, row := range r.Results[0].Rows {
			got[row[0].(int64)]++
		}
		return got
	}
	// One at a time (prefetch 1): job 2, NACKed, comes back at its place, before job 3.
	for _, w := range []seen{{1, 1}, {2, 1}, {2, 2}, {3, 1}} {
		if got := recvT(t, calls); got != w {
			t.Fatalf("handler call %+v, want %+v", got, w)
		}
	}
	srv.Advance(6 * time.Second) // job 3's lease lapses while its handler waits
	close(lapse)
	if got := recvT(t, calls); got != (seen{3, 2}) {
		t.Fatalf("handler call %+v, want job 3 at attempt 2 (its first commit refused)", got)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := outs()
		r, err := c.Exec(ctx, `MATCH j: TJob RETURN COUNT(j)`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Results[0].Rows[0][0].(int64) == 0 {
			// Read the outputs again: job 3's commit may have landed
			// between the two queries above.
			got = outs()
			if got[1] != 1 || got[2] != 1 || got[3] != 1 || len(got) != 3 {
				t.Fatalf("outputs %v, want one per job", got)
			}
			return
		}
		if time.Now().After(deadline) { // a bound on a hang, not a speed assertion
			t.Fatalf("jobs left; outputs %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
