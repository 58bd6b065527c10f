package watch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herald-mq/herald"
)

// batchReader reads a stream as a batching transport does: it takes what waits for it
// (Take), and waits on the channel only when nothing came.
func batchReader(ctx context.Context, st herald.Stream, want int) (added []int64, gaps int, err error) {
	t := st.(interface {
		Take([]herald.Event, int) ([]herald.Event, bool)
	})
	var evs []herald.Event
	take := func(ev herald.Event) {
		switch ev.Type {
		case herald.EventAdded:
			added = append(added, ev.Match.MapGet("n").AsInt())
		case herald.EventGap:
			gaps += ev.Count
		}
	}
	for len(added)+gaps < want {
		select {
		case ev, ok := <-st.Events():
			if !ok {
				return added, gaps, fmt.Errorf("the stream closed after %d added and %d in gaps", len(added), gaps)
			}
			take(ev)
		case <-ctx.Done():
			return added, gaps, fmt.Errorf("%d added and %d in gaps of %d: %w", len(added), gaps, want, ctx.Err())
		}
		for {
			var closed bool
			if evs, closed = t.Take(evs[:0], 7); closed {
				return added, gaps, fmt.Errorf("the stream closed after %d added and %d in gaps", len(added), gaps)
			}
			for _, ev := range evs {
				take(ev)
			}
			if len(evs) == 0 {
				break
			}
		}
	}
	return added, gaps, nil
}

// TestBatchedTransport: a transport that takes events in batches gets every event in
// order, with what a best-effort stream dropped counted in gaps where it dropped it, and
// all of them from a reliable stream, whether it reads while the commits come or after.
func TestBatchedTransport(t *testing.T) {
	const n = 300
	for _, tc := range []struct {
		name, opts string
		late       bool // the transport reads only after the last commit
	}{
		{"best effort, reading along", "initial: none, buffer: 20", false},
		{"best effort, reading late", "initial: none, buffer: 20", true},
		{"reliable, reading along", "initial: none, buffer: 20, delivery: reliable", false},
		{"reliable, reading late", "initial: none, buffer: 20, delivery: reliable", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			st, err := h.svc.Open(context.Background(), "", "WATCH t: Task ["+tc.opts+"] RETURN t.n AS n", nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			type result struct {
				added []int64
				gaps  int
				err   error
			}
			start := make(chan struct{})
			done := make(chan result, 1)
			go func() {
				<-start
				a, g, err := batchReader(ctx, st, n)
				done <- result{a, g, err}
			}()
			if !tc.late {
				close(start)
			}
			for i := range n {
				mustExec(t, h, "", fmt.Sprintf("SPAWN t: Task { n = %d }", i))
			}
			reliable := tc.opts != "initial: none, buffer: 20"
			if tc.late {
				if !reliable {
					h.svc.Flush() // the stream has taken every commit (a reliable one waits for its reader)
				}
				close(start)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			for i := 1; i < len(r.added); i++ {
				if r.added[i] <= r.added[i-1] {
					t.Fatalf("out of order: %d after %d", r.added[i], r.added[i-1])
				}
			}
			if len(r.added)+r.gaps != n {
				t.Errorf("%d added and %d in gaps, want %d in all", len(r.added), r.gaps, n)
			}
			if reliable && r.gaps != 0 {
				t.Errorf("a reliable stream dropped %d events", r.gaps)
			}
			if !reliable && tc.late && r.gaps == 0 {
				t.Errorf("a best-effort stream with room for 20 events kept all %d", n)
			}
		})
	}
}
