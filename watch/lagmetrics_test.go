package watch_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-mq/herald"
)

// metric returns the watch service's metric of that name.
func metric(t *testing.T, h *harness, name string) herald.Metric {
	t.Helper()
	for _, m := range h.svc.Metrics() {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no metric %s", name)
	return herald.Metric{}
}

// TestLagAndBufferFillMetrics: a stream whose client reads nothing fills its buffer and
// then falls behind the commits that concern it; one whose client reads is neither. The
// distributions count each stream once, the maxima are the lagging stream's.
func TestLagAndBufferFillMetrics(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	idle, err := h.svc.Open(ctx, "", `WATCH t: Task [initial: none, buffer: 4, on_full: block] RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	reader, err := h.svc.Open(ctx, "", `WATCH t: Task [initial: none] RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	go func() {
		for range reader.Events() {
		}
	}()
	const commits = 40
	for i := range commits {
		spawnTask(t, h, i)
	}
	// The reading stream applies every commit; the blocked one stops once its buffer
	// is full.
	deadline := time.Now().Add(10 * time.Second)
	for {
		lag := metric(t, h, "herald_watch_lag_commits")
		fill := metric(t, h, "herald_watch_buffer_fill")
		lagMax := metric(t, h, "herald_watch_lag_commits_max").Value
		fillMax := metric(t, h, "herald_watch_buffer_fill_max").Value
		if lag.Histogram.Count == 2 && lag.Histogram.Counts[0] == 1 && fill.Histogram.Counts[0] == 1 &&
			fillMax == 1 && lagMax >= 1 && lag.Histogram.Sum == lagMax {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lag %+v (max %g), fill %+v (max %g)", lag.Histogram, lagMax, fill.Histogram, fillMax)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
