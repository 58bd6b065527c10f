package watch_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/watch"
)

// behindInFeed opens a stream of query, holds it in its turn (waiting for the fan-out
// budget on the manual clock) while commits SPAWN a Task each (n = 0, 1, …), then
// lets it catch up and returns what it sent.
func behindInFeed(t *testing.T, query string, commits int) (herald.Stream, []herald.Event) {
	t.Helper()
	h := newHarness(t)
	ctx := context.Background()
	st, err := h.svc.Open(ctx, "", query, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if h.svc.FeedMembers("Task") != 1 {
		t.Fatalf("%s does not read the Task feed", query)
	}
	h.svc.Overspend(time.Second)
	mustExec(t, h, "", "SPAWN t: Task { n = 0 }")
	waitFor(t, "the stream to wait for the budget", func() bool { return h.svc.InRound() > 0 })
	return st, finishTurn(t, h, st, 1, commits)
}

// finishTurn SPAWNs Tasks n = from … to-1 while st waits in its turn, waits until the
// commits reach the feed, lets the stream catch up and returns what it sent.
func finishTurn(t *testing.T, h *harness, st herald.Stream, from, to int) []herald.Event {
	t.Helper()
	for i := from; i < to; i++ {
		spawnTask(t, h, i)
	}
	durable, _ := h.eng.Durable()
	waitFor(t, "the commits to reach the feed", func() bool { return h.svc.Dispatched() >= durable })
	h.clk.Advance(time.Minute)
	h.svc.Flush()
	evs, _ := watch.Drain(st)
	return evs
}

// A best-effort stream further behind in its feed than its buffer holds counts the
// oldest of the backlog into a gap instead of queueing every event to push the older
// ones out: it sends what dropping the oldest leaves (the newest events its buffer
// holds, after one gap with the exact count), having queued no more than that.
func TestABestEffortStreamFarBehindSkipsTheOldest(t *testing.T) {
	const commits, buffer = 20, 5
	st, evs := behindInFeed(t, `WATCH t: Task [initial: none, buffer: 5] RETURN t.n`, commits)
	expectSkipped(t, st, evs, commits, buffer, "the whole backlog")
}

// Skipping counts events, not commits: a backlog longer than the buffer whose commits
// give fewer events than it holds loses none of them.
func TestSkippingKeepsWhatTheBufferHolds(t *testing.T) {
	_, evs := behindInFeed(t, `WATCH t: Task WHERE t.n < 3 OR t.n = 17 [initial: none, buffer: 5] RETURN t.n`, 20)
	expectAddedNs(t, evs, []int64{0, 1, 2, 17}...)
}

// A best-effort stream further behind than its feed holds, whose feed still holds a
// buffer's worth of events, counts the commits it missed into the gap from the change
// log and goes back to the feed, instead of applying every one of them.
func TestABestEffortStreamPastItsFeedSkipsTheOldest(t *testing.T) {
	defer watch.SetFeedCap(8)()
	const commits, buffer = 30, 4
	st, evs := behindInFeed(t, `WATCH t: Task [initial: none, buffer: 4] RETURN t.n`, commits)
	expectSkipped(t, st, evs, commits, buffer, "the change log's commits")
}

// When what the feed still holds gives fewer events than the buffer, nothing before it
// may be dropped: the stream reads the change log and sends every event.
func TestAStreamPastItsFeedKeepsWhatTheBufferHolds(t *testing.T) {
	defer watch.SetFeedCap(8)()
	_, evs := behindInFeed(t, `WATCH t: Task WHERE t.n < 3 OR t.n = 27 [initial: none, buffer: 5] RETURN t.n`, 30)
	expectAddedNs(t, evs, []int64{0, 1, 2, 27}...)
}

// Identical streams share one tally of their feed's events: each still skips from its
// own position and reports its own exact count, and a commit with several events is
// counted as that many.
func TestIdenticalStreamsSkipFromTheirOwnPositions(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const query = `WATCH t: Task [initial: none, buffer: 5] RETURN t.n`
	open := func() herald.Stream {
		st, err := h.svc.Open(ctx, "", query, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	spawn := func(i int) { // two Tasks a commit: n = 2i and 2i+1
		t.Helper()
		if _, err := h.eng.Exec(ctx, "", "SPAWN a: Task { n = $a } SPAWN b: Task { n = $b }",
			map[string]herald.Value{"a": herald.Int(int64(2 * i)), "b": herald.Int(int64(2*i + 1))}); err != nil {
			t.Fatal(err)
		}
	}
	a := open()
	h.svc.Overspend(time.Second)
	spawn(0)
	waitFor(t, "the stream to wait for the budget", func() bool { return h.svc.InRound() > 0 })
	for i := 1; i < 4; i++ {
		spawn(i)
	}
	durable, _ := h.eng.Durable()
	waitFor(t, "the commits to reach the feed", func() bool { return h.svc.Dispatched() >= durable })
	b := open() // reads the feed from commit 4 on
	for i := 4; i < 12; i++ {
		spawn(i)
	}
	durable, _ = h.eng.Durable()
	waitFor(t, "the commits to reach the feed", func() bool { return h.svc.Dispatched() >= durable })
	h.clk.Advance(time.Minute)
	h.svc.Flush()
	for _, c := range []struct {
		st  herald.Stream
		gap int // of the events it could have had: 24 for a, 16 for b
	}{{a, 24 - 5}, {b, 16 - 5}} {
		evs, _ := watch.Drain(c.st)
		if len(evs) != 6 || evs[0].Type != herald.EventGap || evs[0].Count != c.gap {
			t.Fatalf("got %+v; want a gap of %d, then the newest 5 events", evs, c.gap)
		}
		for i, ev := range evs[1:] {
			if ev.Match.MapGet("t.n").AsInt() != int64(19+i) {
				t.Fatalf("event %d after the gap = %+v, want n = %d", i, ev, 19+i)
			}
		}
	}
}

// A stream whose turn began before its feed moved past it skips from what the feed holds
// when the turn goes on, not from where the turn began: the set the turn was to end at
// is no longer held, and reading the change log for all of it applied every commit.
func TestATurnThatBeganBeforeTheFeedMovedOnSkips(t *testing.T) {
	defer watch.SetFeedCap(8)()
	h := newHarness(t)
	ctx := context.Background()
	st, err := h.svc.Open(ctx, "", `WATCH t: Task [initial: none, buffer: 4] RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	timers := h.clk.Pending()
	h.svc.Overspend(time.Second)
	release := h.svc.HoldDispatch()
	for i := range 6 { // more than the buffer holds, in the stream's first turn
		spawnTask(t, h, i)
	}
	release()
	waitFor(t, "the stream to wait for the budget in its turn", func() bool { return h.clk.Pending() > timers })
	const commits = 30
	evs := finishTurn(t, h, st, 6, commits)
	expectGapThenNewest(t, evs, commits, 4)
	if n := watch.Queued(st); n > 4 {
		t.Fatalf("the stream queued %d events to send 4: it applied the change log's commits", n)
	}
}

// expectGapThenNewest checks that a stream sent what dropping the oldest of commits
// one-event commits leaves in a buffer of buffer: a gap with the count of the others,
// then the newest buffer events in order.
func expectGapThenNewest(t *testing.T, evs []herald.Event, commits, buffer int) {
	t.Helper()
	if len(evs) != buffer+1 || evs[0].Type != herald.EventGap || evs[0].Count != commits-buffer {
		t.Fatalf("got %+v; want a gap of %d, then the newest %d events", evs, commits-buffer, buffer)
	}
	for i, ev := range evs[1:] {
		if ev.Type != herald.EventAdded || ev.Match.MapGet("t.n").AsInt() != int64(commits-buffer+i) {
			t.Fatalf("event %d after the gap = %+v", i, ev)
		}
	}
}

// expectSkipped checks that a stream that fell commits behind sent a gap and the newest
// buffer events (expectGapThenNewest) and queued no more than those: the first commit
// was applied before the rest arrived, and the skipped ones never reach the queue.
// applied names what it would have applied had it not skipped.
func expectSkipped(t *testing.T, st herald.Stream, evs []herald.Event, commits, buffer int, applied string) {
	t.Helper()
	expectGapThenNewest(t, evs, commits, buffer)
	if n := watch.Queued(st); n > buffer+1 {
		t.Fatalf("the stream queued %d events to send %d: it applied %s", n, buffer, applied)
	}
}

// expectAddedNs checks that a stream sent exactly the added events of t.n = want, in
// order, and no gap.
func expectAddedNs(t *testing.T, evs []herald.Event, want ...int64) {
	t.Helper()
	if len(evs) != len(want) {
		t.Fatalf("got %+v; want the events of n = %v and no gap", evs, want)
	}
	for i, ev := range evs {
		if ev.Type != herald.EventAdded || ev.Match.MapGet("t.n").AsInt() != want[i] {
			t.Fatalf("event %d = %+v, want n = %d", i, ev, want[i])
		}
	}
}
