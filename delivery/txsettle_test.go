package delivery_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
)

// txHarness opens a consumer on one job and returns its delivery.
func txHarness(t *testing.T) (*harness, delivery.Stream, delivery.Event) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.eng.Exec(ctx, "", `SPAWN #job: TxJob { n = 7 }`, nil); err != nil {
		t.Fatal(err)
	}
	st, err := h.svc.Consume(ctx, "", `WATCH j: TxJob [mode: consume, ack_timeout: 30s] RETURN j.n`, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	h.svc.Flush()
	ev := <-st.Events()
	if ev.Type != delivery.EventConsumed {
		t.Fatalf("first event %+v", ev)
	}
	return h, st, ev
}

func (h *harness) count(q string) int64 {
	h.t.Helper()
	res, err := h.eng.Exec(context.Background(), "", q, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Results[0].Rows[0][0].AsInt()
}

func wantCode(t *testing.T, err error, code herald.Code) {
	t.Helper()
	var he *herald.Error
	if !errors.As(err, &he) || he.Code != code {
		t.Fatalf("error %v, want %s", err, code)
	}
}

// TestAckInTransaction: ACK and a SPAWN commit together; the delivery id is spent.
func TestAckInTransaction(t *testing.T) {
	h, _, ev := txHarness(t)
	ctx := context.Background()
	d := map[string]herald.Value{"d": herald.String(ev.DeliveryID)}
	if _, err := h.eng.Exec(ctx, "", `BEGIN; ACK $d; SPAWN r: TxResult { n = 8 }; COMMIT`, d); err != nil {
		t.Fatal(err)
	}
	if n := h.count(`MATCH j: TxJob RETURN COUNT(j)`); n != 0 {
		t.Fatalf("%d jobs after the transaction's ACK", n)
	}
	if n := h.count(`MATCH r: TxResult RETURN COUNT(r)`); n != 1 {
		t.Fatalf("%d results after COMMIT", n)
	}
	_, err := h.eng.Exec(ctx, "", `ACK $d`, d)
	wantCode(t, err, herald.CodeInvalidDeliveryID)
}

// TestTransactionFailsWhenLeaseLapsed: the lease expires between ACK and COMMIT; the
// COMMIT answers E8004 and applies nothing, and the job is redelivered.
func TestTransactionFailsWhenLeaseLapsed(t *testing.T) {
	h, st, ev := txHarness(t)
	ctx := context.Background()
	sess, err := h.eng.OpenSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := map[string]herald.Value{"d": herald.String(ev.DeliveryID)}
	if _, err := h.eng.Exec(ctx, sess, `BEGIN; ACK $d; SPAWN r: TxResult { n = 8 }`, d); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(31 * time.Second)
	h.svc.Flush()
	_, err = h.eng.Exec(ctx, sess, `COMMIT`, nil)
	wantCode(t, err, herald.CodeInvalidDeliveryID)
	if n := h.count(`MATCH r: TxResult RETURN COUNT(r)`); n != 0 {
		t.Fatalf("%d results after a failed COMMIT", n)
	}
	if n := h.count(`MATCH j: TxJob RETURN COUNT(j)`); n != 1 {
		t.Fatalf("%d jobs after a failed COMMIT", n)
	}
	h.svc.Flush()
	var again delivery.Event
	for again.Type != delivery.EventConsumed {
		again = <-st.Events()
	}
	if again.Attempt != 2 {
		t.Fatalf("redelivery %+v, want attempt 2", again)
	}
}

// TestRollbackLeavesTheLease: ROLLBACK after ACK leaves the lease as it was: its id
// still settles, and nothing of the transaction was written.
func TestRollbackLeavesTheLease(t *testing.T) {
	h, _, ev := txHarness(t)
	ctx := context.Background()
	d := map[string]herald.Value{"d": herald.String(ev.DeliveryID)}
	if _, err := h.eng.Exec(ctx, "", `BEGIN; ACK $d; SPAWN r: TxResult { n = 8 }; ROLLBACK`, d); err != nil {
		t.Fatal(err)
	}
	if n := h.count(`MATCH r: TxResult RETURN COUNT(r)`); n != 0 {
		t.Fatalf("%d results after ROLLBACK", n)
	}
	if _, err := h.eng.Exec(ctx, "", `ACK $d`, d); err != nil {
		t.Fatalf("ACK after ROLLBACK: %v", err)
	}
}

// TestNackInTransaction: a NACK commits with the writes; the job comes back at
// attempt 2. A second settlement of the same id in one transaction fails it whole.
func TestNackInTransaction(t *testing.T) {
	h, st, ev := txHarness(t)
	ctx := context.Background()
	d := map[string]herald.Value{"d": herald.String(ev.DeliveryID)}
	_, err := h.eng.Exec(ctx, "", `BEGIN; ACK $d; NACK $d; SPAWN r: TxResult { n = 1 }; COMMIT`, d)
	wantCode(t, err, herald.CodeInvalidDeliveryID)
	if n := h.count(`MATCH r: TxResult RETURN COUNT(r)`); n != 0 {
		t.Fatalf("%d results after a failed COMMIT", n)
	}
	if _, err := h.eng.Exec(ctx, "", `BEGIN; NACK $d; SPAWN r: TxResult { n = 2 }; COMMIT`, d); err != nil {
		t.Fatal(err)
	}
	if n := h.count(`MATCH r: TxResult RETURN COUNT(r)`); n != 1 {
		t.Fatalf("%d results after COMMIT", n)
	}
	h.svc.Flush()
	again := <-st.Events()
	if again.Type != delivery.EventConsumed || again.Attempt != 2 {
		t.Fatalf("after the NACK: %+v, want a redelivery at attempt 2", again)
	}
}

// TestUnknownDeliveryInTransaction: an unknown id fails its statement at once, and the
// open transaction is rolled back.
func TestUnknownDeliveryInTransaction(t *testing.T) {
	h, _, _ := txHarness(t)
	_, err := h.eng.Exec(context.Background(), "", `BEGIN; SPAWN r: TxResult { n = 1 }; ACK "dnosuch"; COMMIT`, nil)
	wantCode(t, err, herald.CodeInvalidDeliveryID)
	if n := h.count(`MATCH r: TxResult RETURN COUNT(r)`); n != 0 {
		t.Fatalf("%d results", n)
	}
}
