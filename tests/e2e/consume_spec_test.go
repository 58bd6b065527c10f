package e2e

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/herald-mq/herald/client"
)

// TestLeavingConsumersKeepTheBudget: with max_redeliveries: 0, a job whose holders leave
// in turn — SSE streams that disconnect, and a Go client subscription closed gracefully —
// goes to the next member each time, at attempt 1, with its releases counted on the
// delivery and in /metrics. Only the NACK at the end spends the budget.
func TestLeavingConsumersKeepTheBudget(t *testing.T) {
	s := startServer(t, t.TempDir())
	u := s.URL()
	mustQuery(t, u, `SPAWN #job: LeaveJob { n = 1 }`)
	const w = `WATCH j: LeaveJob [mode: consume, group: "workers", max_redeliveries: 0] RETURN j`
	for i := range 4 {
		st := mustOpen(t, u, w)
		ev := st.nextConsumed(t)
		if ev.subjectID() != "job" || ev.Attempt != 1 || ev.Releases != i {
			t.Fatalf("member %d got %s at attempt %d after %d releases; want job, attempt 1, %d releases", i, ev.subjectID(), ev.Attempt, ev.Releases, i)
		}
		st.Close() // the connection drops with the job unsettled
	}

	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	c, err := client.Dial(ctx, u, client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make(chan *client.Message, 1)
	sub, err := c.Subscribe(ctx, w, func(_ context.Context, m *client.Message) error {
		got <- m
		return nil // Manual: left unsettled
	}, client.WithPolicy(client.Manual))
	if err != nil {
		t.Fatal(err)
	}
	var m *client.Message
	select {
	case m = <-got:
	case <-ctx.Done():
		t.Fatal("the client got no delivery")
	}
	if m.Attempt != 1 || m.Releases != 4 {
		t.Fatalf("the client got attempt %d after %d releases, want attempt 1 after 4", m.Attempt, m.Releases)
	}
	if err := sub.Close(ctx); err != nil { // graceful: the unsettled message is released
		t.Fatal(err)
	}

	st := mustOpen(t, u, w)
	ev := st.nextConsumed(t)
	if ev.Attempt != 1 || ev.Releases != 5 {
		t.Fatalf("last member got attempt %d after %d releases, want attempt 1 after 5", ev.Attempt, ev.Releases)
	}
	if got := metric(t, u, "herald_consume_released_total"); got != "5" {
		t.Fatalf("herald_consume_released_total = %s, want 5", got)
	}
	if n := len(deadLetters(t, u)); n != 0 {
		t.Fatalf("%d dead letters before any NACK", n)
	}
	mustSettle(t, u, "NACK", ev.DeliveryID, "")
	r := mustQuery(t, u, `MATCH d: _DeadLetter RETURN d.delivery_attempts`)
	if got := rowsJSON(r, 0); got != "[[1]]" {
		t.Fatalf("dead letters after one NACK: %s, want one after 1 attempt", got)
	}
}

// TestSettlementInTransaction: consume, transform, produce in one commit over HTTP.
// `BEGIN; ACK $d; SPAWN …; COMMIT` deletes the job and writes the result together;
// ROLLBACK leaves the lease as it was; a COMMIT after the delivery was settled
// elsewhere fails with E8004 (404) and writes nothing.
func TestSettlementInTransaction(t *testing.T) {
	s := startServer(t, t.TempDir())
	u := s.URL()
	mustQuery(t, u, `SPAWN #a: TxJob { n = 1 }`)
	mustQuery(t, u, `SPAWN #b: TxJob { n = 2 }`)
	st := mustOpen(t, u, `WATCH j: TxJob [mode: consume, ack_timeout: 1m] RETURN j`)
	first, second := st.nextConsumed(t), st.nextConsumed(t)

	r, err := query(u, `BEGIN; ACK $d; SPAWN r: TxResult { of = $of }; COMMIT`, map[string]any{"d": first.DeliveryID, "of": first.subjectID()})
	if err != nil || r.Status != 200 {
		t.Fatalf("transaction with ACK: %v %+v", err, r)
	}
	if got := rowsJSON(mustQuery(t, u, `MATCH r: TxResult RETURN r.of`), 0); got != `[["`+first.subjectID()+`"]]` {
		t.Fatalf("results %s after the commit", got)
	}
	if ids(t, u, "TxJob")[first.subjectID()] {
		t.Fatalf("job %s still there after the committed ACK", first.subjectID())
	}

	sess := openSession(t, u)
	mustSessionQuery(t, u, sess, `BEGIN`)
	mustSessionQuery(t, u, sess, `ACK "`+second.DeliveryID+`"`)
	mustSessionQuery(t, u, sess, `SPAWN r: TxResult { of = "rolled back" }`)
	mustSessionQuery(t, u, sess, `ROLLBACK`)
	mustSessionQuery(t, u, sess, `BEGIN`)
	mustSessionQuery(t, u, sess, `ACK "`+second.DeliveryID+`"`)
	mustSessionQuery(t, u, sess, `SPAWN r: TxResult { of = "too late" }`)
	mustSettle(t, u, "ACK", second.DeliveryID, "") // the lease was as it was: it settles
	c := sessionQuery(t, u, sess, `COMMIT`)
	if c.Status != 404 || c.Error == nil || c.Error.Code != "E8004" {
		t.Fatalf("COMMIT after the delivery was settled elsewhere: status %d %+v, want 404 E8004", c.Status, c.Error)
	}
	if got := rowsJSON(mustQuery(t, u, `MATCH r: TxResult RETURN COUNT(r)`), 0); got != "[[1]]" {
		t.Fatalf("%s results, want only the committed one", got)
	}
}
