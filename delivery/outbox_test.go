package delivery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/memstore"
	"github.com/herald-mq/herald/watch"
)

// openOn starts an engine on backend (its clock manual), a delivery service and the
// watch service that runs watch management (CANCEL WATCH), stopped when t ends.
func openOn(t *testing.T, backend store.Backend) (*engine.Engine, *delivery.Service) {
	t.Helper()
	ctx := context.Background()
	eng, err := engine.Open(ctx, engine.Config{Backend: backend, Clock: clock.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), Logger: quiet, Layer0Interval: 1000 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(ctx) })
	svc := delivery.New(delivery.Config{Engine: eng, Logger: quiet})
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(ctx) })
	wat := watch.New(watch.Config{Engine: eng, Logger: quiet})
	if err := wat.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wat.Stop(ctx) })
	return eng, svc
}

// openOutbox starts the services on the in-memory backend with n Jobs queued.
func openOutbox(t *testing.T, n int) (*engine.Engine, *delivery.Service) {
	t.Helper()
	eng, svc := openOn(t, memstore.New())
	if _, err := eng.Exec(context.Background(), "", `node Job { n: Int }`, nil); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := eng.Exec(context.Background(), "", fmt.Sprintf(`SPAWN j: Job { n = %d }`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	return eng, svc
}

// A consumer's channel holds what its credit needs, not what its largest credit could:
// a stream that may raise its credit to 10,000 but starts at 100 does not reserve room
// for 20,000 events (4.6 MB).
func TestConsumerChannelFollowsItsCredit(t *testing.T) {
	_, svc := openOutbox(t, 0)
	c, err := svc.Subscribe(t.Context(), "", `WATCH j: Job [mode: consume] RETURN j`, nil, 100, 10000)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := delivery.ConsumerChanCap(c); n > 2*100+1 {
		t.Fatalf("a consumer with a credit of 100 has a channel of %d events", n)
	}
}

// Raised past what its channel holds, a consumer's credit still brings every delivery
// out, in order, as the transport reads: what does not fit waits in the overflow.
func TestRaisedCreditDeliversEverythingInOrder(t *testing.T) {
	const n = 300
	_, svc := openOutbox(t, n)
	c, err := svc.Subscribe(t.Context(), "", `WATCH j: Job [mode: consume] RETURN j.n AS n`, nil, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.(interface{ SetCredit(int) error }).SetCredit(1000); err != nil {
		t.Fatal(err)
	}
	svc.Flush()
	if delivery.ConsumerOverflow(c) == 0 {
		t.Fatalf("%d deliveries fit a channel of %d: the overflow went untested", n, delivery.ConsumerChanCap(c))
	}
	for i := range n {
		select {
		case ev := <-c.Events():
			if ev.Type != herald.EventConsumed || ev.Match.MapGet("n").AsInt() != int64(i) {
				t.Fatalf("event %d: %s %v, want the delivery of n = %d", i, ev.Type, ev.Match, i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d deliveries of %d came out", i, n)
		}
	}
}

// A consumer that ends while deliveries wait in its overflow still ends its channel:
// the transport reads what is in it, then sees it closed.
func TestConsumerEndsWithItsOverflow(t *testing.T) {
	_, svc := openOutbox(t, 300)
	c, err := svc.Subscribe(t.Context(), "", `WATCH j: Job [mode: consume] RETURN j`, nil, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.(interface{ SetCredit(int) error }).SetCredit(1000); err != nil {
		t.Fatal(err)
	}
	svc.Flush()
	if delivery.ConsumerOverflow(c) == 0 {
		t.Fatal("every delivery fits the channel: the overflow went untested")
	}
	c.Close()
	end := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-c.Events():
			if !ok {
				return
			}
		case <-end:
			t.Fatal("the channel of an ended consumer did not close")
		}
	}
}

// A consumer whose channel a mover filled to the last slot, the one kept for the ending
// event, still ends without waiting for its transport: CANCEL does not block the
// service, and the transport reads every delivery, then the ending, then the close.
func TestEndingAfterAMoverFilledTheChannel(t *testing.T) {
	eng, svc := openOutbox(t, 0)
	c, err := svc.Subscribe(t.Context(), "", `c = WATCH j: Job [mode: consume] RETURN j`, nil, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	room := delivery.ConsumerChanCap(c)
	for i := range room {
		if _, err := eng.Exec(t.Context(), "", fmt.Sprintf(`SPAWN j: Job { n = %d }`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.(interface{ SetCredit(int) error }).SetCredit(1000); err != nil {
		t.Fatal(err)
	}
	svc.Flush()
	for deadline := time.Now().Add(10 * time.Second); len(c.Events()) < room || delivery.ConsumerOverflow(c) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d events in a channel of %d, %d in the overflow", len(c.Events()), room, delivery.ConsumerOverflow(c))
		}
	}
	cancelled := make(chan error, 1)
	go func() {
		_, err := eng.Exec(context.Background(), "", `CANCEL WATCH c`, nil)
		cancelled <- err
	}()
	select {
	case err := <-cancelled:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CANCEL waited for the transport of a consumer whose channel was full")
	}
	var consumed int
	for ev := range c.Events() {
		switch ev.Type {
		case herald.EventConsumed:
			consumed++
		case herald.EventError:
			if ev.Code != herald.CodeWatchNotFound || consumed != room {
				t.Fatalf("ending %s after %d deliveries of %d", ev.Code, consumed, room)
			}
			consumed = -1
		}
	}
	if consumed != -1 {
		t.Fatalf("the channel closed after %d deliveries without the ending event", consumed)
	}
}
