package watch_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-mq/herald"
)

// TestStreamsEndWithTheirContext: streams opened with one context share one watch on
// it. Closing one leaves the others to it; when the context ends, every stream still
// open ends; and once none is left the service forgets the context.
func TestStreamsEndWithTheirContext(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sts []herald.Stream
	for range 3 {
		st := openIdle(t, h, ctx)
		sts = append(sts, st)
	}
	if n := h.svc.CtxGroups(); n != 1 {
		t.Fatalf("three streams on one context: %d contexts watched, want 1", n)
	}
	ended := func(st herald.Stream) bool {
		select {
		case <-st.Done():
			return true
		case <-time.After(10 * time.Second):
			return false
		}
	}
	sts[0].Close()
	if !ended(sts[0]) {
		t.Fatal("a closed stream did not end")
	}
	select {
	case <-sts[1].Done():
		t.Fatal("closing one stream ended another on the same context")
	default:
	}
	cancel()
	for i, st := range sts[1:] {
		if !ended(st) {
			t.Fatalf("stream %d did not end with its context", i+1)
		}
	}
	if n := h.svc.CtxGroups(); n != 0 {
		t.Fatalf("%d contexts still watched after their streams ended", n)
	}

	// A stream closed before its context: the context is forgotten at once.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	st, err := h.svc.Open(ctx2, "", `WATCH t: Task [initial: none] RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if !ended(st) {
		t.Fatal("a closed stream did not end")
	}
	if n := h.svc.CtxGroups(); n != 0 {
		t.Fatalf("%d contexts still watched after the only stream on one was closed", n)
	}
}
