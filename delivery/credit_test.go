package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/store/memstore"
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

	release := st.Hold()
	acked := make(chan error, 1)
	svc.SettleAsync([]delivery.Settle{{DeliveryID: first.DeliveryID, Action: delivery.ActAck}}, func(res []delivery.SettleResult, _, _ uint64) {
		acked <- res[0].Err
	})
	for deadline := time.Now().Add(10 * time.Second); delivery.ConsumerLeases(c) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			release()
			t.Fatal("the next message was not leased while the ACK waited for its sync")
		}
	}
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
