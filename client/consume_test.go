package client

import (
	"errors"
	"reflect"
	"testing"
	"time"

	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/internal/race"
)

// waiterFunc is a settleWaiter made of a function.
type waiterFunc func(settleOutcome)

func (f waiterFunc) settled(out settleOutcome) { f(out) }

// TestSettlementOutcomesInOrder: a delivery's settlements waiting at once (an EXTEND,
// then the ACK) take the server's answers in the order they were sent, other deliveries'
// answers go to theirs, and an answer nobody waits for is dropped; when the stream
// ends, every settlement still waiting hears of it.
func TestSettlementOutcomesInOrder(t *testing.T) {
	c := &consumeConn{waiting: map[string]waiters{}}
	var got []string
	record := func(name string) settleWaiter {
		return waiterFunc(func(out settleOutcome) {
			if out.err != nil {
				name += " failed"
			}
			got = append(got, name)
		})
	}
	c.waitLocked("d1", record("extend d1"))
	c.waitLocked("d1", record("ack d1"))
	c.waitLocked("d2", record("ack d2"))
	c.waitLocked("d1", record("nack d1"))
	c.settled([]*heraldv1.SettleResult{{DeliveryId: "d1", Ok: true}, {DeliveryId: "d2", Ok: true},
		{DeliveryId: "d3", Ok: true}, {DeliveryId: "d1", Ok: true}})
	if want := []string{"extend d1", "ack d2", "ack d1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("answered %q, want %q", got, want)
	}
	got = nil
	c.waitLocked("d4", record("ack d4"))
	c.end(errors.New("connection reset"))
	if len(got) != 2 || got[0] == got[1] || len(c.waiting) != 0 {
		t.Fatalf("at the end %q answered (waiting %d); want nack d1 and ack d4 failed", got, len(c.waiting))
	}
	for _, g := range got {
		if g != "nack d1 failed" && g != "ack d4 failed" {
			t.Errorf("at the end: %q", g)
		}
	}
}

// A settlement's wire form is recycled once its frame is written: settling a message
// costs no new one, and a recycled one carries nothing of its last use.
func TestSettlementsAreRecycled(t *testing.T) {
	batch := []*heraldv1.Settlement{settlement("d1", "extend", time.Second)}
	recycleSettlements(batch)
	s := settlement("d2", "ack", 0)
	if s.GetDeliveryId() != "d2" || s.GetAction() != heraldv1.Settlement_ACTION_ACK || s.GetBy() != nil || s.GetDelay() != nil {
		t.Fatalf("a settlement after a recycled EXTEND: %v", s)
	}
	recycleSettlements([]*heraldv1.Settlement{s})
	// Under the race detector sync.Pool drops a quarter of what it is given on purpose.
	limit := 0.0
	if race.Enabled {
		limit = 0.5
	}
	n := testing.AllocsPerRun(100, func() {
		batch[0] = settlement("d3", "ack", 0)
		recycleSettlements(batch)
	})
	if n > limit {
		t.Fatalf("settling allocates %.2f wire settlements; want them recycled", n)
	}
}
