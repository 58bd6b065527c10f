package watch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/pebblestore"
	"github.com/herald-mq/herald/watch"
)

// openWatchService starts a watch service with cfg on an engine over an in-memory
// Pebble with a manual clock; both stop at cleanup.
func openWatchService(t *testing.T, cfg watch.Config) (*engine.Engine, *watch.Service) {
	t.Helper()
	return openWatchServicePerSession(t, cfg, 0)
}

// openWatchServicePerSession is openWatchService with the engine's cap on a session's
// watches set to perSession (0: the default).
func openWatchServicePerSession(t *testing.T, cfg watch.Config, perSession int) (*engine.Engine, *watch.Service) {
	t.Helper()
	st, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(context.Background(), engine.Config{Backend: st, Clock: clock.NewManual(time.Unix(1700000000, 0)), Logger: quiet, MaxWatchesPerSession: perSession})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine, cfg.Logger = eng, quiet
	svc := watch.New(cfg)
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = svc.Stop(context.Background())
		_ = eng.Close(context.Background())
	})
	return eng, svc
}

// TestWatchLimits: beyond the per-session and server-wide caps, Open answers E8006; a
// closed watch frees its place. Handles are per session.
func TestWatchLimits(t *testing.T) {
	eng, svc := openWatchServicePerSession(t, watch.Config{MaxWatches: 3}, 2)
	ctx := context.Background()
	sid, _ := eng.OpenSession(context.Background())
	a, err := svc.Open(ctx, sid, `h = WATCH t: Task RETURN t`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Open(ctx, sid, `h = WATCH t: Task RETURN t`, nil, 0); herald.CodeOf(err) != herald.CodeInvalidQuery {
		t.Fatalf("a second watch under the same handle: err = %v", err)
	}
	if _, err := svc.Open(ctx, sid, `WATCH t: Task RETURN t`, nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Open(ctx, sid, `WATCH t: Task RETURN t`, nil, 0); herald.CodeOf(err) != herald.CodeWatchLimitExceeded {
		t.Fatalf("third watch of the session: err = %v, want E8006", err)
	}
	if _, err := svc.Open(ctx, "", `WATCH t: Task RETURN t`, nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Open(ctx, "", `WATCH t: Task RETURN t`, nil, 0); herald.CodeOf(err) != herald.CodeWatchLimitExceeded {
		t.Fatalf("fourth watch of the server: err = %v, want E8006", err)
	}
	a.Close()
	svc.Flush()
	if _, err := svc.Open(ctx, sid, `h = WATCH t: Task RETURN t`, nil, 0); err != nil {
		t.Fatalf("after a close the place and the handle are free: %v", err)
	}
}

// TestWatchPolicy: a pattern that mentions a type the policy denies answers E8001, in
// any position of the pattern; others open.
func TestWatchPolicy(t *testing.T) {
	_, svc := openWatchService(t, watch.Config{Policy: herald.WatchPolicy{DenyTypes: []string{"Secret", "owns"}}})
	ctx := context.Background()
	for _, q := range []string{`WATCH s: Secret RETURN s`, `WATCH t: Task, owns(t, _) RETURN t`, `WATCH t: Task, s: Secret, x(t, s) RETURN t`} {
		if _, err := svc.Open(ctx, "", q, nil, 0); herald.CodeOf(err) != herald.CodeWatchPatternDenied {
			t.Errorf("%s: %v, want E8001", q, err)
		}
	}
	st2, err := svc.Open(ctx, "", `WATCH w: _Watch RETURN w.mode`, nil, 0)
	if err != nil {
		t.Fatalf("watching a system type in watch mode: %v", err)
	}
	st2.Close()
}

// TestBufferBytes: a stream's buffer is bounded in bytes as well as events; a reader
// that does not read, on a stream of large values, gets a gap (on_full: drop) or is
// cancelled with E8005 (on_full: error) once the bytes are reached, whatever the
// buffer option.
func TestBufferBytes(t *testing.T) {
	eng, svc := openWatchService(t, watch.Config{MaxBufferBytes: 64 << 10})
	ctx := context.Background()
	body := herald.String(strings.Repeat("x", 8<<10))
	spawn := func(n int) {
		t.Helper()
		for range n {
			if _, err := eng.Exec(ctx, "", `SPAWN b: Big { body = $b }`, map[string]herald.Value{"b": body}); err != nil {
				t.Fatal(err)
			}
		}
	}
	drop, err := svc.Open(ctx, "", `WATCH b: Big [buffer: 100000, on_full: drop, initial: none] RETURN b.body`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	spawn(40) // 320 KiB of values, five times the bound
	svc.Flush()
	var added, dropped int
	for added+dropped < 40 {
		select {
		case ev := <-drop.Events():
			switch ev.Type {
			case herald.EventAdded:
				added++
			case herald.EventGap:
				dropped += ev.Count
			}
		case <-time.After(30 * time.Second): // a bound on a hang
			t.Fatalf("after %d events and %d dropped, nothing more", added, dropped)
		}
	}
	if dropped == 0 || added+dropped != 40 {
		t.Fatalf("on_full: drop kept %d events and reported %d dropped, want a gap and 40 in all", added, dropped)
	}
	drop.Close()

	// on_full: error waits for its reader to take what it holds, then ends.
	fail, err := svc.Open(ctx, "", `WATCH b: Big [buffer: 100000, on_full: error, initial: none] RETURN b.body`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	spawn(40)
	// Read only once the stream has filled its buffer: a reader that starts while the
	// stream is still applying the commits may keep its queue below the bound.
	for bound := time.Now().Add(30 * time.Second); !watch.Overflowed(fail); time.Sleep(time.Millisecond) {
		if time.Now().After(bound) { // a bound on a hang, not a speed assertion
			t.Fatal("on_full: error: 320 KiB of events unread did not fill a 64 KiB buffer")
		}
	}
	deadline := time.After(30 * time.Second) // a bound on a hang, not a speed assertion
	for {
		select {
		case ev, ok := <-fail.Events():
			if !ok {
				t.Fatal("on_full: error ended without an error event")
			}
			if ev.Type == herald.EventError {
				if ev.Code != herald.CodeWatchBufferOverflow {
					t.Fatalf("on_full: error ended with %+v, want E8005", ev)
				}
				return
			}
		case <-deadline:
			t.Fatal("on_full: error did not end the stream")
		}
	}
}

// spawnPairs writes n nodes of types LA and LB each: their join is n² bindings.
func spawnPairs(t *testing.T, eng *engine.Engine, n int) {
	t.Helper()
	var b strings.Builder
	for range n {
		b.WriteString("SPAWN a: LA {} SPAWN b: LB {} ")
	}
	if _, err := eng.Exec(context.Background(), "", b.String(), nil); err != nil {
		t.Fatal(err)
	}
}

// TestWatchEvaluationLimits: a watch's evaluation runs under the same limits as a
// MATCH: a join past the principal's rows-scanned limit stops with E4012 when it opens
// (the server's limit is far higher), and one whose client has gone stops with E4011
// at once instead of running to the end.
func TestWatchEvaluationLimits(t *testing.T) {
	eng, svc := openWatchService(t, watch.Config{})
	spawnPairs(t, eng, 300) // 90,000 bindings
	const join = `WATCH a: LA, b: LB RETURN a, b`
	p := &herald.Principal{Name: "p", Grants: []string{herald.ActAdmin}, MaxRowsScanned: 20_000}
	if _, err := svc.Open(herald.WithPrincipal(context.Background(), p), "", join, nil, 0); herald.CodeOf(err) != herald.CodeStatementLimit {
		t.Fatalf("a join past the principal's limit: err = %v, want E4012", err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := svc.Open(gone, "", join, nil, 0); herald.CodeOf(err) != herald.CodeCancelled {
		t.Fatalf("a join whose client has gone: err = %v, want E4011", err)
	}
	// Within the limits it opens.
	w, err := svc.Open(context.Background(), "", join, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
}
