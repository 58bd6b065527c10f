package broker

import (
	"testing"
	"time"

	"github.com/herald-mq/herald"
)

func TestChecks(t *testing.T) {
	if CheckBatch(0) == nil || CheckBatch(MaxSettlements+1) == nil || CheckBatch(1) != nil {
		t.Fatal("CheckBatch bounds")
	}
	bad := []struct {
		it           Settle
		delay, given bool
	}{
		{Settle{Action: ActAck}, false, false},
		{Settle{DeliveryID: "d", Action: ActAck}, true, false},
		{Settle{DeliveryID: "d", Action: ActNack}, false, true},
		{Settle{DeliveryID: "d", Action: ActNack, Delay: -time.Second}, true, false},
	}
	for _, c := range bad {
		if err := CheckSettle(0, c.it, c.delay, c.given); herald.CodeOf(err) != herald.CodeMalformedRequest {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := CheckSettle(0, Settle{DeliveryID: "d", Action: ActExtend, By: time.Second}, false, true); err != nil {
		t.Fatal(err)
	}
}

func TestQueueLimits(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{0: DefaultLockTTL, time.Millisecond: MinLockTTL, 1500 * time.Millisecond: time.Second, time.Hour: MaxLockTTL} {
		if got := ClampTTL(in); got != want {
			t.Errorf("ClampTTL(%v) = %v, want %v", in, got, want)
		}
	}
	for in, want := range map[int]int{0: 1, -3: 1, 7: 7, 1000: MaxPopCount} {
		if got := ClampCount(in); got != want {
			t.Errorf("ClampCount(%d) = %d, want %d", in, got, want)
		}
	}
	for name, ok := range map[string]bool{"a": true, "A.b_c~d:e-f": true, "": false, "a b": false, "é": false, string(make([]byte, MaxQueueName+1)): false} {
		if ValidQueueName(name) != ok {
			t.Errorf("ValidQueueName(%q) = %v", name, !ok)
		}
	}
}

func TestTakeReady(t *testing.T) {
	ch := make(chan herald.Event, 3)
	ch <- herald.Event{Seq: 1}
	ch <- herald.Event{Seq: 2}
	got, closed := TakeReady(ch, nil, 1)
	if len(got) != 1 || closed {
		t.Fatalf("bounded take: %v %v", got, closed)
	}
	close(ch)
	got, closed = TakeReady(ch, got, 5)
	if len(got) != 2 || !closed {
		t.Fatalf("take to the end: %v %v", got, closed)
	}
}
