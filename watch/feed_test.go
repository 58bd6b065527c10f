package watch_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/watch"
)

// Streams indexed by one type alone share that type's feed: the dispatcher hands a
// commit to the feed once, not to each stream, and every stream still gets every event
// in order. A selective stream on the type keeps a queue of its own.
func TestFeedServesEveryStreamOfItsType(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var streams []herald.Stream
	for range 3 {
		st := openIdle(t, h, ctx)
		defer st.Close()
		streams = append(streams, st)
	}
	sel, err := h.svc.Open(ctx, "", `WATCH t: Task WHERE t.n = 3 [initial: none] RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close()
	if n := h.svc.FeedMembers("Task"); n != 3 {
		t.Fatalf("the Task feed has %d streams, want the 3 unselective ones", n)
	}
	// A commit touching Task wakes no stream directly: the feed's streams are woken
	// from the feed.
	seq, tick := h.eng.Durable()
	set := &herald.ChangeSet{Seq: seq, Tick: tick, Changes: []herald.Change{{Kind: herald.NodeChange, NodeAfter: &herald.Node{ID: "x", Type: "Task"}}}}
	if woken, _ := h.svc.HandOver([]*herald.ChangeSet{set}, time.Hour); woken != 0 {
		t.Fatalf("a Task commit reached %d streams directly, want none", woken)
	}
	h.svc.Flush()
	for _, st := range streams { // the set handed over above, if after their positions
		watch.Drain(st)
	}

	const commits = 10
	for i := range commits {
		mustExec(t, h, "", "SPAWN t: Task { n = "+string(rune('0'+i))+" }")
	}
	h.svc.Flush()
	for k, st := range streams {
		evs, _ := watch.Drain(st)
		if len(evs) != commits {
			t.Fatalf("stream %d got %d events, want %d", k, len(evs), commits)
		}
		for i, ev := range evs {
			if ev.Type != herald.EventAdded || ev.Match.MapGet("t.n").AsInt() != int64(i) {
				t.Fatalf("stream %d event %d = %+v", k, i, ev)
			}
		}
	}
	if evs, _ := watch.Drain(sel); len(evs) != 1 || evs[0].Match.MapGet("t.n").AsInt() != 3 {
		t.Fatalf("the selective stream got %+v, want the one event of n = 3", evs)
	}
	for _, st := range streams {
		st.Close()
	}
	if n := h.svc.FeedMembers("Task"); n != 0 {
		t.Fatalf("the Task feed has %d streams after they closed", n)
	}
}

// A stream that falls further behind than its feed holds reads the rest from the
// change log, then goes back to the feed: nothing is lost or repeated.
func TestFeedLaggardReadsTheLog(t *testing.T) {
	defer watch.SetFeedCap(4)()
	h := newHarness(t)
	ctx := context.Background()
	st := openIdle(t, h, ctx)
	defer st.Close()

	// Hold the stream in its round (it waits for the fan-out budget on the manual clock)
	// while more commits than the feed holds are made.
	h.svc.Overspend(time.Second)
	mustExec(t, h, "", "SPAWN t: Task { n = 0 }")
	waitFor(t, "the stream to wait for the budget", func() bool { return h.svc.InRound() > 0 })
	const commits = 20
	for i := 1; i < commits; i++ {
		spawnTask(t, h, i)
	}
	h.clk.Advance(time.Minute)
	for i := range commits + 5 {
		if i == commits {
			// Back on the feed: later commits arrive too.
			for j := commits; j < commits+5; j++ {
				spawnTask(t, h, j)
			}
		}
		expectAdded(t, st, i)
	}
}

// A woken stream applies what was dispatched before its turn began and then makes way:
// the commits that came during its turn wait for its next one, after the other
// streams of the pass. Held in its turn (waiting for the budget, at the budget's gate,
// with the only apply slot next), the first stream must hand the slot on after one
// event, not four.
func TestATurnCoversWhatCameBeforeIt(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // one stream woken, and one slot, at a time
	h := newHarness(t)
	ctx := context.Background()
	a, b := openIdle(t, h, ctx), openIdle(t, h, ctx)
	defer a.Close()
	defer b.Close()

	timers := h.clk.Pending()
	h.svc.Overspend(time.Second)
	spawnTask(t, h, 0)
	waitFor(t, "the first stream to wait for the budget in its turn", func() bool { return h.clk.Pending() > timers })
	for i := 1; i < 4; i++ {
		spawnTask(t, h, i)
	}
	durable, _ := h.eng.Durable()
	waitFor(t, "the later commits to be dispatched", func() bool { return h.svc.Dispatched() >= durable })

	held := make(chan struct{})
	go func() { h.svc.TakeApplySlot(); close(held) }() // next in line for the slot
	h.clk.Advance(time.Minute)
	select {
	case <-held:
	case <-time.After(30 * time.Second): // a bound on a hang, not a speed assertion
		t.Fatal("the first stream never gave its apply slot back")
	}
	seen := map[herald.Stream][]herald.Event{}
	got := 0
	for _, st := range []herald.Stream{a, b} {
		seen[st], _ = watch.Drain(st)
		got += len(seen[st])
	}
	if got != 1 {
		t.Fatalf("the first turn delivered %d events; want 1, the commit dispatched before it began", got)
	}
	h.svc.GiveApplySlot()
	h.svc.Flush()
	for _, st := range []herald.Stream{a, b} {
		evs, _ := watch.Drain(st)
		evs = append(seen[st], evs...)
		if len(evs) != 4 {
			t.Fatalf("a stream got %d events in all; want 4", len(evs))
		}
		for i, ev := range evs {
			if ev.Match.MapGet("t.n").AsInt() != int64(i) {
				t.Fatalf("event %d = %+v", i, ev)
			}
		}
	}
}

// The fan-out budget counts the time streams work, not the time a stream waits to run
// again after yielding the CPU between change sets: counted, on a busy machine those
// waits took most of the budget, and the watchers got half the events for nothing.
func TestYieldingIsNotCountedAgainstTheBudget(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	st := openIdle(t, h, ctx)
	defer st.Close()
	// Each yield takes a minute of the clock, as a wait for a busy CPU would.
	h.svc.SetYield(func() { h.clk.Advance(time.Minute) })
	before := h.svc.BudgetSpent()
	for i := range 3 {
		spawnTask(t, h, i)
	}
	for i := range 3 {
		expectAdded(t, st, i)
	}
	if spent := h.svc.BudgetSpent() - before; spent >= time.Minute {
		t.Fatalf("the budget counted %v for three change sets: the yields' waits were counted", spent)
	}
}
