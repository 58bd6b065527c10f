package delivery_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
)

// TestLeaseLeavesNothingBehind: pull consumers (Lease, as the queue APIs use it) racing
// producers. A dispatcher round may lease more to a pull consumer after its Flush; those
// leases must go back, or the messages would stay hidden, held by nobody, until their
// ack timeout. Every message is returned by some Lease.
func TestLeaseLeavesNothingBehind(t *testing.T) {
	eng, svc := openService(t, delivery.Config{})
	ctx := context.Background()
	const w = `WATCH m: PM [mode: consume, group: "pull", ack_timeout: 1h] RETURN m.k`
	const n = 2000
	var prod sync.WaitGroup
	for p := 0; p < 4; p++ {
		prod.Add(1)
		go func() {
			defer prod.Done()
			for i := range n / 4 {
				if _, err := eng.Exec(ctx, "", `SPAWN m: PM { k = $k }`, map[string]herald.Value{"k": herald.Int(int64(p*n/4 + i))}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { prod.Wait(); close(done) }()
	var mu sync.Mutex
	seen := map[int64]bool{}
	take := func(max int) int {
		evs, err := svc.Lease(ctx, "", w, nil, max)
		if err != nil {
			t.Error(err)
			return 0
		}
		for _, ev := range evs {
			mu.Lock()
			seen[ev.Match.MapGet("m.k").AsInt()] = true
			mu.Unlock()
			if ev.Attempt != 1 {
				t.Errorf("message %d delivered at attempt %d: a lease that never reached anyone counted", ev.Match.MapGet("m.k").AsInt(), ev.Attempt)
			}
			if err := svc.Ack(ctx, ev.DeliveryID); err != nil {
				t.Error(err)
			}
		}
		return len(evs)
	}
	var cons sync.WaitGroup
	for c := 0; c < 3; c++ {
		cons.Add(1)
		go func() {
			defer cons.Done()
			for {
				select {
				case <-done:
					return
				default:
					take(20)
				}
			}
		}()
	}
	cons.Wait()
	for take(n) > 0 {
	}
	if len(seen) != n {
		t.Fatalf("%d of %d messages returned: the others are leased to nobody", len(seen), n)
	}
}

// TestBadNodeDoesNotHoldUpOthers: a message whose WHERE cannot be evaluated (a division
// by zero) is not delivered, and every other message of the same commit is — for a
// single-node pattern and for a join, when the group starts and afterwards.
func TestBadNodeDoesNotHoldUpOthers(t *testing.T) {
	for _, pattern := range []string{
		`WATCH j: PJ WHERE 10 / j.x > 1 [mode: consume] RETURN j.k`,
		`WATCH j: PJ, tag(j, #t) WHERE 10 / j.x > 1 [mode: consume] RETURN j.k`,
	} {
		t.Run(pattern, func(t *testing.T) {
			eng, svc := openService(t, delivery.Config{})
			ctx := context.Background()
			spawn := func(from int) {
				q := "BEGIN SPAWN #t" + fmt.Sprint(from) + ": T {} "
				if from == 0 {
					q = "BEGIN SPAWN #t: T {} "
				}
				for i := from; i < from+8; i++ {
					x := 1
					if i == from {
						x = 0 // 10 / 0
					}
					q += fmt.Sprintf("SPAWN #m%d: PJ { k = %d, x = %d } LINK tag(#m%d, #t) ", i, i, x, i)
				}
				if _, err := eng.Exec(ctx, "", q+"COMMIT", nil); err != nil {
					t.Fatal(err)
				}
			}
			spawn(0) // before the group starts: the backlog
			st, err := svc.Consume(ctx, "", pattern, nil)
			if err != nil {
				t.Fatal(err)
			}
			spawn(100) // afterwards
			svc.Flush()
			got := 0
			for more := true; more; {
				select {
				case <-st.Events():
					got++
				default:
					more = false
				}
			}
			if got != 14 {
				t.Fatalf("%d of the 14 good messages delivered", got)
			}
		})
	}
}

// TestReleaseSurvivesStop: a consumer that leaves gives its leases back at once; when the
// server stops right after, before a round has written that, the stop writes it, so the
// message is ready again after the restart instead of waiting for its old deadline.
func TestReleaseSurvivesStop(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.eng.Exec(ctx, "", `SPAWN #m: RS {}`, nil); err != nil {
		t.Fatal(err)
	}
	const w = `WATCH m: RS [mode: consume, group: "g", ack_timeout: 1h] RETURN m.id`
	st, err := h.svc.Consume(ctx, "", w, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.svc.Flush()
	if ev := <-st.Events(); ev.Type != delivery.EventConsumed || ev.Attempt != 1 {
		t.Fatalf("first delivery %+v", ev)
	}
	st.Close()
	h.close()
	h.open()
	evs, err := h.svc.Lease(ctx, "", w, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Match.MapGet("m.id").AsString() != "m" || evs[0].Attempt != 1 || evs[0].Releases != 1 {
		t.Fatalf("after the restart: %+v, want m at once, attempt 1 after 1 release", evs)
	}
}

// TestLeavingConsumersDoNotSpendRedeliveries: with max_redeliveries: 0, a message whose
// holder leaves goes to the group's other member, however many members leave in turn;
// only a NACK (or a timeout) spends the budget.
func TestLeavingConsumersDoNotSpendRedeliveries(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.eng.Exec(ctx, "", `SPAWN #j: LJ {}`, nil); err != nil {
		t.Fatal(err)
	}
	const w = `WATCH j: LJ [mode: consume, group: "g", max_redeliveries: 0] RETURN j.id`
	for i := range 5 {
		st, err := h.svc.Consume(ctx, "", w, nil)
		if err != nil {
			t.Fatal(err)
		}
		h.svc.Flush()
		ev := <-st.Events()
		if ev.Type != delivery.EventConsumed || ev.Attempt != 1 || ev.Releases != i {
			t.Fatalf("consumer %d got %+v, want the job at attempt 1 after %d releases", i, ev, i)
		}
		st.Close()
	}
	st, err := h.svc.Consume(ctx, "", w, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h.svc.Flush()
	ev := <-st.Events()
	if err := h.svc.Nack(ctx, ev.DeliveryID, delivery.NackOptions{}); err != nil {
		t.Fatal(err)
	}
	h.svc.Flush()
	res, err := h.eng.Exec(ctx, "", `MATCH d: _DeadLetter RETURN d.delivery_attempts`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rows := res.Results[0].Rows; len(rows) != 1 || rows[0][0].AsInt() != 1 {
		t.Fatalf("dead letters after one NACK: %v, want one after 1 attempt", res.Results[0].Rows)
	}
}
