package standing_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/standing"
)

// trackWatches makes n _Watch nodes (w000, w001, …) and tracks their counters, the i-th
// having delivered delivered(i) events at at; the tracking ends with the test.
func trackWatches(t *testing.T, e *engine.Engine, n int, delivered func(i int) int, at time.Time) {
	t.Helper()
	attrs := herald.AttrsOf(map[string]herald.Value{"pattern": herald.String("WATCH t: Task RETURN t"), "mode": herald.String("watch"),
		"status": herald.String("active"), "on_full": herald.String("drop")})
	id := func(i int) herald.NodeID { return herald.NodeID(fmt.Sprintf("w%03d", i)) }
	if _, _, err := e.System(context.Background(), func(tx *engine.SysTx) error {
		for i := range n {
			tx.PutNode(&herald.Node{ID: id(i), Type: standing.TypeWatch, Attrs: attrs})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	core := standing.Attach(e)
	t.Cleanup(core.Detach)
	for i := range n {
		st := core.Track(id(i), nil)
		t.Cleanup(func() { core.Untrack(st) })
		st.Delivered(delivered(i), at)
	}
}

// TestStatsFlushInChunks: the _Watch counters of many watches go out over several
// small commits, not one large one, and every counter arrives.
func TestStatsFlushInChunks(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, engine.Config{Layer0Interval: 1000 * time.Hour})
	const watches = 150
	trackWatches(t, e, watches, func(i int) int { return i + 1 }, time.Unix(1700000000, 0))
	before, _ := e.Durable()
	if err := e.FlushLayer0(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := e.Durable()
	if commits, least := after-before, uint64((watches+63)/64); commits < least {
		t.Errorf("the flush took %d commits; with at most 64 nodes a commit it takes %d or more", commits, least)
	}
	r := exec(t, e, "MATCH w: _Watch RETURN SUM(w.events_delivered) AS n")
	if got, want := r.Results[0].Rows[0][0], herald.Int(watches*(watches+1)/2); herald.Compare(got, want) != 0 {
		t.Errorf("events_delivered sums to %v, want %v", got, want)
	}
}

// TestStatsRoundSpread: the periodic flush spreads a round over the interval, one
// commit of at most 64 watches at a time, in node order.
func TestStatsRoundSpread(t *testing.T) {
	clk := clock.NewManual(time.Unix(1700000000, 0))
	const interval = 3 * time.Second
	e := openEngine(t, engine.Config{Clock: clk, Layer0Interval: interval})
	const watches = 150 // three commits: 64, 64, 22
	trackWatches(t, e, watches, func(int) int { return 1 }, clk.Now())
	written := func() int64 {
		r := exec(t, e, "MATCH w: _Watch WHERE w.events_delivered = 1 RETURN COUNT(w)")
		return r.Results[0].Rows[0][0].AsInt()
	}
	// The loop arms its timer once it sees the first tracked watch.
	waitFor(t, "the flush timer", func() bool { return clk.Pending() > 0 })
	var prev int64
	for _, step := range []struct {
		advance time.Duration
		want    int64
	}{{interval, 64}, {interval / 3, 128}, {interval / 3, 150}} {
		if got := written(); got != prev {
			t.Fatalf("before the clock moved: %d watches written, want %d", got, prev)
		}
		prev = step.want
		clk.Advance(step.advance)
		waitFor(t, fmt.Sprintf("%d watches written", step.want), func() bool { return written() >= step.want })
		waitFor(t, "the next timer", func() bool { return clk.Pending() > 0 })
		if got := written(); got != step.want {
			t.Fatalf("%d watches written, want %d: a commit wrote more than 64", got, step.want)
		}
	}
}
