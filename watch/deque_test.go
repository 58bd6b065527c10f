package watch

import (
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/race"
)

// A queue that fills and empties again and again (a busy stream between frames) reuses
// its rings instead of allocating new ones each time it refills.
func TestDequeRecyclesItsRings(t *testing.T) {
	var d deque
	evs := make([]herald.Event, 40)
	for i := range evs {
		evs[i] = herald.Event{Type: herald.EventAdded, Seq: uint64(i)}
	}
	cycle := func() {
		for i := range 40 {
			d.pushBack(&evs[i])
		}
		for i := range 40 {
			if got := d.front().Seq; got != uint64(i) {
				t.Fatalf("event %d: seq %d", i, got)
			}
			d.popFront()
		}
	}
	cycle()
	if d.ring != nil {
		t.Fatal("an emptied queue still holds its ring")
	}
	// Each cycle needs a ring of 64 events (the first needed four, from 8 up), an
	// allocation or two when nothing is recycled. Recycled, it costs none; under the race
	// detector sync.Pool drops a quarter of what it is given on purpose, and each ring
	// allocated again costs two allocations (the ring and its pointer).
	limit := 0.0
	if race.Enabled {
		limit = 2.8
	}
	if n := testing.AllocsPerRun(100, cycle); n > limit {
		t.Fatalf("filling and emptying a queue allocates %.2f times; want its rings recycled", n)
	}
}

// A queue that refills starts at the ring it last needed, not at the smallest one it
// would double up from again, and a queue that once grew very deep does not start deep.
func TestDequeStartsAtItsLastDepth(t *testing.T) {
	var d deque
	ev := &herald.Event{Type: herald.EventAdded}
	fill := func(n int) {
		for range n {
			d.pushBack(ev)
		}
		for d.len() > 0 {
			d.popFront()
		}
	}
	fill(40) // a ring of 64
	d.pushBack(ev)
	if n := len(d.buf()); n != 64 {
		t.Fatalf("after a depth of 40 the queue starts at %d slots, want 64", n)
	}
	d.popFront()
	fill(5000)
	d.pushBack(ev)
	if n := len(d.buf()); n != maxStartRing {
		t.Fatalf("after a depth of 5,000 the queue starts at %d slots, want %d", n, maxStartRing)
	}
}

// Rings come back zeroed: an event left in a recycled ring would keep its values alive.
func TestDequeRingsComeBackEmpty(t *testing.T) {
	var d deque
	for range 20 {
		d.pushFront(&herald.Event{Type: herald.EventAdded, Message: "x"})
	}
	for d.len() > 0 {
		d.popFront()
	}
	for n := minRing; n <= minRing<<(len(rings)-1); n *= 2 {
		r := newRing(n)
		for i, ev := range *r {
			if ev != nil {
				t.Fatalf("ring of %d: slot %d holds %+v", n, i, *ev)
			}
		}
		freeRing(r)
	}
}

// TestValueSizeCountsBytes: a Bytes value weighs its bytes against a stream's byte
// bound, as a String does.
func TestValueSizeCountsBytes(t *testing.T) {
	big := make([]byte, 1<<20)
	if n := valueSize(herald.Bytes(big)); n < 1<<20 {
		t.Fatalf("a 1 MiB Bytes value counts %d bytes", n)
	}
}
