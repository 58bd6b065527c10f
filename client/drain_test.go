package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// drainSetup publishes six DrainJob messages and subscribes to them with three
// handlers that each block until release is closed, returning once three run.
func drainSetup(t *testing.T, ctx context.Context, c *client.Client, runs *atomic.Int32, release chan struct{}) *client.Subscription {
	t.Helper()
	srv := context.Background()
	for i := range 6 {
		if _, err := c.Publish(srv, "DrainJob", map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	started := make(chan struct{}, 6)
	sub, err := c.Subscribe(ctx, `WATCH j: DrainJob [mode: consume] RETURN j.n`, func(hctx context.Context, m *client.Message) error {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return hctx.Err() // a cancelled handler context fails the message
	}, client.WithConcurrency(3), client.WithPrefetch(6))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the handlers did not start")
		}
	}
	return sub
}

// remaining counts the DrainJob messages still in the queue.
func remaining(t *testing.T, s *heraldtest.Server) int64 {
	t.Helper()
	r := s.Exec(`MATCH j: DrainJob RETURN COUNT(j)`, nil)
	return r.Results[0].Rows[0][0].(int64)
}

// TestCancelledContextDrains: the usual worker shape — Subscribe with a signal
// context, cancelled on SIGINT — drains: the handlers running then finish with their
// context intact and their messages are acknowledged, nothing else starts, and the
// messages not run stay in the queue. Every message is handled once.
func TestCancelledContextDrains(t *testing.T) {
	s := heraldtest.NewServer(t)
	c := s.Client()
	var runs atomic.Int32
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	sub := drainSetup(t, ctx, c, &runs, release)
	cancel() // SIGINT
	close(release)
	select {
	case <-sub.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription did not end after its context was cancelled")
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("a drained subscription reports %v", err)
	}
	if left, ran := remaining(t, s), int64(runs.Load()); ran < 3 || left != 6-ran {
		t.Fatalf("%d handlers ran and %d messages are left: every message run must be acknowledged (%s)", ran, left, fmt.Sprint(6-ran))
	}
}

// TestClientDrain: Client.Drain drains every subscription the same way, then closes
// the client.
func TestClientDrain(t *testing.T) {
	s := heraldtest.NewServer(t)
	c, err := client.Dial(context.Background(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	release := make(chan struct{})
	sub := drainSetup(t, context.Background(), c, &runs, release)
	close(release) // the handlers return as Drain waits for them
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	<-sub.Done()
	if left, ran := remaining(t, s), int64(runs.Load()); ran < 3 || left != 6-ran {
		t.Fatalf("%d handlers ran and %d messages are left; want every run message acknowledged", ran, left)
	}
	if _, err := c.Exec(context.Background(), `MATCH j: DrainJob RETURN COUNT(j)`, nil); err != client.ErrClosed {
		t.Fatalf("after Drain the client answers %v, want ErrClosed", err)
	}
}
