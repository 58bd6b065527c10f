package lockqueue

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type env struct {
	t   *testing.T
	clk *clock.Manual
	eng *engine.Engine
	del *delivery.Service
	q   *Service
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clk := clock.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	eng, err := engine.Open(context.Background(), engine.Config{Backend: memstore.New(), Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	del := delivery.New(delivery.Config{Engine: eng, Logger: quiet})
	if err := del.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = del.Stop(context.Background())
		_ = eng.Close(context.Background())
	})
	return &env{t: t, clk: clk, eng: eng, del: del, q: New(eng, del)}
}

func (e *env) push(queue, item string, priority int64) {
	e.t.Helper()
	if _, err := e.q.Push(context.Background(), queue, json.RawMessage(item), priority); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) pop(queue string, o broker.PopOptions) broker.PopResult {
	e.t.Helper()
	res, err := e.q.Pop(context.Background(), queue, o)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func joined(items []json.RawMessage) string {
	s := make([]string, len(items))
	for i, it := range items {
		s[i] = string(it)
	}
	return strings.Join(s, ",")
}

// lockedDeliveries reads the handles of the leases held by a queue's lock.
func (e *env) lockedDeliveries(queue string) []delivery.Handle {
	e.t.Helper()
	lk, err := e.q.readLock(queue)
	if err != nil || lk == nil {
		e.t.Fatalf("lock of %s: %v %v", queue, lk, err)
	}
	return lk.deliveries
}

// A lease that ends before the acknowledgement (here: given back by hand) is reported
// as returned, not acknowledged, and its item is popped again.
func TestAcknowledgeReportsLeasesThatEnded(t *testing.T) {
	e := newEnv(t)
	e.push("q", `"a"`, 0)
	e.push("q", `"b"`, 1)
	res := e.pop("q", broker.PopOptions{Count: 2, RequireAck: true})
	ids := e.lockedDeliveries("q")
	if len(ids) != 2 {
		t.Fatalf("lock holds %v", ids)
	}
	if r := e.del.SettleHandles(context.Background(), ids[:1], delivery.Settle{Action: delivery.ActNack}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	ack, err := e.q.Acknowledge(context.Background(), "q", res.LockID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Acknowledged != 1 || ack.Returned != 1 {
		t.Fatalf("acknowledge %+v", ack)
	}
	if got := joined(e.pop("q", broker.PopOptions{Count: 5}).Items); got != `"a"` {
		t.Fatalf("after acknowledge: %s", got)
	}
}

// When every lease of a lock ended first, the acknowledgement is an expiry: Expired,
// the lock removed, the items back.
func TestAcknowledgeAllLeasesEnded(t *testing.T) {
	e := newEnv(t)
	e.push("q", `1`, 0)
	e.push("q", `2`, 0)
	res := e.pop("q", broker.PopOptions{Count: 2, RequireAck: true})
	for _, r := range e.del.SettleHandles(context.Background(), e.lockedDeliveries("q"), delivery.Settle{Action: delivery.ActNack}) {
		if err := r.Err; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.q.Acknowledge(context.Background(), "q", res.LockID); herald.CodeOf(err) != herald.CodeLockExpired {
		t.Fatalf("acknowledge: %v", err)
	}
	if lk, _ := e.q.readLock("q"); lk != nil {
		t.Fatal("lock left behind")
	}
	if got := joined(e.pop("q", broker.PopOptions{Count: 5}).Items); got != `1,2` {
		t.Fatalf("after acknowledge: %s", got)
	}
}

// The lock id is stored only as a hash; the lock node is ordinary (read-only) data.
func TestLockNode(t *testing.T) {
	e := newEnv(t)
	e.push("q", `{"k":1}`, 0)
	res := e.pop("q", broker.PopOptions{RequireAck: true, TTL: 7 * time.Second})
	if len(res.LockID) < 22 || !res.Locked {
		t.Fatalf("pop %+v", res)
	}
	err := e.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		n := tx.Node(lockNodeID("q"))
		if n == nil || n.Type != LockType {
			t.Fatalf("lock node %v", n)
		}
		for _, a := range n.Attrs {
			if a.Value.Kind() == herald.KindString && strings.Contains(a.Value.AsString(), res.LockID) {
				t.Fatalf("attribute %s holds the lock id", a.Name)
			}
		}
		if got := n.Attrs.Get("expires_at").AsTime(); !got.Equal(e.clk.Now().Add(7 * time.Second)) {
			t.Fatalf("expires_at %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.Exec(context.Background(), "", `MATCH l: _QueueLock RETURN l.queue`, nil); err != nil {
		t.Fatalf("locks are not readable: %v", err)
	}
}

// Items written through the query API are queue items too; a text that is not JSON comes
// back as a JSON string.
func TestItemsWrittenByHand(t *testing.T) {
	e := newEnv(t)
	if _, err := e.eng.Exec(context.Background(), "", `SPAWN i: QueueItem { queue = "q", item = "not json", priority = 0 }`, nil); err != nil {
		t.Fatal(err)
	}
	e.push("q", `[1, 2]`, 1)
	if got := joined(e.pop("q", broker.PopOptions{Count: 2}).Items); got != `"not json",[1,2]` {
		t.Fatalf("items %s", got)
	}
}

func TestValidationAndClamps(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, id := range []string{"", "a b", `a"b`, "a/b", strings.Repeat("x", broker.MaxQueueName+1), "é"} {
		if _, err := e.q.Push(ctx, id, json.RawMessage(`1`), 0); herald.CodeOf(err) != herald.CodeMalformedRequest {
			t.Errorf("push to %q: %v", id, err)
		}
		if _, err := e.q.Pop(ctx, id, broker.PopOptions{}); herald.CodeOf(err) != herald.CodeMalformedRequest {
			t.Errorf("pop of %q: %v", id, err)
		}
	}
	for _, id := range []string{"a", "my-queue", "A.b_c~d:e", strings.Repeat("x", broker.MaxQueueName)} {
		if !broker.ValidQueueName(id) {
			t.Errorf("broker.ValidQueueName(%q) = false", id)
		}
	}
	for _, item := range []string{``, `null`, `{`, `1 2`} {
		if _, err := e.q.Push(ctx, "q", json.RawMessage(item), 0); herald.CodeOf(err) != herald.CodeMalformedRequest {
			t.Errorf("push %q: %v", item, err)
		}
	}
	if _, err := e.q.Push(ctx, "q", json.RawMessage(`1`), -1); herald.CodeOf(err) != herald.CodeMalformedRequest {
		t.Errorf("negative priority: %v", err)
	}
	if _, err := e.q.Acknowledge(ctx, "q", ""); herald.CodeOf(err) != herald.CodeMalformedRequest {
		t.Errorf("empty lock id: %v", err)
	}
	for in, want := range map[time.Duration]time.Duration{0: broker.DefaultLockTTL, time.Millisecond: broker.MinLockTTL, 1500 * time.Millisecond: time.Second, time.Hour: broker.MaxLockTTL, -time.Second: broker.MinLockTTL} {
		if got := broker.ClampTTL(in); got != want {
			t.Errorf("broker.ClampTTL(%v) = %v, want %v", in, got, want)
		}
	}
	for in, want := range map[int]int{0: 1, -3: 1, 7: 7, 1000: broker.MaxPopCount} {
		if got := broker.ClampCount(in); got != want {
			t.Errorf("broker.ClampCount(%d) = %d, want %d", in, got, want)
		}
	}
}

// The contract's refusals are coded errors: a held queue is QUEUE_LOCKED with the
// lock's expiry in the chain, a queue without a lock NOT_FOUND.
func TestRefusalsAreCoded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.q.Acknowledge(ctx, "q", "lnope"); herald.CodeOf(err) != herald.CodeNotFound {
		t.Fatalf("acknowledge without a lock: %v", err)
	}
	e.push("q", `1`, 0)
	e.push("q", `2`, 0)
	res := e.pop("q", broker.PopOptions{RequireAck: true, TTL: 9 * time.Second})
	_, err := e.q.Pop(ctx, "q", broker.PopOptions{})
	var held *broker.LockHeld
	if herald.CodeOf(err) != herald.CodeQueueLocked || !errors.As(err, &held) || !held.ExpiresAt.Equal(res.LockExpiresAt) {
		t.Fatalf("pop of a held queue: %v (%v)", err, held)
	}
	if _, err := e.q.Acknowledge(ctx, "q", "lwrong"); herald.CodeOf(err) != herald.CodeMalformedRequest {
		t.Fatalf("wrong lock id: %v", err)
	}
}
