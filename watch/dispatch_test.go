package watch_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/watch"
)

// TestDispatchOffCommitPath holds the watch dispatcher (as thousands of streams on a
// pattern would keep it busy) and checks that commits still become durable and are
// answered meanwhile; the watch gets their events once the dispatcher goes on.
func TestDispatchOffCommitPath(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	st := openIdle(t, h, ctx)
	defer st.Close()

	release := h.svc.HoldDispatch()
	done := make(chan error, 1)
	go func() {
		for i := range 5 {
			if _, err := h.eng.Exec(ctx, "", "SPAWN t: Task { n = $n }", map[string]herald.Value{"n": herald.Int(int64(i))}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a bound on a hang, not a speed assertion
		release()
		t.Fatal("commits waited for the watch dispatcher")
	}
	release()
	for i := range 5 {
		select {
		case ev := <-st.Events():
			if ev.Type != herald.EventAdded || ev.Match.MapGet("t.n").AsInt() != int64(i) {
				t.Fatalf("event %d = %+v", i, ev)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("event %d never arrived", i)
		}
	}
}

// TestDropLargeBuffer overflows a buffer larger than the stream's channel: what was
// already handed to the channel arrives, then gaps counting exactly what was dropped
// and the newest events, in order, and nothing beyond the buffer waits.
func TestDropLargeBuffer(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const buffer, total = 50, 300
	st, err := h.svc.Open(ctx, "", `WATCH t: Task [initial: none, buffer: 50, on_full: drop] RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range total {
		spawnTask(t, h, i)
	}
	h.svc.Flush()
	var got []int64
	gaps, dropped := 0, 0
	for len(got)+dropped < total {
		select {
		case ev := <-st.Events():
			switch ev.Type {
			case herald.EventGap:
				gaps++
				dropped += ev.Count
			case herald.EventAdded:
				got = append(got, ev.Match.MapGet("t.n").AsInt())
			default:
				t.Fatalf("unexpected %+v", ev)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("stuck after %d events and %d dropped", len(got), dropped)
		}
	}
	// Where the gaps fall depends on how far the stream had got into its channel when
	// the buffer filled (a batch of commits applied at once drops before it flushes), so
	// there may be more than one; what is promised is that no more than the buffer
	// arrives, the newest events win, and the gaps count exactly what is missing.
	if gaps == 0 || len(got) > buffer || got[len(got)-1] != total-1 {
		t.Fatalf("%d gaps, %d events, last %d", gaps, len(got), got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("out of order: %v", got)
		}
	}
}

// TestWakeAfterStreamEnded wakes a stream whose goroutine has already ended, as the
// dispatcher does when a commit picked the stream just before it closed. The round must
// not wait for it: later commits still reach the other streams.
func TestWakeAfterStreamEnded(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	gone := openIdle(t, h, ctx)
	gone.Close()
	<-gone.Done()
	watch.WakeAsDispatcher(gone)
	if n := h.svc.InRound(); n != 0 {
		t.Fatalf("the round waits for %d streams after waking one that has ended", n)
	}

	st := openIdle(t, h, ctx)
	defer st.Close()
	for i := range 3 {
		spawnTask(t, h, i)
		select {
		case ev := <-st.Events():
			if ev.Match.MapGet("t.n").AsInt() != int64(i) {
				t.Fatalf("event %d = %+v", i, ev)
			}
		case <-time.After(30 * time.Second): // a bound on a hang, not a speed assertion
			t.Fatalf("event %d never arrived: the dispatcher waits for an ended stream", i)
		}
	}
}

// TestSharesReleased: identical watches hold one share key and one compiled statement,
// a different one others; each is forgotten once its last stream has ended.
func TestSharesReleased(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	open := func(q string) herald.Stream {
		st, err := h.svc.Open(ctx, "", q, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	const q1, q2 = `WATCH t: Task [initial: none] RETURN t.n`, `WATCH t: Task [initial: none] WHERE t.n > 1 RETURN t.n`
	a, b, c := open(q1), open(q1), open(q2)
	if n, m := h.svc.SharesHeld(), h.svc.CompiledHeld(); n != 2 || m != 2 {
		t.Fatalf("three streams on two statements hold %d share keys and %d compiled statements, want 2 and 2", n, m)
	}
	for i, st := range []herald.Stream{a, b, c} {
		st.Close()
		<-st.Done()
		want := []int{2, 1, 0}[i]
		if n, m := h.svc.SharesHeld(), h.svc.CompiledHeld(); n != want || m != want {
			t.Fatalf("after closing stream %d: %d share keys and %d compiled statements held, want %d", i, n, m, want)
		}
	}
}

// TestSnapshotLargerThanChannel: a snapshot many times larger than a stream's channel
// arrives whole, nothing lost and nothing twice, as the reader makes room.
func TestSnapshotLargerThanChannel(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const n = 200
	for i := range n {
		spawnTask(t, h, i)
	}
	for round := range 20 {
		st, err := h.svc.Open(ctx, "", `WATCH t: Task RETURN t.n`, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		h.svc.Flush()
		evs, _ := watch.Drain(st)
		seen := map[int64]bool{}
		for _, ev := range evs {
			seen[ev.Match.MapGet("t.n").AsInt()] = true
		}
		if len(evs) != n || len(seen) != n || !evs[n-1].Last {
			t.Fatalf("round %d: %d events, %d distinct, want %d with the last marked", round, len(evs), len(seen), n)
		}
		st.Close()
	}
}

// The dispatcher hands a backlog of commits to the streams a slice at a time, yielding
// the CPU between slices, and wakes each stream once however many commits of the
// backlog reached it.
func TestDispatcherHandsOverInSlices(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	mustExec(t, h, "", `SPAWN #p: Project {}`)
	// Streams with queues of their own: a join is indexed by each of its types, not
	// served by a feed.
	for range 2 {
		st, err := h.svc.Open(ctx, "", `WATCH t: Task, belongs_to(t, #p) [initial: none] RETURN t.n`, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
	}
	// Change sets at the position already dispatched: the streams have passed it, so
	// they would skip these if they applied them.
	seq, tick := h.eng.Durable()
	var sets []*herald.ChangeSet
	for i := range 3 {
		sets = append(sets, &herald.ChangeSet{Seq: seq, Tick: tick, Changes: []herald.Change{{
			Kind: herald.NodeChange, NodeAfter: &herald.Node{ID: herald.NodeID("n" + string(rune('0'+i))), Type: "Task"},
		}}})
	}
	if woken, rest := h.svc.HandOver(sets, 0); woken != 2 || rest != 2 {
		t.Fatalf("a hand-over with no time to spare: woke %d streams and left %d sets, want 2 and 2", woken, rest)
	}
	if woken, rest := h.svc.HandOver(sets, time.Hour); woken != 2 || rest != 0 {
		t.Fatalf("a hand-over with time: woke %d streams and left %d sets, want 2 (once each) and 0", woken, rest)
	}
}

// The latest commits are kept in memory for streams that fall behind, and only while a
// stream is open: a server without watch-mode streams (a queue's traffic) holds none.
func TestRecentCommitsHeldOnlyWhileStreamsAreOpen(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	spawn := func(n int) {
		t.Helper()
		for i := range n {
			spawnTask(t, h, i)
		}
		h.svc.Flush()
	}
	spawn(3)
	if n := h.svc.RecentHeld(); n != 0 {
		t.Fatalf("with no stream open, %d commits are held in memory; want none", n)
	}
	st := openIdle(t, h, ctx)
	spawn(3)
	if n := h.svc.RecentHeld(); n < 3 {
		t.Fatalf("with a stream open, %d commits are held; want the 3 since it opened", n)
	}
	st.Close()
	<-st.Done()
	spawn(1)
	if n := h.svc.RecentHeld(); n != 0 {
		t.Fatalf("once the last stream closed, %d commits are still held; want none", n)
	}
}

// TestDispatchGoesOnWhileARoundIsOut keeps a woken stream in the dispatcher's round (it
// waits for the fan-out budget, on the manual clock) and checks that later commits
// still reach the streams' queues meanwhile: a dispatcher that waited for the round
// before handing them over would hand a round's worth of commits to every stream at
// once afterwards, a burst of work that stole the CPUs from writers in the fan-out
// benchmark. Once the clock moves, the stream gets every event, in order.
func TestDispatchGoesOnWhileARoundIsOut(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	st := openIdle(t, h, ctx)
	defer st.Close()
	other := openIdle(t, h, ctx)
	defer other.Close()

	h.svc.Overspend(time.Second)
	spawnTask(t, h, 0)
	waitFor(t, "a woken stream to wait for the budget in the round", func() bool { return h.svc.InRound() > 0 })
	for i := 1; i < 4; i++ {
		spawnTask(t, h, i)
	}
	durable, _ := h.eng.Durable()
	waitFor(t, "the commits after the first to be dispatched", func() bool { return h.svc.Dispatched() >= durable })
	if n := h.svc.InRound(); n == 0 {
		t.Fatal("the round ended before the commits were dispatched: the test did not hold it")
	}

	h.clk.Advance(time.Minute)
	for _, s := range []herald.Stream{st, other} {
		for i := range 4 {
			expectAdded(t, s, i)
		}
	}
}

// expectAdded waits for st's next event and checks that it adds the Task with n = i.
func expectAdded(t *testing.T, st herald.Stream, i int) {
	t.Helper()
	select {
	case ev := <-st.Events():
		if ev.Type != herald.EventAdded || ev.Match.MapGet("t.n").AsInt() != int64(i) {
			t.Fatalf("event %d = %+v", i, ev)
		}
	case <-time.After(30 * time.Second): // a bound on a hang, not a speed assertion
		t.Fatalf("event %d never arrived", i)
	}
}

// spawnTask commits one Task with n = i.
func spawnTask(t *testing.T, h *harness, i int) {
	t.Helper()
	if _, err := h.eng.Exec(context.Background(), "", "SPAWN t: Task { n = $n }", map[string]herald.Value{"n": herald.Int(int64(i))}); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds, failing the test after a bound on a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
