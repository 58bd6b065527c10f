package watch_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/watch"
)

// TestJoinResumeBeyondMemory: a join watch resumed from a position older than the
// change sets the engine keeps in memory replays from the durable change log, and gets
// every commit after the position, exactly.
func TestJoinResumeBeyondMemory(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	resp, err := h.eng.Exec(ctx, "", `SPAWN #p: Project {} SPAWN #t0: Task { n = 0 } LINK belongs_to(#t0, #p)`, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := resp.Seq
	const n = engine.RecentChanges + 100
	for i := 1; i <= n; i++ {
		if _, err := h.eng.Exec(ctx, "", `MATCH t: Task WHERE t.id = "t0" SET t.n = t.n + 1`, nil); err != nil {
			t.Fatal(err)
		}
	}
	st, err := h.svc.Open(ctx, "", `WATCH t: Task, belongs_to(t, #p) [delivery: reliable] RETURN t.n`, nil, start)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := 1; i <= n; i++ {
		ev := <-st.Events()
		if ev.Type != herald.EventChanged || ev.Match.MapGet("t.n").AsInt() != int64(i) || ev.Seq != start+uint64(i) {
			t.Fatalf("event %d: %s %s seq %d, want changed t.n=%d at seq %d", i, ev.Type, ev.Match, ev.Seq, i, start+uint64(i))
		}
	}
}

// TestJoinResumeTooFarBehind: a join watch whose replay would keep more changed nodes
// and edges than the bound gets a reset event, then a new snapshot — never a silent gap.
func TestJoinResumeTooFarBehind(t *testing.T) {
	defer watch.SetMaxPast(8)()
	h := newHarness(t)
	ctx := context.Background()
	resp, err := h.eng.Exec(ctx, "", `SPAWN #p: Project {}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := resp.Seq
	for i := 0; i < 10; i++ {
		if _, err := h.eng.Exec(ctx, "", fmt.Sprintf(`SPAWN #t%d: Task { n = %d } LINK belongs_to(#t%d, #p)`, i, i, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	st, err := h.svc.Open(ctx, "", `WATCH t: Task, belongs_to(t, #p) [delivery: reliable] RETURN t.n`, nil, start)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ev := <-st.Events()
	if ev.Type != herald.EventReset || ev.Code != herald.CodeCompacted {
		t.Fatalf("first event %s %s, want reset with %s", ev.Type, ev.Code, herald.CodeCompacted)
	}
	for i := 0; i < 10; i++ {
		ev := <-st.Events()
		if ev.Type != herald.EventInitial {
			t.Fatalf("event %d after the reset: %s, want initial", i, ev.Type)
		}
	}
}

// TestOnFullBlock: a watch with on_full: block and a full buffer holds its own events
// back until the subscriber reads — writers are never held back, and nothing is
// dropped or reported as a gap.
func TestOnFullBlock(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	st, err := h.svc.Open(ctx, "", `WATCH t: Task [buffer: 2, on_full: block] RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 12
	for i := 0; i < n; i++ {
		// Each SPAWN returns although nobody reads the stream.
		if _, err := h.eng.Exec(ctx, "", fmt.Sprintf(`SPAWN t: Task { n = %d }`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		ev := <-st.Events()
		if ev.Type != herald.EventAdded || ev.Match.MapGet("t.n").AsInt() != int64(i) {
			t.Fatalf("event %d: %s %s, want added t.n=%d", i, ev.Type, ev.Match, i)
		}
	}
}
