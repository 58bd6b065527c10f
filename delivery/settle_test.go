package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
)

// TestSettleMany: one batch acks, nacks with a delay, rejects and extends four leases in
// one commit; an unknown id fails on its own and changes nothing.
func TestSettleMany(t *testing.T) {
	eng, svc := openService(t, delivery.Config{})
	ctx := context.Background()
	if _, err := eng.Exec(ctx, "", `SPAWN #a: Job {} SPAWN #b: Job {} SPAWN #c: Job {} SPAWN #d: Job {}`, nil); err != nil {
		t.Fatal(err)
	}
	evs, err := svc.Lease(ctx, "", `WATCH j: Job [mode: consume, group: "g", ack_timeout: 10s] RETURN j.id`, nil, 4)
	if err != nil || len(evs) != 4 {
		t.Fatalf("lease: %v %v", evs, err)
	}
	id := map[string]string{}
	for _, ev := range evs {
		id[ev.Match.MapGet("j.id").AsString()] = ev.DeliveryID
	}
	before, _ := eng.Position()
	results, seq, _ := svc.SettleMany(ctx, []delivery.Settle{
		{DeliveryID: id["a"], Action: delivery.ActAck},
		{DeliveryID: id["b"], Action: delivery.ActNack, Delay: time.Minute},
		{DeliveryID: "dnosuchdelivery", Action: delivery.ActAck},
		{DeliveryID: id["c"], Action: delivery.ActReject},
		{DeliveryID: id["d"], Action: delivery.ActExtend, By: time.Hour},
	})
	for i, want := range []herald.Code{"", "", herald.CodeInvalidDeliveryID, "", ""} {
		var got herald.Code
		if results[i].Err != nil {
			got = herald.CodeOf(results[i].Err)
		}
		if got != want {
			t.Errorf("result %d: %v, want code %q", i, results[i].Err, want)
		}
	}
	if after, _ := eng.Position(); seq != before+1 || after != before+1 {
		t.Fatalf("the batch committed at %d, position %d → %d; want one commit", seq, before, after)
	}
	if d := results[4].Deadline; !d.Equal(eng.Clock().Now().Add(time.Hour)) {
		t.Fatalf("extended deadline %v", d)
	}
	resp, err := eng.Exec(ctx, "", `MATCH j: Job RETURN j.id ORDER BY j.id MATCH l: _DeadLetter RETURN l.subject_id, l.failure_reason`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if jobs := resp.Results[0].Rows; len(jobs) != 2 || jobs[0][0].AsString() != "b" || jobs[1][0].AsString() != "d" {
		t.Fatalf("jobs left %v, want b (nacked) and d (extended)", jobs)
	}
	if l := resp.Results[1].Rows; len(l) != 1 || l[0][0].AsString() != "c" || l[0][1].AsString() != delivery.ReasonNoRetry {
		t.Fatalf("dead letters %v", l)
	}
	// The settled ids are spent; the extended lease is still good.
	again, _, _ := svc.SettleMany(ctx, []delivery.Settle{
		{DeliveryID: id["a"], Action: delivery.ActAck},
		{DeliveryID: id["d"], Action: delivery.ActAck},
	})
	if herald.CodeOf(again[0].Err) != herald.CodeInvalidDeliveryID || again[1].Err != nil {
		t.Fatalf("second batch: %v, %v", again[0].Err, again[1].Err)
	}
}

// TestProjectionContext: a consume watch's projection that reads only the row takes a
// shared empty context, and one that reads parameters or the clock still gets them.
func TestProjectionContext(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.eng.Exec(ctx, "", `SPAWN m: Msg { n = 1 }`, nil); err != nil {
		t.Fatal(err)
	}
	st, err := h.svc.Consume(ctx, "", `WATCH m: Msg [mode: consume] RETURN m.n AS n, $tag AS tag, now() AS at`, map[string]herald.Value{"tag": herald.String("x")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h.svc.Flush()
	select {
	case ev := <-st.Events():
		m := ev.Match
		if m.MapGet("n").AsInt() != 1 || m.MapGet("tag").AsString() != "x" || !m.MapGet("at").AsTime().Equal(h.clk.Now()) {
			t.Errorf("match %v: want n 1, tag x, at %v", m, h.clk.Now())
		}
	default:
		t.Fatal("no delivery after Flush")
	}
}
