package e2e

// The seed document's remaining WATCH examples, end to end: watch management through a
// handle, and the inbox as the seed writes it (with #self, from a session bound to an
// actor). The windowed aggregation runs in server/watchmode_test.go, on an in-process
// server whose clock the test moves, so its ten-second window takes no time.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// openSession opens a server session and closes it at cleanup.
func openSession(t *testing.T, base string) string {
	t.Helper()
	resp, err := httpClient.Post(base+"/v1/sessions", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Session string `json:"session"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Session == "" {
		t.Fatalf("open session: status %d, %v", resp.StatusCode, err)
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, base+"/v1/sessions/"+out.Session, nil)
		if resp, err := httpClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return out.Session
}

// sessionQuery runs q in a server session and returns the answer, whatever its status.
func sessionQuery(t *testing.T, base, session, q string) *response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": q, "session": session})
	resp, err := httpClient.Post(base+"/v1/query", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer resp.Body.Close()
	var out response
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: status %d, undecodable body: %v", q, resp.StatusCode, err)
	}
	out.Status = resp.StatusCode
	return &out
}

func mustSessionQuery(t *testing.T, base, session, q string) *response {
	t.Helper()
	r := sessionQuery(t, base, session, q)
	if r.Status != 200 {
		t.Fatalf("%s: status %d, error %+v", q, r.Status, r.Error)
	}
	return r
}

// TestWatchSeedManagement is the seed's watch management example: a handle bound by
// `w = WATCH …`, then PAUSE, RESUME, ALTER … SET and CANCEL through that handle, with
// the _Watch node showing each state.
func TestWatchSeedManagement(t *testing.T) {
	s := startServer(t, t.TempDir())
	base := s.URL()
	sid := openSession(t, base)
	w := openWatchModeIn(t, base, sid, `w = WATCH t: Task WHERE t.status = "done"
      [mode: watch]
    RETURN t`, "")
	status := func() string {
		t.Helper()
		return rowsJSON(mustQuery(t, base, `MATCH x: _Watch WHERE x.handle = "w" RETURN x.status, x.buffer_size`), 0)
	}
	if got := status(); got != `[["active",1000]]` {
		t.Fatalf("_Watch after WATCH: %s", got)
	}
	watchWrite(t, base, `SPAWN #a: Task { status = "done" }`)
	if ev := w.next(t); ev.Type != "added" || ev.Match["id"] != "a" {
		t.Fatalf("got %s, want added #a", ev)
	}

	mustSessionQuery(t, base, sid, `PAUSE WATCH #w`)
	if got := status(); got != `[["paused",1000]]` {
		t.Fatalf("_Watch after PAUSE: %s", got)
	}
	seqB := watchWrite(t, base, `SPAWN #b: Task { status = "done" }`)
	select {
	case ev := <-w.events:
		t.Fatalf("a paused watch sent %s", ev)
	case <-time.After(200 * time.Millisecond):
	}

	mustSessionQuery(t, base, sid, `RESUME WATCH #w`)
	if ev := w.next(t); ev.Type != "added" || ev.Match["id"] != "b" || ev.Seq != seqB {
		t.Fatalf("after RESUME got %s at seq %d, want added #b at %d", ev, ev.Seq, seqB)
	}

	mustSessionQuery(t, base, sid, `ALTER WATCH #w SET [buffer: 2000]`)
	if got := status(); got != `[["active",2000]]` {
		t.Fatalf("_Watch after ALTER: %s", got)
	}

	mustSessionQuery(t, base, sid, `CANCEL WATCH #w`)
	select {
	case ev, ok := <-w.events:
		if ok && (ev.Type != "error" || ev.Code != "E8002") {
			t.Fatalf("after CANCEL got %s, want the stream to end", ev)
		}
	case <-time.After(eventWait):
		t.Fatal("the stream did not end after CANCEL")
	}
	if r := sessionQuery(t, base, sid, `PAUSE WATCH #w`); r.Status != http.StatusNotFound || r.Error == nil || r.Error.Code != "E8002" {
		t.Fatalf("PAUSE of a cancelled handle: status %d, error %+v; want 404 E8002", r.Status, r.Error)
	}
}

// TestConsumeSeedInboxSelf is the seed's point-to-point example as written: the schema,
// the send, and Bob's receive with `inbox(#self, m)` from a session bound to #bob, in
// consume mode ordered by sent_at, then the seed's full-options example. Ann's messages
// never reach Bob's streams.
func TestConsumeSeedInboxSelf(t *testing.T) {
	s := startServer(t, t.TempDir())
	base := s.URL()
	for _, q := range []string{
		`node Message { content: String, sent_at: Timestamp }`,
		`edge inbox(recipient: Actor, message: Message)`,
		`SPAWN #bob: Actor {}`,
		`SPAWN #ann: Actor {}`,
		`SPAWN m: Message { content = "for ann", sent_at = now() }
LINK inbox(#ann, m)`,
		`SPAWN m: Message { content = "hello", sent_at = now() }
LINK inbox(#bob, m)`,
		`SPAWN m: Message { content = "again", sent_at = now() }
LINK inbox(#bob, m)`,
	} {
		mustQuery(t, base, q)
	}
	sid := openSession(t, base)
	mustSessionQuery(t, base, sid, `BEGIN SESSION AS #bob`)
	st, err := openStreamIn(t.Context(), base, sid, `WATCH m: Message, inbox(#self, m)
  [mode: consume, ordering: attribute(m.sent_at ASC)]
RETURN m.content, m.sent_at`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	for _, want := range []string{"hello", "again"} {
		ev := st.nextConsumed(t)
		var m map[string]any
		if err := json.Unmarshal(ev.Match, &m); err != nil {
			t.Fatal(err)
		}
		if m["m.content"] != want {
			t.Fatalf("got %v, want %q", m, want)
		}
		mustSettle(t, base, "ACK", ev.DeliveryID, "")
	}
	if got := strings1(t, mustQuery(t, base, `MATCH m: Message RETURN m.content`)); len(got) != 1 || got[0] != "for ann" {
		t.Fatalf("messages left: %v, want only Ann's", got)
	}
	st.Close()

	// The seed's full-options example, verbatim, in the same session.
	mustQuery(t, base, `SPAWN m: Message { content = "third", sent_at = now() }
LINK inbox(#bob, m)`)
	full, err := openStreamIn(t.Context(), base, sid, `WATCH m: Message, inbox(#self, m)
  [mode: consume, group: "processors", ordering: attribute(m.sent_at ASC),
   delivery: reliable, ack_timeout: 30s, max_redeliveries: 3]
RETURN m.content, m.sent_at`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(full.Close)
	ev := full.nextConsumed(t)
	var m map[string]any
	if err := json.Unmarshal(ev.Match, &m); err != nil {
		t.Fatal(err)
	}
	if m["m.content"] != "third" {
		t.Fatalf("full-options watch got %v, want the third message", m)
	}
	mustSettle(t, base, "ACK", ev.DeliveryID, "")
}
