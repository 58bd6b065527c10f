package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
)

type wireEv struct {
	Type  string         `json:"type"`
	Match map[string]any `json:"match"`
	Prev  map[string]any `json:"prev"`
	Seq   uint64         `json:"seq"`
}

func openWatch(t *testing.T, ctx context.Context, addr, stmt, lastEventID string) *bufio.Reader {
	t.Helper()
	q := url.Values{"query": {stmt}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/watch?"+q.Encode(), nil)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("watch: status %d", resp.StatusCode)
	}
	return bufio.NewReader(resp.Body)
}

func nextEv(t *testing.T, r *bufio.Reader) wireEv {
	t.Helper()
	typ, data := readSSE(t, r)
	var ev wireEv
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if ev.Type != typ {
		t.Fatalf("event line %q, data type %q", typ, ev.Type)
	}
	return ev
}

// TestWatchModeOverSSE is the watch-mode acceptance: WATCH t: Task WHERE t.status =
// "done" RETURN t streams an initial snapshot, then added, changed and removed; a client
// reconnecting with Last-Event-ID gets exactly what it missed.
func TestWatchModeOverSSE(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger()})
	start(t, s)
	addr := s.Addr()
	post(t, addr, `SPAWN #t1: Task { status = "done", title = "a" }; SPAWN #t2: Task { status = "todo", title = "b" }`)

	ctx, cancel := context.WithCancel(context.Background())
	const stmt = `WATCH t: Task WHERE t.status = "done" [delivery: reliable] RETURN t`
	r := openWatch(t, ctx, addr, stmt, "")
	if ev := nextEv(t, r); ev.Type != "initial" || ev.Match["id"] != "t1" {
		t.Fatalf("initial: %+v", ev)
	}
	post(t, addr, `MATCH t: Task WHERE t.id = "t2" SET t.status = "done";`)
	if ev := nextEv(t, r); ev.Type != "added" || ev.Match["id"] != "t2" {
		t.Fatalf("added: %+v", ev)
	}
	post(t, addr, `MATCH t: Task WHERE t.id = "t1" SET t.title = "z";`)
	ev := nextEv(t, r)
	if ev.Type != "changed" || ev.Match["title"] != "z" || ev.Prev["title"] != "a" {
		t.Fatalf("changed: %+v", ev)
	}
	last := ev.Seq
	cancel() // disconnect

	post(t, addr, `KILL #t2; MATCH t: Task WHERE t.id = "t1" SET t.status = "todo";`)
	post(t, addr, `SPAWN #t3: Task { status = "done", title = "c" }`)

	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	r2 := openWatch(t, ctx2, addr, stmt, itoa(last))
	want := []struct{ typ, id string }{{"removed", "t2"}, {"removed", "t1"}, {"added", "t3"}}
	for _, w := range want {
		if ev := nextEv(t, r2); ev.Type != w.typ || ev.Match["id"] != w.id || ev.Seq <= last {
			t.Fatalf("after resume: got %+v, want %s %s", ev, w.typ, w.id)
		}
	}
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestWatchSeedWindowedAggregation is the seed's windowed aggregation verbatim, over
// SSE: task stats of one project every ten seconds, over a join. The server's clock is
// moved by the test, so the windows close without waiting.
func TestWatchSeedWindowedAggregation(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Clock: clk, Logger: quietLogger()})
	start(t, s)
	addr := s.Addr()
	post(t, addr, `SPAWN #project_1: Project {}; SPAWN #project_2: Project {}`)
	post(t, addr, `SPAWN #t1: Task { status = "todo", priority = 2 } LINK belongs_to(#t1, #project_1)`)
	post(t, addr, `SPAWN #t9: Task { status = "done", priority = 50 } LINK belongs_to(#t9, #project_2)`)
	r := openWatch(t, t.Context(), addr, `WATCH t: Task, belongs_to(t, #project_1)
  [window: tumbling(10s)]
RETURN COUNT(t) AS total,
       COUNT(t WHERE t.status = "done") AS done,
       AVG(t.priority) AS avg_priority`, "")
	post(t, addr, `SPAWN #t2: Task { status = "done", priority = 4 } LINK belongs_to(#t2, #project_1)`)
	post(t, addr, `MATCH t: Task WHERE t.id = "t1" SET t.priority = 6;`)
	post(t, addr, `MATCH t: Task WHERE t.id = "t9" SET t.priority = 60;`) // another project's task
	window := func(what string, total, done float64, avg any) {
		t.Helper()
		ev := nextEv(t, r)
		if ev.Type != "window" || ev.Match["total"] != total || ev.Match["done"] != done || ev.Match["avg_priority"] != avg {
			t.Fatalf("%s: got %+v, want total %v, done %v, avg_priority %v", what, ev, total, done, avg)
		}
	}
	clk.Advance(10 * time.Second)
	window("first window", 2, 1, 5.0)
	post(t, addr, `MATCH t: Task WHERE t.id = "t1" SET t.status = "done";`)
	clk.Advance(10 * time.Second)
	window("second window", 1, 1, 6.0)
	clk.Advance(10 * time.Second)
	window("an empty window", 0, 0, nil)
}
