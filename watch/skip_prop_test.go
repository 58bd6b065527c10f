package watch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/watch"
	"pgregory.net/rapid"
)

// skipCase is one run of a stream held behind in its feed while commits arrive.
type skipCase struct {
	perCommit []int // Tasks each commit spawns (the first at least one)
	where     string
	buffer    int
	feedCap   int
}

// runSkipCase opens the stream, holds it in its first turn while the commits are made,
// lets it catch up and returns what it sent, gaps as "gap N" and others as "type n".
func runSkipCase(t *rapid.T, tt *testing.T, c skipCase) []string {
	defer watch.SetFeedCap(c.feedCap)()
	h := &harness{t: tt, fs: vfs.NewMem(), clk: clock.NewManual(time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)), last: map[string]uint64{}}
	h.open()
	defer h.close()
	ctx := context.Background()
	q := fmt.Sprintf(`WATCH t: Task %s [initial: none, buffer: %d] RETURN t.n`, c.where, c.buffer)
	st, err := h.svc.Open(ctx, "", q, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h.svc.Overspend(time.Second)
	timers := h.clk.Pending()
	n := 0
	for i, k := range c.perCommit {
		stmt := ""
		for j := range k {
			stmt += fmt.Sprintf("SPAWN t%d: Task { n = %d } ", j, n)
			n++
		}
		if stmt == "" {
			stmt = "SPAWN o: Other {}"
		}
		if _, err := h.eng.Exec(ctx, "", stmt, nil); err != nil {
			t.Fatal(err)
		}
		if i == 0 { // it spawns a Task: the stream's turn waits for the budget
			for end := time.Now().Add(10 * time.Second); h.clk.Pending() <= timers; {
				if time.Now().After(end) {
					t.Fatal("the stream never waited for the budget")
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	durable, _ := h.eng.Durable()
	for end := time.Now().Add(10 * time.Second); h.svc.Dispatched() < durable; {
		if time.Now().After(end) {
			t.Fatal("the commits never reached the feed")
		}
		time.Sleep(time.Millisecond)
	}
	h.clk.Advance(time.Minute)
	h.svc.Flush()
	evs, _ := watch.Drain(st)
	var out []string
	for _, ev := range evs {
		if ev.Type == herald.EventGap {
			out = append(out, fmt.Sprintf("gap %d", ev.Count))
		} else {
			out = append(out, fmt.Sprintf("%s %d", ev.Type, ev.Match.MapGet("t.n").AsInt()))
		}
	}
	return out
}

// Skipping a backlog, and queueing the events of several commits together when they
// fit, are optimisations of on_full: drop, never a change of what the client sees: for
// random commits (none, one or several events each, a selective condition or none),
// buffers and feed sizes, a stream that does both sends exactly what one that queues
// and drops the oldest one event at a time sends.
func TestSkippingSendsWhatDroppingOneByOneSends(t *testing.T) {
	tt := t
	rapid.Check(t, func(t *rapid.T) {
		c := skipCase{
			perCommit: append([]int{rapid.IntRange(1, 3).Draw(t, "first")},
				rapid.SliceOfN(rapid.IntRange(0, 3), 0, 60).Draw(t, "perCommit")...),
			where:   rapid.SampledFrom([]string{"", "WHERE t.n % 3 <> 1", "WHERE t.n < 10 OR t.n > 40"}).Draw(t, "where"),
			buffer:  rapid.IntRange(2, 12).Draw(t, "buffer"),
			feedCap: rapid.SampledFrom([]int{4, 8, 64}).Draw(t, "feedCap"),
		}
		skipped := runSkipCase(t, tt, c)
		restore := watch.SetSkipping(false)
		dropped := runSkipCase(t, tt, c)
		restore()
		if fmt.Sprint(skipped) != fmt.Sprint(dropped) {
			t.Fatalf("skipping sent\n%v\ndropping one by one sent\n%v", skipped, dropped)
		}
	})
}
