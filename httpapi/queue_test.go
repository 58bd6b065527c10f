package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// fakeQueue records the last call and answers with canned results.
type fakeQueue struct {
	queueID  string
	item     json.RawMessage
	priority int64
	opts     broker.PopOptions
	lockID   string

	push     broker.PushResult
	pop      broker.PopResult
	ack      broker.AckResult
	released int
	err      error
}

func (f *fakeQueue) Push(ctx context.Context, queueID string, item json.RawMessage, priority int64) (broker.PushResult, error) {
	f.queueID, f.item, f.priority = queueID, item, priority
	return f.push, f.err
}

func (f *fakeQueue) Pop(ctx context.Context, queueID string, o broker.PopOptions) (broker.PopResult, error) {
	f.queueID, f.opts = queueID, o
	return f.pop, f.err
}

func (f *fakeQueue) Acknowledge(ctx context.Context, queueID, lockID string) (broker.AckResult, error) {
	f.queueID, f.lockID = queueID, lockID
	return f.ack, f.err
}

func (f *fakeQueue) Release(ctx context.Context, queueID, lockID string) (int, error) {
	f.queueID, f.lockID = queueID, lockID
	return f.released, f.err
}

func queueHandlerFor(t *testing.T, q *fakeQueue) http.Handler {
	return newTestHandler(t, &fakeEngine{}, Options{MaxBodyBytes: 256}, q)
}

func answer(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return m
}

func TestQueuePushRoute(t *testing.T) {
	f := &fakeQueue{push: broker.PushResult{ID: "n1", Priority: 3}}
	h := queueHandlerFor(t, f)
	w := do(t, h, http.MethodPost, "/queue/jobs/push", `{"item": {"a": [1, 2]}, "priority": 3, "extra": true}`)
	if w.Code != 200 {
		t.Fatalf("push: %d %s", w.Code, w.Body)
	}
	if f.queueID != "jobs" || string(f.item) != `{"a": [1, 2]}` || f.priority != 3 {
		t.Fatalf("push call %q %s %d", f.queueID, f.item, f.priority)
	}
	m := answer(t, w.Body.String())
	if m["success"] != true || m["id"] != "n1" || m["priority"] != 3.0 {
		t.Fatalf("push answer %v", m)
	}
	w = do(t, h, http.MethodPost, "/queue/jobs/push", `{"item": 1, "priority": null}`)
	if w.Code != 200 || f.priority != 0 {
		t.Fatalf("null priority: %d %d", w.Code, f.priority)
	}
	w = do(t, h, http.MethodPost, "/queue/jobs/push", `{"item": "`+strings.Repeat("x", 300)+`"}`)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("large body: %d %s", w.Code, w.Body)
	}
}

func TestQueuePopRoute(t *testing.T) {
	at := time.Unix(1709139275, 500_000_000)
	f := &fakeQueue{pop: broker.PopResult{Items: []json.RawMessage{json.RawMessage(`{"id":1}`)}, Locked: true, LockID: "abc", LockExpiresAt: at}}
	h := queueHandlerFor(t, f)

	w := do(t, h, http.MethodPost, "/queue/q/pop?require_ack=true&ttl_seconds=60&count=4", "")
	if w.Code != 200 {
		t.Fatalf("pop: %d %s", w.Code, w.Body)
	}
	if f.opts != (broker.PopOptions{Count: 4, RequireAck: true, TTL: time.Minute}) {
		t.Fatalf("pop options %+v", f.opts)
	}
	if got := strings.TrimSpace(w.Body.String()); got != `{"items":[{"id":1}],"count":1,"locked":true,"lock_id":"abc","lock_expires_at":1709139275.5}` {
		t.Fatalf("pop answer %s", got)
	}

	f.pop = broker.PopResult{}
	w = do(t, h, http.MethodPost, "/queue/q/pop?require_ack=1", "")
	if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != `{"items":[],"count":0,"locked":false}` {
		t.Fatalf("empty pop with ack: %d %s", w.Code, got)
	}
	w = do(t, h, http.MethodPost, "/queue/q/pop", "")
	if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != `{"items":[],"count":0}` {
		t.Fatalf("plain pop: %d %s", w.Code, got)
	}
	if f.opts != (broker.PopOptions{}) {
		t.Fatalf("plain pop options %+v", f.opts)
	}
	// Out-of-range numbers are clamped before they reach the service.
	do(t, h, http.MethodPost, "/queue/q/pop?require_ack=true&ttl_seconds=99999999999999&count=-4", "")
	if f.opts.TTL != broker.MaxLockTTL || f.opts.Count != 1 {
		t.Fatalf("clamped options %+v", f.opts)
	}

	f.err = &herald.Error{Code: herald.CodeQueueLocked, Message: "held", Err: &broker.LockHeld{ExpiresAt: at}}
	w = do(t, h, http.MethodPost, "/queue/q/pop", "")
	if got := strings.TrimSpace(w.Body.String()); w.Code != http.StatusLocked || got != `{"message":"held","lock_expires_at":1709139275.5}` {
		t.Fatalf("locked: %d %s", w.Code, got)
	}
}

func TestQueueAcknowledgeRoute(t *testing.T) {
	f := &fakeQueue{ack: broker.AckResult{Acknowledged: 2}}
	h := queueHandlerFor(t, f)
	w := do(t, h, http.MethodPost, "/queue/q/acknowledge", `{"lock_id": "abc"}`)
	m := answer(t, w.Body.String())
	if w.Code != 200 || f.lockID != "abc" || m["success"] != true || m["items_acknowledged"] != 2.0 || m["message"] == "" {
		t.Fatalf("acknowledge: %d %v", w.Code, m)
	}
	if _, ok := m["items_returned"]; ok {
		t.Fatalf("items_returned without returns: %v", m)
	}
	f.ack = broker.AckResult{Acknowledged: 1, Returned: 1}
	w = do(t, h, http.MethodPost, "/queue/q/acknowledge", `{"lock_id": "abc"}`)
	if m := answer(t, w.Body.String()); m["items_acknowledged"] != 1.0 || m["items_returned"] != 1.0 {
		t.Fatalf("partial acknowledge: %v", m)
	}
	for kind, want := range map[herald.Code]int{herald.CodeMalformedRequest: 400, herald.CodeNotFound: 404, herald.CodeLockExpired: 410} {
		f.err = herald.Errorf(kind, "no")
		w = do(t, h, http.MethodPost, "/queue/q/acknowledge", `{"lock_id": "abc"}`)
		m := answer(t, w.Body.String())
		if w.Code != want || m["success"] != false || m["message"] != "no" {
			t.Fatalf("code %s: %d %v", kind, w.Code, m)
		}
		if code := m["error_code"]; code != map[herald.Code]string{herald.CodeMalformedRequest: "E4001", herald.CodeNotFound: "E4007", herald.CodeLockExpired: "LOCK_EXPIRED"}[kind] {
			t.Fatalf("code %s: error_code %v", kind, m)
		}
	}
	// A server fault goes through the error table.
	f.err = herald.Errorf(herald.CodeShuttingDown, "closing")
	w = do(t, h, http.MethodPost, "/queue/q/acknowledge", `{"lock_id": "abc"}`)
	if d := decodeError(t, w); w.Code != 503 || d.Code != herald.CodeShuttingDown {
		t.Fatalf("fault: %d %+v", w.Code, d)
	}
}

func TestQueueWithoutService(t *testing.T) {
	h := newTestHandler(t, &fakeEngine{}, Options{})
	w := do(t, h, http.MethodPost, "/queue/q/pop", "")
	if d := decodeError(t, w); d.Code != herald.CodeNotImplemented {
		t.Fatalf("no queue service: %d %+v", w.Code, d)
	}
}
