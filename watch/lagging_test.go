package watch_test

import (
	"context"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/watch"
)

// Identical watches whose clients do not read queue the events of a commit once: each
// queue points to the one event, so a thousand lagging streams do not each hold a copy
// of every event they wait to send.
func TestLaggingIdenticalWatchesShareTheirQueuedEvents(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const watchers, commits = 3, 20
	var sts []herald.Stream
	for range watchers {
		st := openIdle(t, h, ctx)
		defer st.Close()
		sts = append(sts, st)
	}
	for i := range commits {
		spawnTask(t, h, i)
	}
	h.svc.Flush()
	first := watch.QueuedEvents(sts[0])
	if len(first) < commits/2 {
		t.Fatalf("%d events queued behind the channel; want most of the %d", len(first), commits)
	}
	for k, st := range sts[1:] {
		q := watch.QueuedEvents(st)
		if len(q) != len(first) {
			t.Fatalf("watch %d queues %d events, watch 0 %d", k+1, len(q), len(first))
		}
		for i := range q {
			if q[i] != first[i] {
				t.Fatalf("event %d (seq %d) is queued as a copy of its own by watch %d", i, q[i].Seq, k+1)
			}
		}
	}
	// What the queue points to is what the client reads, and in commit order.
	for i, ev := range first {
		if ev.Type != herald.EventAdded || !ev.Last {
			t.Fatalf("queued event %d = %+v; want an added event ending its commit", i, *ev)
		}
		if i > 0 && ev.Seq <= first[i-1].Seq {
			t.Fatalf("queued events out of order: seq %d after %d", ev.Seq, first[i-1].Seq)
		}
	}
}
