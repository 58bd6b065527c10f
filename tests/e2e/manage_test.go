package e2e

// Layer 0 and watch management against the real binary: consume watches managed by
// handle and _Watch id, _Watch counters in both modes, one session limit across modes,
// and sessions as _Session nodes.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// watchRow reads one column of the only _Watch node a query selects.
func watchRow(t *testing.T, base, q string) string {
	t.Helper()
	return rowsJSON(mustQuery(t, base, q), 0)
}

// TestConsumeWatchManagement: `c = WATCH … [mode: consume]` binds a handle in its
// session; PAUSE holds back new deliveries while held leases settle; ALTER changes the
// failure handling and refuses the rest; RESUME by _Watch id goes on; CANCEL ends every
// member of the group with E8002 and leaves the _Watch node cancelled.
func TestConsumeWatchManagement(t *testing.T) {
	s := startServer(t, t.TempDir(), "--stats-interval", "100ms")
	u := s.URL()
	mustQuery(t, u, `SPAWN #m1: MJob { n = 1 } SPAWN #m2: MJob { n = 2 }`)
	sess := openSession(t, u)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const stmt = `WATCH j: MJob [mode: consume, group: "m", buffer: 1] RETURN j`
	a, err := openStreamIn(ctx, u, sess, "c = "+stmt)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := mustOpen(t, u, stmt) // another member, without a session or a handle
	first, second := a.nextConsumed(t), b.nextConsumed(t)

	mustSessionQuery(t, u, sess, `PAUSE WATCH c`)
	if got := watchRow(t, u, `MATCH w: _Watch WHERE w.group = "m" RETURN w.status`); got != `[["paused"]]` {
		t.Fatalf("after PAUSE: %s", got)
	}
	mustSettle(t, u, "ACK", first.DeliveryID, "") // a held lease settles while paused
	mustQuery(t, u, `SPAWN #m3: MJob { n = 3 }`)
	select {
	case ev := <-a.Events:
		t.Fatalf("a paused watch delivered %+v", ev)
	case <-time.After(300 * time.Millisecond):
	}

	mustSessionQuery(t, u, sess, `ALTER WATCH c SET [max_redeliveries: 7]`)
	if got := watchRow(t, u, `MATCH w: _Watch WHERE w.group = "m" RETURN w.max_redeliveries, w.status`); got != `[[7,"paused"]]` {
		t.Fatalf("after ALTER: %s", got)
	}
	r := sessionQuery(t, u, sess, `ALTER WATCH c SET [group: "other"]`)
	if r.Status != 400 || r.Error == nil || r.Error.Code != "E1004" {
		t.Fatalf("ALTER of the group: status %d %+v, want 400 E1004", r.Status, r.Error)
	}

	rows := mustQuery(t, u, `MATCH w: _Watch WHERE w.group = "m" RETURN w.id`).Results[0].Rows
	var wid string
	if len(rows) != 1 || json.Unmarshal(rows[0][0], &wid) != nil {
		t.Fatalf("the group's _Watch: %v", rows)
	}
	mustQuery(t, u, `RESUME WATCH "`+wid+`"`) // by id, from outside the session
	if got := a.nextConsumed(t).subjectID(); got != "m3" {
		t.Fatalf("after RESUME the first member got %s, want m3", got)
	}

	// The counters follow: three deliveries, two of them unsettled.
	eventually(t, "the _Watch counters", func() bool {
		return watchRow(t, u, `MATCH w: _Watch WHERE w.group = "m" RETURN w.events_delivered, w.events_pending, w.last_event_at IS NULL`) == `[[3,2,false]]`
	})
	// The session holds the watch.
	if got := rowsJSON(mustQuery(t, u, `MATCH s: _Session, _session_has_watch(s, w), w: _Watch RETURN w.group`), 0); got != `[["m"]]` {
		t.Fatalf("_session_has_watch: %s", got)
	}

	mustSessionQuery(t, u, sess, `CANCEL WATCH c`)
	for _, st := range []*sseStream{a, b} {
		if ev := st.next(t); ev.Type != "error" || ev.Code != "E8002" {
			t.Fatalf("after CANCEL: %+v, want an E8002 error event", ev)
		}
	}
	if got := watchRow(t, u, `MATCH w: _Watch WHERE w.group = "m" RETURN w.status`); got != `[["cancelled"]]` {
		t.Fatalf("after CANCEL: %s", got)
	}
	// Released, not failed: the next consumer gets m2 at its first attempt still.
	c := mustOpen(t, u, `WATCH j: MJob [mode: consume] RETURN j`)
	ev := c.nextConsumed(t)
	if ev.subjectID() != second.subjectID() || ev.Attempt != 1 {
		t.Fatalf("after CANCEL: %s at attempt %d, want %s at attempt 1", ev.subjectID(), ev.Attempt, second.subjectID())
	}
}

// TestWatchModeCounters: a watch-mode _Watch node shows what its stream delivered.
func TestWatchModeCounters(t *testing.T) {
	s := startServer(t, t.TempDir(), "--stats-interval", "100ms")
	u := s.URL()
	st := openWatchMode(t, u, `WATCH k: CJob RETURN k.n`, "")
	mustQuery(t, u, `SPAWN k: CJob { n = 1 } SPAWN l: CJob { n = 2 }`)
	st.next(t)
	st.next(t)
	eventually(t, "the _Watch counters", func() bool {
		return watchRow(t, u, `MATCH w: _Watch WHERE w.mode = "watch" RETURN w.events_delivered, w.last_event_at IS NULL`) == `[[2,false]]`
	})
}

// TestSessionWatchLimitAcrossModes: a session's cap counts watch-mode and consume
// streams together; the refusal is 429 E8006.
func TestSessionWatchLimitAcrossModes(t *testing.T) {
	s := startServer(t, t.TempDir(), "--max-session-watches", "2")
	u := s.URL()
	sess := openSession(t, u)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := openWatchModeIn(t, u, sess, `WATCH k: LJob RETURN k`, "")
	c, err := openStreamIn(ctx, u, sess, `WATCH k: LJob [mode: consume] RETURN k`)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`WATCH k: LJob RETURN k`, `WATCH k: LJob [mode: consume] RETURN k`} {
		_, err := openStreamIn(ctx, u, sess, stmt)
		se, ok := err.(*statusError)
		if !ok || se.Status != 429 || !strings.Contains(se.Body, "E8006") {
			t.Fatalf("a third watch (%s): %v, want 429 E8006", stmt, err)
		}
	}
	c.Close()
	eventually(t, "a place freed by the consume stream", func() bool {
		st, err := openStreamIn(ctx, u, sess, `WATCH k: LJob [mode: consume] RETURN k`)
		if err == nil {
			st.Close()
		}
		return err == nil
	})
	w.close()
}

// TestOverflowKeepsTheWatchCancelled: a watch-mode stream whose client stops reading
// and whose buffer fills, with on_full: error, ends with E8005; its _Watch node stays,
// with status cancelled, instead of vanishing.
func TestOverflowKeepsTheWatchCancelled(t *testing.T) {
	s := startServer(t, t.TempDir())
	u := s.URL()
	mustQuery(t, u, `node Big { body: String }`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, watchURL(u, "", `WATCH b: Big [buffer: 2, on_full: error] RETURN b.body`), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := streamClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("open: %v %v", resp, err)
	}
	defer resp.Body.Close()
	// The test does not read the stream: enough data fills the socket buffers between
	// the server and the test, and then the stream's own buffer behind them.
	body := strings.Repeat("x", 60<<10)
	var q strings.Builder
	for range 8 {
		q.WriteString(`SPAWN b: Big { body = $body } `)
	}
	eventually(t, "the overflow", func() bool {
		if _, err := query(u, q.String(), map[string]any{"body": body}); err != nil {
			t.Fatal(err)
		}
		return watchRow(t, u, `MATCH w: _Watch WHERE w.mode = "watch" RETURN w.status`) == `[["cancelled"]]`
	})
	// Reading now, the stream ends with the E8005 error event.
	rest, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(rest), `"code":"E8005"`) {
		t.Fatalf("the stream's end holds no E8005 event: ...%s", rest[max(0, len(rest)-300):])
	}
}

// TestResumeAheadOfTheServer: resuming after a position the server never reached is
// answered with a reset (E6002) and a fresh snapshot, and later commits arrive.
func TestResumeAheadOfTheServer(t *testing.T) {
	s := startServer(t, t.TempDir())
	u := s.URL()
	mustQuery(t, u, `SPAWN #a1: AJob { n = 1 }`)
	st := openWatchMode(t, u, `WATCH k: AJob RETURN k.n`, "99999999")
	read := func() wevent {
		t.Helper()
		select {
		case ev, ok := <-st.events:
			if !ok {
				t.Fatalf("the stream ended: %v", st.err)
			}
			return ev
		case <-time.After(eventWait):
			t.Fatalf("no event within %v", eventWait)
		}
		panic("unreachable")
	}
	if ev := read(); ev.Type != "reset" || ev.Code != "E6002" {
		t.Fatalf("first event %s, want a reset with E6002", ev)
	}
	if ev := read(); ev.Type != "initial" {
		t.Fatalf("after the reset: %s, want the snapshot", ev)
	}
	mustQuery(t, u, `SPAWN #a2: AJob { n = 2 }`)
	if ev := read(); ev.Type != "added" {
		t.Fatalf("after a new commit: %s, want added", ev)
	}
}
