package watch_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
)

// parkAll runs the idle check until n streams have parked. Two checks are the least:
// the first finds each stream active since it opened.
func parkAll(t *testing.T, h *harness, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.svc.Stats().Parked != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams parked, want %d", h.svc.Stats().Parked, n)
		}
		h.svc.HintIdle()
		time.Sleep(time.Millisecond)
	}
}

// servingStreams counts the goroutines running a stream's loop.
func servingStreams() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "watch.(*watcher).serve(")
}

// TestIdleStreamParks: an idle stream gives its goroutine up, and everything that
// concerns it still works: a commit that touches it, Flush, PAUSE and RESUME, ALTER,
// and its close.
func TestIdleStreamParks(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	st, err := h.svc.Open(ctx, "", `w = WATCH t: Task RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ready(h, st)
	parkAll(t, h, 1)
	if n := servingStreams(); n != 0 {
		t.Fatalf("%d goroutines serve a stream after it parked", n)
	}

	mustExec(t, h, "", `SPAWN t: Task { n = 1 }`)
	if got := ready(h, st); len(got) != 1 || !strings.HasPrefix(got[0], "added") {
		t.Fatalf("events after a commit reached a parked stream: %v, want one added", got)
	}

	parkAll(t, h, 1)
	mustExec(t, h, "", `PAUSE WATCH #w`)
	parkAll(t, h, 1)
	mustExec(t, h, "", `SPAWN t: Task { n = 2 }`)
	if got := ready(h, st); len(got) != 0 {
		t.Fatalf("a paused stream sent %v", got)
	}
	parkAll(t, h, 1)
	mustExec(t, h, "", `RESUME WATCH #w`)
	if got := ready(h, st); len(got) != 1 || !strings.HasPrefix(got[0], "added") {
		t.Fatalf("events after RESUME of a parked stream: %v, want one added", got)
	}

	parkAll(t, h, 1)
	mustExec(t, h, "", `ALTER WATCH #w SET [filter: t.n > 5]`)
	parkAll(t, h, 1)
	mustExec(t, h, "", `SPAWN t: Task { n = 3 } SPAWN u: Task { n = 10 }`)
	// The filter takes the two earlier matches away, and lets only n = 10 in.
	want := "removed {t.n: 1},removed {t.n: 2},added {t.n: 10}"
	if got := strings.Join(ready(h, st), ","); got != want {
		t.Fatalf("events after ALTER of a parked stream: %s, want %s", got, want)
	}

	parkAll(t, h, 1)
	st.Close()
	select {
	case <-st.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a parked stream did not end when closed")
	}
	if _, ok := <-drainToEnd(st); ok {
		t.Fatal("the channel of a closed parked stream is still open")
	}
	if got := h.svc.Stats().Parked; got != 0 {
		t.Fatalf("%d streams counted parked after the only one closed", got)
	}
}

// drainToEnd reads what is left in a stream's channel and returns it, closed.
func drainToEnd(st herald.Stream) <-chan herald.Event {
	for range st.Events() {
	}
	return st.Events()
}

// TestBusyStreamDoesNotPark: a stream that worked since the last idle check is not
// hinted, so streams that keep receiving events keep their goroutine.
func TestBusyStreamDoesNotPark(t *testing.T) {
	h := newHarness(t)
	st, err := h.svc.Open(context.Background(), "", `WATCH t: Task RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 5 {
		mustExec(t, h, "", `SPAWN t: Task { n = 1 }`)
		ready(h, st)
		h.svc.HintIdle()
		h.svc.Flush()
		if got := h.svc.Stats().Parked; got != 0 {
			t.Fatalf("round %d: a stream that had work since the last check parked", i)
		}
	}
}

// TestTakeDoesNotWakeAnIdleStream: a transport that takes events in batches calls Take
// after each of them. That wakes the stream only when it waits for room: a parked
// stream stays parked, and its events still arrive.
func TestTakeDoesNotWakeAnIdleStream(t *testing.T) {
	h := newHarness(t)
	st, err := h.svc.Open(context.Background(), "", `WATCH t: Task RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tk := st.(interface {
		Take([]herald.Event, int) ([]herald.Event, bool)
	})
	tk.Take(nil, 10) // the stream switches to batches
	ready(h, st)
	parkAll(t, h, 1)
	for range 3 {
		tk.Take(nil, 10)
	}
	h.svc.Flush() // a parked stream answers Flush, and parks again only when hinted
	parkAll(t, h, 1)
	tk.Take(nil, 10)
	if got := h.svc.Stats().Parked; got != 1 {
		t.Fatalf("Take woke a parked stream that waited for nothing (%d parked)", got)
	}
	mustExec(t, h, "", `SPAWN t: Task { n = 1 }`)
	if got := ready(h, st); len(got) != 1 || !strings.HasPrefix(got[0], "added") {
		t.Fatalf("events after Take of a parked stream: %v, want one added", got)
	}
}

// TestNewStreamStartsParked: a stream with nothing to send when it opens (no snapshot,
// no timer, no resume) starts without a goroutine, and its first commit still reaches
// it; one with a snapshot to send starts its goroutine at once.
func TestNewStreamStartsParked(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	st := openIdle(t, h, ctx)
	defer st.Close()
	if got := h.svc.Stats().Parked; got != 1 {
		t.Fatalf("%d streams parked right after an idle open, want 1", got)
	}
	if n := servingStreams(); n != 0 {
		t.Fatalf("%d goroutines serve a stream that had nothing to do", n)
	}
	mustExec(t, h, "", `SPAWN t: Task { n = 1 }`)
	if got := ready(h, st); len(got) != 1 || !strings.HasPrefix(got[0], "added") {
		t.Fatalf("events after a commit reached a stream opened parked: %v, want one added", got)
	}

	full, err := h.svc.Open(ctx, "", `WATCH t: Task RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	select {
	case ev := <-full.Events():
		if ev.Type != herald.EventInitial {
			t.Fatalf("first event of a watch with a snapshot: %s, want initial", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stream with a snapshot to send sent nothing")
	}
}
