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
	if err := recvT(t, expired); !errors.Is(err, client.ErrLeaseExpired) || herald.CodeOf(err) != herald.CodeAckTimeout {
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
