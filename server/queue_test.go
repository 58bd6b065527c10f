package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
)

// The queue REST API end to end: a real server on 127.0.0.1:0 over the in-memory store,
// with a manual clock so that lock expiry is stepped, not waited for.

var queueEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type queueEnv struct {
	t    *testing.T
	clk  *clock.Manual
	srv  *Server
	base string
}

func newQueueEnv(t *testing.T) *queueEnv {
	t.Helper()
	clk := clock.NewManual(queueEpoch)
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Clock: clk, Logger: quietLogger()})
	start(t, s)
	return &queueEnv{t: t, clk: clk, srv: s, base: "http://" + s.Addr()}
}

// call posts body (nil: none) to path and decodes the JSON answer.
func (e *queueEnv) call(path string, body any) (int, map[string]any) {
	e.t.Helper()
	var rd *bytes.Reader
	switch b := body.(type) {
	case nil:
		rd = bytes.NewReader(nil)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	resp, err := http.Post(e.base+path, "application/json", rd)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		e.t.Fatalf("POST %s: decoding the answer: %v", path, err)
	}
	return resp.StatusCode, out
}

func (e *queueEnv) push(queue string, item any, priority int) {
	e.t.Helper()
	code, body := e.call("/queue/"+queue+"/push", map[string]any{"item": item, "priority": priority})
	if code != http.StatusOK || body["success"] != true {
		e.t.Fatalf("push %v: %d %v", item, code, body)
	}
}

func (e *queueEnv) pop(queue, query string) (int, map[string]any) {
	e.t.Helper()
	path := "/queue/" + queue + "/pop"
	if query != "" {
		path += "?" + query
	}
	return e.call(path, nil)
}

func (e *queueEnv) ack(queue string, lockID any) (int, map[string]any) {
	e.t.Helper()
	return e.call("/queue/"+queue+"/acknowledge", map[string]any{"lock_id": lockID})
}

// items renders a pop answer's items as compact JSON.
func items(t *testing.T, body map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(body["items"])
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func wantStatus(t *testing.T, what string, code, want int, body map[string]any) {
	t.Helper()
	if code != want {
		t.Fatalf("%s: status %d, want %d; body %v", what, code, want, body)
	}
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Example 1: push, pop with acknowledgement, acknowledge.
func TestQueueBasicAcknowledgementFlow(t *testing.T) {
	e := newQueueEnv(t)
	e.push("my-queue", map[string]any{"task_id": 123, "action": "send_email"}, 0)

	code, body := e.pop("my-queue", "require_ack=true")
	wantStatus(t, "pop", code, 200, body)
	if got := items(t, body); got != `[{"action":"send_email","task_id":123}]` {
		t.Fatalf("items = %s", got)
	}
	if body["count"] != 1.0 || body["locked"] != true {
		t.Fatalf("pop answer %v", body)
	}
	lockID, _ := body["lock_id"].(string)
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{22,}$`).MatchString(lockID) {
		t.Fatalf("lock_id %q is not URL-safe with at least 128 bits", lockID)
	}
	if got, want := body["lock_expires_at"], unix(queueEpoch.Add(30*time.Second)); got != want {
		t.Fatalf("lock_expires_at = %v, want %v (the default 30 s)", got, want)
	}

	code, body = e.ack("my-queue", lockID)
	wantStatus(t, "acknowledge", code, 200, body)
	if body["success"] != true || body["items_acknowledged"] != 1.0 {
		t.Fatalf("acknowledge answer %v", body)
	}
	// The item is gone, the lock too.
	code, body = e.pop("my-queue", "")
	wantStatus(t, "pop after ack", code, 200, body)
	if body["count"] != 0.0 || items(t, body) != "[]" {
		t.Fatalf("queue not empty after ack: %v", body)
	}
	code, body = e.ack("my-queue", lockID)
	wantStatus(t, "second acknowledge", code, 404, body)
	if body["success"] != false || body["message"] == "" {
		t.Fatalf("404 answer %v", body)
	}
}

// Example 2 and edge case 1: while a lock is active, every pop answers 423.
func TestQueueLockPreventsConcurrentPops(t *testing.T) {
	e := newQueueEnv(t)
	e.push("test", "a", 0)
	e.push("test", "b", 0)
	code, body := e.pop("test", "require_ack=true&ttl_seconds=60")
	wantStatus(t, "first pop", code, 200, body)
	expires := unix(queueEpoch.Add(60 * time.Second))

	for _, q := range []string{"", "require_ack=true", "require_ack=false&count=5"} {
		code, body := e.pop("test", q)
		wantStatus(t, "pop while locked ("+q+")", code, 423, body)
		if body["lock_expires_at"] != expires || body["message"] == "" {
			t.Fatalf("423 answer %v", body)
		}
		if _, ok := body["items"]; ok {
			t.Fatalf("423 answer carries items: %v", body)
		}
	}
	// Other queues are not affected.
	e.push("other", "x", 0)
	code, body = e.pop("other", "")
	wantStatus(t, "pop of another queue", code, 200, body)

	// Concurrent pops with acknowledgement: exactly one wins the lock.
	e.push("race", 1, 0)
	e.push("race", 2, 0)
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(e.base+"/queue/race/pop?require_ack=true", "application/json", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	won := 0
	for _, c := range codes {
		switch c {
		case 200:
			won++
		case 423:
		default:
			t.Fatalf("concurrent pop answered %d", c)
		}
	}
	if won != 1 {
		t.Fatalf("%d concurrent pops got the lock, want 1 (codes %v)", won, codes)
	}
}

// Example 3 and edge cases 2 and 5: after expiry the acknowledge answers 410 and the
// item comes back to the next pop, ahead of later items of its priority.
func TestQueueExpiryThenRedelivery(t *testing.T) {
	e := newQueueEnv(t)
	e.push("test", "urgent", 0)
	e.push("test", "later", 2)
	code, body := e.pop("test", "require_ack=true&ttl_seconds=5")
	wantStatus(t, "pop", code, 200, body)
	if items(t, body) != `["urgent"]` || body["lock_expires_at"] != unix(queueEpoch.Add(5*time.Second)) {
		t.Fatalf("pop answer %v", body)
	}
	lockID := body["lock_id"].(string)

	e.clk.Advance(6 * time.Second)
	e.push("test", "urgent-2", 0) // pushed after the expired one, same priority

	code, body = e.ack("test", lockID)
	wantStatus(t, "late acknowledge", code, 410, body)
	if body["success"] != false || body["error_code"] != "LOCK_EXPIRED" || body["message"] == "" {
		t.Fatalf("410 answer %v", body)
	}
	// The lock is gone: a second try finds none.
	code, body = e.ack("test", lockID)
	wantStatus(t, "acknowledge after 410", code, 404, body)

	code, body = e.pop("test", "require_ack=true&count=10")
	wantStatus(t, "pop after expiry", code, 200, body)
	if got := items(t, body); got != `["urgent","urgent-2","later"]` {
		t.Fatalf("items after expiry = %s, want the expired item first at its priority", got)
	}
	code, body = e.ack("test", body["lock_id"])
	wantStatus(t, "acknowledge", code, 200, body)
	if body["items_acknowledged"] != 3.0 {
		t.Fatalf("acknowledge answer %v", body)
	}
}

// Expiry noticed by a pop (no acknowledge in between): the expired lock is cleared and
// its items are popped again in priority order.
func TestQueueExpiredLockClearedByPop(t *testing.T) {
	e := newQueueEnv(t)
	e.push("jobs", "p1", 1)
	e.push("jobs", "p0", 0)
	e.push("jobs", "p2", 2)
	code, body := e.pop("jobs", "require_ack=true&ttl_seconds=10&count=2")
	wantStatus(t, "pop", code, 200, body)
	if items(t, body) != `["p0","p1"]` {
		t.Fatalf("items %s", items(t, body))
	}
	first := body["lock_id"]

	e.clk.Advance(9 * time.Second)
	code, body = e.pop("jobs", "")
	wantStatus(t, "pop before expiry", code, 423, body)

	e.clk.Advance(1 * time.Second) // exactly at lock_expires_at: expired
	code, body = e.pop("jobs", "require_ack=true&count=3")
	wantStatus(t, "pop after expiry", code, 200, body)
	if got := items(t, body); got != `["p0","p1","p2"]` {
		t.Fatalf("items = %s", got)
	}
	second := body["lock_id"]
	if second == first {
		t.Fatal("the new lock reuses the old lock id")
	}
	code, body = e.ack("jobs", first)
	wantStatus(t, "old lock id", code, 400, body)
	code, body = e.ack("jobs", second)
	wantStatus(t, "acknowledge", code, 200, body)
	if body["items_acknowledged"] != 3.0 {
		t.Fatalf("acknowledge %v", body)
	}
}

// Example 4: a pop without acknowledgement removes items at once and creates no lock.
func TestQueueBackwardsCompatiblePop(t *testing.T) {
	e := newQueueEnv(t)
	for i := 1; i <= 6; i++ {
		e.push("test", map[string]any{"n": i}, 0)
	}
	code, body := e.pop("test", "")
	wantStatus(t, "pop", code, 200, body)
	if items(t, body) != `[{"n":1}]` || body["count"] != 1.0 {
		t.Fatalf("default pop %v", body)
	}
	for _, k := range []string{"locked", "lock_id", "lock_expires_at"} {
		if _, ok := body[k]; ok {
			t.Fatalf("plain pop answers %q: %v", k, body)
		}
	}
	code, body = e.pop("test", "count=5")
	wantStatus(t, "pop 5", code, 200, body)
	if items(t, body) != `[{"n":2},{"n":3},{"n":4},{"n":5},{"n":6}]` || body["count"] != 5.0 {
		t.Fatalf("pop 5 %v", body)
	}
	// Nothing is held: the queue is empty and not locked.
	code, body = e.pop("test", "require_ack=true")
	wantStatus(t, "pop of the empty queue", code, 200, body)
	code, body = e.ack("test", "anything")
	wantStatus(t, "acknowledge without a lock", code, 404, body)
}

// Edge case 4: an empty queue answers an unlocked empty result and creates no lock.
func TestQueueEmptyPopWithAck(t *testing.T) {
	e := newQueueEnv(t)
	code, body := e.pop("nothing-here", "require_ack=true")
	wantStatus(t, "pop", code, 200, body)
	if items(t, body) != "[]" || body["count"] != 0.0 || body["locked"] != false {
		t.Fatalf("empty pop %v", body)
	}
	if _, ok := body["lock_id"]; ok {
		t.Fatalf("empty pop carries a lock id: %v", body)
	}
	code, body = e.ack("nothing-here", "abc")
	wantStatus(t, "acknowledge", code, 404, body)
	e.push("nothing-here", "now", 0)
	code, body = e.pop("nothing-here", "require_ack=true")
	wantStatus(t, "pop after push", code, 200, body)
	if items(t, body) != `["now"]` || body["locked"] != true {
		t.Fatalf("pop %v", body)
	}
}

// Edge case 3: a wrong or missing lock id answers 400 and the lock stays active.
func TestQueueInvalidLockID(t *testing.T) {
	e := newQueueEnv(t)
	e.push("q", "x", 0)
	code, body := e.pop("q", "require_ack=true")
	wantStatus(t, "pop", code, 200, body)
	lockID := body["lock_id"].(string)

	for _, bad := range []any{"wrong", lockID + "x", ""} {
		code, body = e.ack("q", bad)
		wantStatus(t, fmt.Sprintf("acknowledge %q", bad), code, 400, body)
		if body["success"] != false || body["message"] == "" {
			t.Fatalf("400 answer %v", body)
		}
	}
	for _, raw := range []string{`{}`, `{"lock_id": null}`, `{"lock_id": 5}`, ``, `not json`} {
		code, body = e.call("/queue/q/acknowledge", raw)
		wantStatus(t, "acknowledge "+raw, code, 400, body)
		if body["success"] != false {
			t.Fatalf("400 answer %v", body)
		}
	}
	code, body = e.pop("q", "")
	wantStatus(t, "pop: the lock is still active", code, 423, body)

	code, body = e.ack("q", lockID)
	wantStatus(t, "acknowledge", code, 200, body)
	if body["items_acknowledged"] != 1.0 {
		t.Fatalf("acknowledge %v", body)
	}
}

// Priorities across several levels: 0 first, then 1, …; push order within a level.
func TestQueuePriorityLevels(t *testing.T) {
	e := newQueueEnv(t)
	pushes := []struct {
		item     string
		priority int
	}{{"c1", 3}, {"a1", 1}, {"z1", 0}, {"b1", 2}, {"a2", 1}, {"z2", 0}, {"c2", 3}, {"b2", 2}}
	for _, p := range pushes {
		e.push("prio", p.item, p.priority)
	}
	var got []string
	for range pushes {
		code, body := e.pop("prio", "require_ack=true")
		wantStatus(t, "pop", code, 200, body)
		got = append(got, body["items"].([]any)[0].(string))
		code, body = e.ack("prio", body["lock_id"])
		wantStatus(t, "acknowledge", code, 200, body)
	}
	if s := strings.Join(got, ","); s != "z1,z2,a1,a2,b1,b2,c1,c2" {
		t.Fatalf("order %s", s)
	}
	// A priority omitted is 0, the highest.
	e.push("prio", "low", 5)
	code, body := e.call("/queue/prio/push", `{"item": "default"}`)
	wantStatus(t, "push without priority", code, 200, body)
	if body["priority"] != 0.0 {
		t.Fatalf("push answer %v", body)
	}
	code, body = e.pop("prio", "count=2")
	wantStatus(t, "pop", code, 200, body)
	if items(t, body) != `["default","low"]` {
		t.Fatalf("items %s", items(t, body))
	}
}

// Several expiries in a row, then an acknowledge after expiry: nothing is ever lost,
// and the items are still ordinary QueueItem nodes (no dead letters).
func TestQueueNothingLostAfterLateAcknowledge(t *testing.T) {
	e := newQueueEnv(t)
	for i := 0; i < 6; i++ {
		e.push("keep", map[string]any{"i": i}, i%3)
	}
	for round := 0; round < 6; round++ {
		code, body := e.pop("keep", "require_ack=true&ttl_seconds=1&count=4")
		wantStatus(t, "pop", code, 200, body)
		if got := items(t, body); got != `[{"i":0},{"i":3},{"i":1},{"i":4}]` {
			t.Fatalf("round %d: items %s", round, got)
		}
		e.clk.Advance(2 * time.Second)
		code, body = e.ack("keep", body["lock_id"])
		wantStatus(t, "late acknowledge", code, 410, body)
	}
	code, body := post(t, e.srv.Addr(), `MATCH i: QueueItem WHERE i.queue = "keep" RETURN COUNT(*) AS n`)
	if code != 200 {
		t.Fatalf("match: %d %v", code, body)
	}
	if n := body["results"].([]any)[0].(map[string]any)["rows"].([]any)[0].([]any)[0]; n != 6.0 {
		t.Fatalf("%v items left, want 6", n)
	}
	code, body = post(t, e.srv.Addr(), `MATCH d: _DeadLetter RETURN COUNT(*) AS n`)
	if n := body["results"].([]any)[0].(map[string]any)["rows"].([]any)[0].([]any)[0]; code != 200 || n != 0.0 {
		t.Fatalf("dead letters: %d %v", code, body)
	}
	code, body = e.pop("keep", "count=100")
	wantStatus(t, "final pop", code, 200, body)
	if got := items(t, body); got != `[{"i":0},{"i":3},{"i":1},{"i":4},{"i":2},{"i":5}]` {
		t.Fatalf("items %s", got)
	}
}

// TTL bounds: ttl_seconds is clamped to 1–300.
func TestQueueTTLClamped(t *testing.T) {
	e := newQueueEnv(t)
	for _, c := range []struct {
		ttl  string
		want time.Duration
	}{{"0", time.Second}, {"-7", time.Second}, {"1000", 300 * time.Second}, {"99999999999999999", 300 * time.Second}, {"45", 45 * time.Second}} {
		e.push("ttl", "x", 0)
		code, body := e.pop("ttl", "require_ack=true&ttl_seconds="+c.ttl)
		wantStatus(t, "pop ttl "+c.ttl, code, 200, body)
		if body["lock_expires_at"] != unix(e.clk.Now().Add(c.want)) {
			t.Fatalf("ttl %s: lock_expires_at %v, want now + %v", c.ttl, body["lock_expires_at"], c.want)
		}
		code, body = e.ack("ttl", body["lock_id"])
		wantStatus(t, "acknowledge", code, 200, body)
	}
}

// Malformed requests answer 400 with the contract's body.
func TestQueueBadRequests(t *testing.T) {
	e := newQueueEnv(t)
	for _, c := range []struct{ path, body string }{
		{"/queue/q/push", `{"priority": 1}`},
		{"/queue/q/push", `{"item": null}`},
		{"/queue/q/push", `{"item": 1, "priority": -1}`},
		{"/queue/q/push", `{"item": 1, "priority": 1.5}`},
		{"/queue/q/push", `{"item": 1, "priority": "high"}`},
		{"/queue/q/push", `{"item": 1, "priority": "0"}`},
		{"/queue/q/push", `[1]`},
		{"/queue/q/push", `{"item": `},
		{"/queue/q/push", ``},
		{"/queue/bad%20id/push", `{"item": 1}`},
		{"/queue/q/pop?require_ack=maybe", ``},
		{"/queue/q/pop?ttl_seconds=ten", ``},
		{"/queue/q/pop?count=all", ``},
	} {
		code, body := e.call(c.path, c.body)
		if code != 400 || body["success"] != false || body["message"] == "" || body["error_code"] != "E4001" {
			t.Fatalf("%s %s: %d %v", c.path, c.body, code, body)
		}
	}
	resp, err := http.Get(e.base + "/queue/q/pop")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET pop: %d", resp.StatusCode)
	}
}

// Queues are ordinary data: visible with MATCH, any JSON value is an item.
func TestQueueItemsAreGraphData(t *testing.T) {
	e := newQueueEnv(t)
	e.push("data", map[string]any{"nested": []any{1, "two", nil}}, 4)
	e.push("data", 42.5, 1)
	code, body := post(t, e.srv.Addr(), `MATCH i: QueueItem WHERE i.queue = "data" RETURN i.item, i.priority ORDER BY i.priority`)
	if code != 200 {
		t.Fatalf("match: %d %v", code, body)
	}
	rows, _ := json.Marshal(body["results"].([]any)[0].(map[string]any)["rows"])
	if string(rows) != `[["42.5",1],["{\"nested\":[1,\"two\",null]}",4]]` {
		t.Fatalf("rows %s", rows)
	}
	code, body = e.pop("data", "count=2")
	wantStatus(t, "pop", code, 200, body)
	if items(t, body) != `[42.5,{"nested":[1,"two",null]}]` {
		t.Fatalf("items %s", items(t, body))
	}
}

// Edge case 6: the lock and its leases are durable; after a restart the lock is still
// active, and it can be acknowledged.
func TestQueueLockSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewManual(queueEpoch)
	s := New(Config{DataDir: dir, Listen: "127.0.0.1:0", Clock: clk, Logger: quietLogger()})
	start(t, s)
	e := &queueEnv{t: t, clk: clk, srv: s, base: "http://" + s.Addr()}
	e.push("durable", "a", 0)
	e.push("durable", "b", 1)
	code, body := e.pop("durable", "require_ack=true&ttl_seconds=60")
	wantStatus(t, "pop", code, 200, body)
	lockID := body["lock_id"]
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	s2 := New(Config{DataDir: dir, Listen: "127.0.0.1:0", Clock: clk, Logger: quietLogger()})
	start(t, s2)
	e.srv, e.base = s2, "http://"+s2.Addr()
	code, body = e.pop("durable", "")
	wantStatus(t, "pop after restart", code, 423, body)
	code, body = e.ack("durable", lockID)
	wantStatus(t, "acknowledge after restart", code, 200, body)
	code, body = e.pop("durable", "count=5")
	wantStatus(t, "pop", code, 200, body)
	if items(t, body) != `["b"]` {
		t.Fatalf("items %s", items(t, body))
	}
}

// After a restart an expired lock still returns its items, in priority order.
func TestQueueExpiryAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewManual(queueEpoch)
	s := New(Config{DataDir: dir, Listen: "127.0.0.1:0", Clock: clk, Logger: quietLogger()})
	start(t, s)
	e := &queueEnv{t: t, clk: clk, srv: s, base: "http://" + s.Addr()}
	e.push("durable", "a", 0)
	e.push("durable", "b", 1)
	e.push("durable", "c", 2)
	code, body := e.pop("durable", "require_ack=true&ttl_seconds=5&count=2")
	wantStatus(t, "pop", code, 200, body)
	lockID := body["lock_id"]
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)

	s2 := New(Config{DataDir: dir, Listen: "127.0.0.1:0", Clock: clk, Logger: quietLogger()})
	start(t, s2)
	e.srv, e.base = s2, "http://"+s2.Addr()
	code, body = e.ack("durable", lockID)
	wantStatus(t, "late acknowledge after restart", code, 410, body)
	code, body = e.pop("durable", "count=5")
	wantStatus(t, "pop", code, 200, body)
	if items(t, body) != `["a","b","c"]` {
		t.Fatalf("items %s", items(t, body))
	}
}
