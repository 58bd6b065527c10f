package watch_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-mq/herald"
)

// TestDispatchOffCommitPath holds the watch dispatcher (as thousands of streams on a
// pattern would keep it busy) and checks that commits still become durable and are
// answered meanwhile; the watch gets their events once the dispatcher goes on.
func TestDispatchOffCommitPath(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	st, err := h.svc.Open(ctx, "", `WATCH t: Task [initial: none] RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
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
