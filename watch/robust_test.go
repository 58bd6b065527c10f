package watch_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/watch"
)

// ready returns the events st has once the service has caught up, without waiting.
func ready(h *harness, st herald.Stream) []string {
	h.svc.Flush()
	// Drain, not a read of the channel until it is empty: the channel holds one event,
	// and the stream's goroutine may not yet have moved the next one over.
	evs, closed := watch.Drain(st)
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s", ev.Type, ev.Match))
	}
	if closed {
		out = append(out, "closed")
	}
	return out
}

func mustExec(t *testing.T, h *harness, sid, q string) {
	t.Helper()
	if _, err := h.eng.Exec(context.Background(), sid, q, nil); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestSelfAttrWakesTheWatch: a condition on `#self.attr` reads the session's actor, so a
// change to the actor re-decides the watch — for a join and for a single-node pattern.
func TestSelfAttrWakesTheWatch(t *testing.T) {
	h := newHarness(t)
	sid, _ := h.eng.OpenSession(context.Background())
	mustExec(t, h, "", `SPAWN #bob: User { level = 1 } SPAWN #p: Project {} SPAWN #t: Task { level = 3 } LINK belongs_to(#t, #p)`)
	mustExec(t, h, sid, `BEGIN SESSION AS #bob`)
	for _, q := range []string{
		`WATCH t: Task, belongs_to(t, #p) WHERE t.level <= #self.level RETURN t.id`,
		`WATCH t: Task WHERE t.level <= #self.level RETURN t.id`,
	} {
		mustExec(t, h, "", `MATCH u: User SET u.level = 1`)
		st, err := h.svc.Open(context.Background(), sid, q, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := ready(h, st); len(got) != 0 {
			t.Fatalf("%s: snapshot %v", q, got)
		}
		mustExec(t, h, "", `MATCH u: User WHERE u.id = "bob" SET u.level = u.level + 5`)
		if got := ready(h, st); len(got) != 1 || !strings.HasPrefix(got[0], "added") {
			t.Errorf("%s: events %v, want one added", q, got)
		}
		st.Close()
	}
}

// TestAlterReindexes: ALTER WATCH … SET [filter: …] with a condition on another node
// makes that node wake the watch.
func TestAlterReindexes(t *testing.T) {
	h := newHarness(t)
	mustExec(t, h, "", `SPAWN #cfg: Config { on = true } SPAWN #p: Project {} SPAWN #t: Task {} LINK belongs_to(#t, #p)`)
	for _, q := range []string{
		`w = WATCH t: Task, belongs_to(t, #p) RETURN t.id`,
		`v = WATCH t: Task RETURN t.id`,
	} {
		st, err := h.svc.Open(context.Background(), "", q, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ready(h, st)
		handle := q[:1]
		mustExec(t, h, "", `MATCH c: Config SET c.on = true`)
		mustExec(t, h, "", `ALTER WATCH #`+handle+` SET [filter: #cfg.on = true]`)
		if got := ready(h, st); len(got) != 0 {
			t.Fatalf("%s: after ALTER %v", q, got)
		}
		mustExec(t, h, "", `MATCH c: Config SET c.on = false`)
		if got := ready(h, st); len(got) != 1 || !strings.HasPrefix(got[0], "removed") {
			t.Errorf("%s: after #cfg.on = false: %v, want one removed", q, got)
		}
		st.Close()
	}
}

// TestQuietJoinIsNotReset: commits of types a join watch does not read do not count
// towards what it replays: a watch that was quiet meanwhile gets its next event, not a
// reset.
func TestQuietJoinIsNotReset(t *testing.T) {
	defer watch.SetMaxPast(8)()
	h := newHarness(t)
	mustExec(t, h, "", `SPAWN #p: Project {} SPAWN #t: Task { n = 0 } LINK belongs_to(#t, #p)`)
	st, err := h.svc.Open(context.Background(), "", `WATCH t: Task, belongs_to(t, #p) RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ready(h, st)
	for i := 0; i < 20; i++ {
		mustExec(t, h, "", fmt.Sprintf(`SPAWN #o%d: Other {}`, i))
	}
	mustExec(t, h, "", `MATCH t: Task SET t.n = 1`)
	if got := ready(h, st); len(got) != 1 || !strings.HasPrefix(got[0], "changed") {
		t.Errorf("events %v, want one changed", got)
	}
}

// TestResetLosesNothing: after a reset and its new snapshot, the stream reads on from
// the snapshot's position, so commits made while the snapshot was going out are
// reported.
func TestResetLosesNothing(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	mustExec(t, h, "", `SPAWN #p: Project {}`)
	st, err := h.svc.Open(ctx, "", `WATCH t: Task, belongs_to(t, #p) [delivery: reliable, buffer: 1] RETURN t.id`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer watch.SetMaxPast(4)()
	// More new tasks in one commit than the stream replays: a reset, then a snapshot
	// that the one-event buffer holds up.
	q := "BEGIN "
	for i := 0; i < 10; i++ {
		q += fmt.Sprintf(`SPAWN #t%d: Task {} LINK belongs_to(#t%d, #p) `, i, i)
	}
	mustExec(t, h, "", q+"COMMIT")
	var got []string
	for {
		ev := <-st.Events()
		got = append(got, fmt.Sprintf("%s %s", ev.Type, ev.Match))
		if ev.Type == herald.EventInitial {
			break // the snapshot is taken; the rest of it waits for the reader
		}
	}
	mustExec(t, h, "", `SPAWN #t99: Task {} LINK belongs_to(#t99, #p)`)
	var mu sync.Mutex
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for ev := range st.Events() {
			mu.Lock()
			got = append(got, fmt.Sprintf("%s %s", ev.Type, ev.Match))
			mu.Unlock()
		}
	}()
	h.svc.Flush()
	st.Close()
	<-readerDone
	mu.Lock()
	defer mu.Unlock()
	for _, g := range got {
		if strings.Contains(g, `"t99"`) {
			return
		}
	}
	t.Errorf("t99 never reported: %v", got)
}

// TestSlowReaderHoldsUpOnlyItsWatch: a watch whose reader stops reading, under delivery:
// reliable or on_full: block, pauses itself and no other watch. Its stream waits for
// room while the dispatcher goes on handing commits out; before, the dispatcher counted
// the waiting stream in its next round and waited for it, and every watch stalled.
func TestSlowReaderHoldsUpOnlyItsWatch(t *testing.T) {
	for _, tc := range []struct{ name, opts string }{
		{"reliable", "delivery: reliable"},
		{"block", "on_full: block"},
		{"reliable, in batches", "delivery: reliable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			slow, err := h.svc.Open(ctx, "", `WATCH t: Task [`+tc.opts+`, buffer: 2, initial: none] RETURN t.n`, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			if strings.HasSuffix(tc.name, "in batches") {
				slow.(interface {
					Take([]herald.Event, int) ([]herald.Event, bool)
				}).Take(nil, 1) // a batching transport that takes once, then stops
			}
			other := openIdle(t, h, ctx)
			defer other.Close()
			for i := range 20 {
				mustExec(t, h, "", fmt.Sprintf(`SPAWN t: Task { n = %d }`, i))
				select {
				case <-other.Events():
				case <-time.After(10 * time.Second): // a bound on a hang, not a speed assertion
					t.Fatalf("the other watch got %d of 20 events: the slow reader's watch held it up", i)
				}
			}
			// The slow watch lost nothing: its reader gets all 20 once it reads.
			var got []herald.Event
			for len(got) < 20 {
				if tk, ok := slow.(interface {
					Take([]herald.Event, int) ([]herald.Event, bool)
				}); ok && strings.HasSuffix(tc.name, "in batches") {
					if got, _ = tk.Take(got, 20); len(got) == 20 {
						break
					}
				}
				select {
				case ev := <-slow.Events():
					got = append(got, ev)
				case <-time.After(10 * time.Second):
					t.Fatalf("the slow watch delivered %d of 20 events once read", len(got))
				}
			}
			for i, ev := range got {
				if n := ev.Match.MapGet("t.n").AsInt(); n != int64(i) {
					t.Fatalf("the slow watch's event %d has n = %d", i, n)
				}
			}
		})
	}
}

// TestOverflowShowsAtOnce: when on_full: error ends a watch whose reader stopped reading,
// its _Watch node says cancelled at once, though the error event itself waits for the
// reader (the channel is full). Before, the node changed only when the stream ended,
// after the reader took the event: never, for a client that had stopped reading.
func TestOverflowShowsAtOnce(t *testing.T) {
	h := newHarness(t)
	st, err := h.svc.Open(context.Background(), "", `WATCH t: Task [buffer: 3, on_full: error, initial: none] RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 6 {
		mustExec(t, h, "", fmt.Sprintf(`SPAWN t: Task { n = %d }`, i))
	}
	status := func() string {
		resp, err := h.eng.Exec(context.Background(), "", `MATCH x: _Watch WHERE x.on_full = "error" RETURN x.status`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rows := resp.Results[0].Rows; len(rows) == 1 {
			return rows[0][0].AsString()
		}
		return ""
	}
	for bound := time.Now().Add(10 * time.Second); status() != "cancelled"; time.Sleep(time.Millisecond) {
		if time.Now().After(bound) { // a bound on a hang, not a speed assertion
			t.Fatalf("the _Watch node of an overflowed watch whose reader stopped says %q", status())
		}
	}
	// Reading now, the stream gives what it held and ends with E8005.
	var last herald.Event
	for ev := range st.Events() {
		last = ev
	}
	if last.Code != herald.CodeWatchBufferOverflow {
		t.Fatalf("the stream ended with %+v, want E8005", last)
	}
}
