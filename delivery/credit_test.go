package delivery_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/memstore"
	"github.com/herald-mq/herald/store/pebblestore"
	"github.com/herald-mq/herald/store/storetest"
)

// TestAckFreesCreditBeforeItIsDurable: a consumer's credit counts the messages it has
// not settled. Once the server has claimed its ACK the message is out of the
// consumer's hands, so the next one is leased while the ACK's commit still waits for
// its sync; the ACK itself is answered only once durable.
func TestAckFreesCreditBeforeItIsDurable(t *testing.T) {
	ctx := context.Background()
	st := &storetest.Gated{Backend: memstore.New()}
	eng, svc := openOn(t, st)
	for _, q := range []string{`node Job { n: Int }`, `SPAWN a: Job { n = 1 }`, `SPAWN b: Job { n = 2 }`} {
		if _, err := eng.Exec(ctx, "", q, nil); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	c, err := svc.Subscribe(ctx, "", `WATCH j: Job [mode: consume] RETURN j.n AS n`, nil, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	next := func() herald.Event {
		t.Helper()
		select {
		case ev := <-c.Events():
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery")
			return herald.Event{}
		}
	}
	first := next()

	release, acked := ackWhileHeld(t, st, svc, c, first)
	select {
	case err := <-acked:
		release()
		t.Fatalf("the ACK was answered (%v) before its commit was durable", err)
	default:
	}
	release()
	if err := <-acked; err != nil {
		t.Fatalf("ACK: %v", err)
	}
	if second := next(); second.Match.MapGet("n").AsInt() != 2 {
		t.Fatalf("second delivery %v, want n = 2", second.Match)
	}
}

// TestFailedAckLosesNothing: the credit an accepted ACK gives back leases the next
// message at once, but that lease commits after the ACK, and nothing reaches the
// consumer before its lease is durable. When the store fails with both commits
// waiting, the ACK is answered with the failure and the next message never reaches
// the consumer. After a restart the next message is ready, and the one whose ACK failed
// is still there, leased until its deadline (leases are durable) and delivered again
// once it passes.
func TestFailedAckLosesNothing(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	clk := clock.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	start := func(wrap func(store.Backend) store.Backend) (*engine.Engine, *delivery.Service) {
		st, err := pebblestore.Open("db", pebblestore.Options{FS: fs, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		eng, err := engine.Open(ctx, engine.Config{Backend: wrap(st), Clock: clk, Logger: quiet, Layer0Interval: 1000 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		svc := delivery.New(delivery.Config{Engine: eng, Logger: quiet})
		if err := svc.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return eng, svc
	}
	var gated *storetest.Gated
	eng, svc := start(func(b store.Backend) store.Backend { gated = &storetest.Gated{Backend: b}; return gated })
	for _, q := range []string{`node Job { n: Int }`, `SPAWN a: Job { n = 1 }`, `SPAWN b: Job { n = 2 }`} {
		if _, err := eng.Exec(ctx, "", q, nil); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const w = `WATCH j: Job [mode: consume, group: "g", ack_timeout: 30s] RETURN j.n AS n`
	c, err := svc.Subscribe(ctx, "", w, nil, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var first herald.Event
	select {
	case first = <-c.Events():
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}

	release, acked := ackWhileHeld(t, gated, svc, c, first)
	gated.Fail(errors.New("the disk is gone"))
	release()
	if err := <-acked; herald.CodeOf(err) != herald.CodeStorage {
		t.Fatalf("ACK answered %v, want %s", err, herald.CodeStorage)
	}
	c.Close()
	_ = svc.Stop(ctx)
	for drained := false; !drained; {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				drained = true
			} else if ev.Type == delivery.EventConsumed {
				t.Fatalf("a delivery reached the consumer after the store failed: %+v", ev)
			}
		default:
			drained = true
		}
	}
	_ = eng.Close(ctx)

	eng, svc = start(func(b store.Backend) store.Backend { return b })
	defer func() { _ = svc.Stop(ctx); _ = eng.Close(ctx) }()
	evs, err := svc.Lease(ctx, "", w, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Match.MapGet("n").AsInt() != 2 {
		t.Fatalf("after the restart: %+v, want n = 2 alone (n = 1 is leased until its deadline)", evs)
	}
	// Both leases lapse (n = 2's, taken just now, has the same deadline): n = 1 comes
	// back first, in queue order.
	clk.Advance(31 * time.Second)
	svc.Flush()
	evs, err = svc.Lease(ctx, "", w, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Match.MapGet("n").AsInt() != 1 || evs[0].Attempt != 2 {
		t.Fatalf("past the deadline: %+v, want n = 1 on its second attempt", evs)
	}
}

// ackWhileHeld holds st's commits, ACKs d and waits until the credit the ACK gave back
// has leased the next message. The ACK's answer comes on acked; release lets the held
// commits go on.
func ackWhileHeld(t *testing.T, st *storetest.Gated, svc *delivery.Service, c delivery.Consumer, d herald.Event) (release func(), acked <-chan error) {
	t.Helper()
	release = st.Hold()
	answer := make(chan error, 1)
	svc.SettleAsync([]delivery.Settle{{DeliveryID: d.DeliveryID, Action: delivery.ActAck}}, func(res []delivery.SettleResult, _, _ uint64) {
		answer <- res[0].Err
	})
	for deadline := time.Now().Add(10 * time.Second); delivery.ConsumerLeases(c) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			release()
			t.Fatal("the next message was not leased while the ACK waited for its sync")
		}
	}
	return release, answer
}
