package namedqueue

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/graph"
)

var bg = context.Background()

func (e *env) create(c broker.QueueConfig) broker.QueueConfig {
	e.t.Helper()
	got, err := e.q.CreateQueue(bg, c)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

func (e *env) enqueue(queue string, m broker.QueueMessage) herald.NodeID {
	e.t.Helper()
	id, err := e.q.Enqueue(bg, queue, m)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) receive(queue string, n int) []broker.Delivered {
	e.t.Helper()
	got, err := e.q.Receive(bg, queue, n)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

func (e *env) receiveOne(queue string) broker.Delivered {
	e.t.Helper()
	got := e.receive(queue, 1)
	if len(got) != 1 {
		e.t.Fatalf("received %d messages, want 1", len(got))
	}
	return got[0]
}

// deliveryState reads a message's durable delivery record: whether it exists, its
// attempts, and whether it still holds a lease (a handle and a deadline).
func (e *env) deliveryState(id herald.NodeID) (exists bool, attempts int64, leased bool) {
	e.t.Helper()
	recs, err := delivery.Records(e.eng)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, r := range recs {
		if r.Subject != id {
			continue
		}
		if r.Leased == r.Deadline.IsZero() {
			e.t.Errorf("the delivery record of %s: leased=%v, deadline %v: the lease and its expiry must go together", id, r.Leased, r.Deadline)
		}
		return true, int64(r.Attempts), r.Leased
	}
	return false, 0, false
}

func wantCode(t *testing.T, err error, code herald.Code) {
	t.Helper()
	if herald.CodeOf(err) != code {
		t.Fatalf("err = %v (%s), want %s", err, herald.CodeOf(err), code)
	}
}

// Enqueue → lease → nack → lease again: the attempt count is up by one, and the
// message (payload, headers, key, priority) is the same.
func TestRPCNackRequeuesWithAttemptCountIncremented(t *testing.T) {
	e := newEnv(t)
	e.create(broker.QueueConfig{Name: "jobs"})
	id := e.enqueue("jobs", broker.QueueMessage{Payload: []byte("hello"), Headers: map[string]string{"k": "v"}, FairnessKey: "tenant-a", Priority: 2})

	first := e.receiveOne("jobs")
	if first.ID != id || first.Attempt != 1 || !bytes.Equal(first.Payload, []byte("hello")) || first.Headers["k"] != "v" || first.FairnessKey != "tenant-a" || first.Priority != 2 || first.Weight != 1 {
		t.Fatalf("first delivery = %+v", first)
	}
	if !first.Deadline.Equal(e.clk.Now().Add(DefaultVisibilityTimeout)) {
		t.Fatalf("deadline = %v, want now + %v", first.Deadline, DefaultVisibilityTimeout)
	}
	if err := e.q.NackMessage(bg, "jobs", id, broker.QueueNack{}); err != nil {
		t.Fatal(err)
	}
	second := e.receiveOne("jobs")
	if second.ID != id || second.Attempt != 2 || !bytes.Equal(second.Payload, []byte("hello")) {
		t.Fatalf("after nack = %+v, want the same message at attempt 2", second)
	}
	if err := e.q.NackMessage(bg, "jobs", id, broker.QueueNack{}); err != nil {
		t.Fatal(err)
	}
	if third := e.receiveOne("jobs"); third.Attempt != 3 {
		t.Fatalf("after a second nack attempt = %d, want 3", third.Attempt)
	}
}

// Without max_attempts a queue has no attempt limit: a message nacked far more often
// than a consume watch's default redelivery limit keeps coming back, its attempt count
// rising, and nothing is dead-lettered.
func TestRPCNoAttemptLimitByDefault(t *testing.T) {
	e := newEnv(t)
	if cfg := e.create(broker.QueueConfig{Name: "jobs"}); cfg.MaxAttempts != 0 {
		t.Fatalf("max attempts = %d, want 0 (no limit)", cfg.MaxAttempts)
	}
	id := e.enqueue("jobs", broker.QueueMessage{Payload: []byte("again")})
	const nacks = 25
	for attempt := 1; attempt <= nacks; attempt++ {
		if d := e.receiveOne("jobs"); d.ID != id || d.Attempt != attempt {
			t.Fatalf("delivery %+v, want %s at attempt %d", d, id, attempt)
		}
		if err := e.q.NackMessage(bg, "jobs", id, broker.QueueNack{}); err != nil {
			t.Fatal(err)
		}
	}
	if d := e.receiveOne("jobs"); d.Attempt != nacks+1 {
		t.Fatalf("attempt = %d, want %d", d.Attempt, nacks+1)
	}
	resp, err := e.eng.Exec(bg, "", `MATCH d: _DeadLetter RETURN COUNT(d)`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := resp.Results[0].Rows[0][0].AsInt(); n != 0 {
		t.Fatalf("%d dead letters, want none", n)
	}
}

// A nack ends the lease and its expiry in one commit: afterwards the message's
// delivery record holds neither a lease nor a deadline, only the attempt count, and
// the old lease can no longer be settled or expire.
func TestRPCNackRemovesLeaseAndExpiry(t *testing.T) {
	e := newEnv(t)
	e.create(broker.QueueConfig{Name: "jobs", VisibilityTimeout: 5 * time.Second})
	id := e.enqueue("jobs", broker.QueueMessage{Payload: []byte("x")})
	e.receiveOne("jobs")
	if exists, attempts, leased := e.deliveryState(id); !exists || !leased || attempts != 1 {
		t.Fatalf("while leased: exists=%v attempts=%d leased=%v", exists, attempts, leased)
	}
	if _, _, ok := e.del.LeaseOf(id); !ok {
		t.Fatal("LeaseOf finds no lease while leased")
	}
	if err := e.q.NackMessage(bg, "jobs", id, broker.QueueNack{Delay: time.Minute}); err != nil {
		t.Fatal(err)
	}
	exists, attempts, leased := e.deliveryState(id)
	if !exists || leased || attempts != 1 {
		t.Fatalf("after nack: exists=%v attempts=%d leased=%v; want the attempt recorded and no lease", exists, attempts, leased)
	}
	if _, _, ok := e.del.LeaseOf(id); ok {
		t.Fatal("LeaseOf still finds a lease after the nack")
	}
	// The old lease's expiry is gone too: passing its deadline changes nothing, and the
	// message stays held by the nack's delay.
	e.clk.Advance(10 * time.Second)
	e.del.Flush()
	if got := e.receive("jobs", 1); len(got) != 0 {
		t.Fatalf("received %+v during the nack delay", got)
	}
	if _, attempts, leased := e.deliveryState(id); leased || attempts != 1 {
		t.Fatalf("after the old deadline: attempts=%d leased=%v", attempts, leased)
	}
	e.clk.Advance(time.Minute)
	if d := e.receiveOne("jobs"); d.ID != id || d.Attempt != 2 {
		t.Fatalf("after the delay: %+v", d)
	}
}

// Settling an unknown message id, a message of another queue, a message that is not
// leased, or one already settled answers not_found (E8004) and changes nothing.
func TestRPCSettleUnknownMessageIsNotFound(t *testing.T) {
	e := newEnv(t)
	e.create(broker.QueueConfig{Name: "jobs"})
	e.create(broker.QueueConfig{Name: "other"})
	waiting := e.enqueue("jobs", broker.QueueMessage{Payload: []byte("w")})

	for _, id := range []herald.NodeID{"nope", waiting} {
		wantCode(t, e.q.NackMessage(bg, "jobs", id, broker.QueueNack{}), herald.CodeInvalidDeliveryID)
		wantCode(t, e.q.AckMessage(bg, "jobs", id), herald.CodeInvalidDeliveryID)
		_, err := e.q.ExtendMessage(bg, "jobs", id, time.Second)
		wantCode(t, err, herald.CodeInvalidDeliveryID)
	}
	d := e.receiveOne("jobs")
	wantCode(t, e.q.AckMessage(bg, "other", d.ID), herald.CodeInvalidDeliveryID)
	if err := e.q.AckMessage(bg, "jobs", d.ID); err != nil {
		t.Fatal(err)
	}
	// Idempotent: the repeated ack and a late nack are not_found, without side effects.
	wantCode(t, e.q.AckMessage(bg, "jobs", d.ID), herald.CodeInvalidDeliveryID)
	wantCode(t, e.q.NackMessage(bg, "jobs", d.ID, broker.QueueNack{}), herald.CodeInvalidDeliveryID)
	if exists, _, _ := e.deliveryState(d.ID); exists {
		t.Fatal("an acknowledged message keeps a delivery record")
	}
	if got := e.receive("jobs", 1); len(got) != 0 {
		t.Fatalf("an acknowledged message came back: %+v", got)
	}
	// Unknown queues.
	wantCode(t, e.q.AckMessage(bg, "missing", d.ID), herald.CodeInvalidDeliveryID)
	_, err := e.q.Enqueue(bg, "missing", broker.QueueMessage{})
	wantCode(t, err, herald.CodeNodeNotFound)
	_, err = e.q.Receive(bg, "missing", 1)
	wantCode(t, err, herald.CodeNodeNotFound)
}

// Nack, then lease again and ack: the message is gone, with its delivery state.
func TestRPCNackThenAckCompletesLifecycle(t *testing.T) {
	e := newEnv(t)
	e.create(broker.QueueConfig{Name: "jobs"})
	id := e.enqueue("jobs", broker.QueueMessage{Payload: []byte("once")})
	e.receiveOne("jobs")
	if err := e.q.NackMessage(bg, "jobs", id, broker.QueueNack{}); err != nil {
		t.Fatal(err)
	}
	d := e.receiveOne("jobs")
	if d.Attempt != 2 {
		t.Fatalf("attempt = %d, want 2", d.Attempt)
	}
	if err := e.q.AckMessage(bg, "jobs", id); err != nil {
		t.Fatal(err)
	}
	err := e.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		if tx.Node(id) != nil {
			t.Error("the acknowledged message still exists")
		}
		return nil
	})
	if exists, _, _ := e.deliveryState(id); exists {
		t.Error("the acknowledged message's delivery record still exists")
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := e.receive("jobs", 1); len(got) != 0 {
		t.Fatalf("received %+v from an empty queue", got)
	}
}

// An expired lease counts as an attempt, like a nack.
func TestRPCExpiryIncrementsAttemptCount(t *testing.T) {
	e := newEnv(t)
	e.create(broker.QueueConfig{Name: "jobs", VisibilityTimeout: 2 * time.Second})
	id := e.enqueue("jobs", broker.QueueMessage{})
	if d := e.receiveOne("jobs"); d.Attempt != 1 {
		t.Fatalf("attempt = %d", d.Attempt)
	}
	deadline := e.clk.Now().Add(2 * time.Second)
	ext, err := e.q.ExtendMessage(bg, "jobs", id, 10*time.Second)
	if err != nil || !ext.Equal(e.clk.Now().Add(10*time.Second)) {
		t.Fatalf("extend = %v, %v", ext, err)
	}
	e.clk.Set(deadline)
	e.del.Flush()
	if got := e.receive("jobs", 1); len(got) != 0 {
		t.Fatal("an extended lease expired at its old deadline")
	}
	e.clk.Advance(10 * time.Second)
	e.del.Flush()
	d := e.receiveOne("jobs")
	if d.ID != id || d.Attempt != 2 {
		t.Fatalf("after expiry: %+v, want attempt 2", d)
	}
}

// Past max_attempts a message is dead-lettered (recorded and linked to the dead-letter
// queue's node); RedriveDeadLetters puts it back with a fresh attempt count.
func TestRPCMaxAttemptsDeadLettersAndRedrive(t *testing.T) {
	e := newEnv(t)
	e.create(broker.QueueConfig{Name: "jobs-dlq"})
	cfg := e.create(broker.QueueConfig{Name: "jobs", MaxAttempts: 2, DeadLetterQueue: "jobs-dlq"})
	if cfg.DeadLetterQueue != "jobs-dlq" || cfg.MaxAttempts != 2 {
		t.Fatalf("config = %+v", cfg)
	}
	id := e.enqueue("jobs", broker.QueueMessage{Payload: []byte("poison"), Priority: 1})
	for attempt := 1; attempt <= 2; attempt++ {
		if d := e.receiveOne("jobs"); d.Attempt != attempt {
			t.Fatalf("attempt = %d, want %d", d.Attempt, attempt)
		}
		if err := e.q.NackMessage(bg, "jobs", id, broker.QueueNack{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.receive("jobs", 1); len(got) != 0 {
		t.Fatalf("a dead-lettered message was delivered: %+v", got)
	}
	resp, err := e.eng.Exec(bg, "", `MATCH d: _DeadLetter, q: _Queue, _dead_letter_destination(d, q) RETURN q.name, d.delivery_attempts, d.subject_id`, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := resp.Results[0].Rows
	if len(rows) != 1 || rows[0][0].AsString() != "jobs-dlq" || rows[0][1].AsInt() != 2 || rows[0][2].AsString() != string(id) {
		t.Fatalf("dead letters = %v", rows)
	}
	if n, err := e.q.RedriveDeadLetters(bg, "jobs-dlq"); err != nil || n != 0 {
		t.Fatalf("redrive of the dlq itself = %d, %v; want 0 (its letters belong to jobs)", n, err)
	}
	n, err := e.q.RedriveDeadLetters(bg, "jobs")
	if err != nil || n != 1 {
		t.Fatalf("redrive = %d, %v", n, err)
	}
	d := e.receiveOne("jobs")
	if d.ID != id || d.Attempt != 1 || string(d.Payload) != "poison" || d.Priority != 1 {
		t.Fatalf("redriven = %+v", d)
	}
	// Dead-lettering at once.
	if err := e.q.NackMessage(bg, "jobs", id, broker.QueueNack{DeadLetter: true}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.q.RedriveDeadLetters(bg, "jobs"); err != nil || n != 1 {
		t.Fatalf("second redrive = %d, %v", n, err)
	}
}

func TestRPCCreateDeleteQueue(t *testing.T) {
	e := newEnv(t)
	cfg := e.create(broker.QueueConfig{Name: "q1", VisibilityTimeout: 1500 * time.Millisecond, Weights: map[string]int64{"a": 3}})
	if cfg.VisibilityTimeout != 1500*time.Millisecond || cfg.Weights["a"] != 3 || cfg.CreatedAt.IsZero() {
		t.Fatalf("config = %+v", cfg)
	}
	_, err := e.q.CreateQueue(bg, broker.QueueConfig{Name: "q1"})
	wantCode(t, err, herald.CodeDuplicateID)
	_, err = e.q.CreateQueue(bg, broker.QueueConfig{Name: "bad name"})
	wantCode(t, err, herald.CodeMalformedRequest)
	_, err = e.q.CreateQueue(bg, broker.QueueConfig{Name: "q2", DeadLetterQueue: "absent"})
	wantCode(t, err, herald.CodeNodeNotFound)
	_, err = e.q.CreateQueue(bg, broker.QueueConfig{Name: "q2", Weights: map[string]int64{"a": 0}})
	wantCode(t, err, herald.CodeMalformedRequest)
	_, err = e.q.Enqueue(bg, "q1", broker.QueueMessage{Priority: -1})
	wantCode(t, err, herald.CodeMalformedRequest)

	got, err := e.q.GetQueue("q1")
	if err != nil || got.VisibilityTimeout != cfg.VisibilityTimeout || got.Weights["a"] != 3 {
		t.Fatalf("GetQueue = %+v, %v", got, err)
	}
	// The weight is stamped on each message from the queue's configuration.
	a := e.enqueue("q1", broker.QueueMessage{FairnessKey: "a"})
	e.enqueue("q1", broker.QueueMessage{FairnessKey: "b"})
	e.enqueue("q1", broker.QueueMessage{FairnessKey: "b"})
	for _, d := range e.receive("q1", 3) {
		if want := map[bool]int64{true: 3, false: 1}[d.ID == a]; d.Weight != want {
			t.Fatalf("%+v: weight %d, want %d", d, d.Weight, want)
		}
	}
	n, err := e.q.DeleteQueue(bg, "q1")
	if err != nil || n != 3 {
		t.Fatalf("delete = %d, %v; want 3 messages", n, err)
	}
	// The leased message went with the queue.
	wantCode(t, e.q.AckMessage(bg, "q1", a), herald.CodeInvalidDeliveryID)
	_, err = e.q.DeleteQueue(bg, "q1")
	wantCode(t, err, herald.CodeNodeNotFound)
	// Created again, it is a new, empty queue.
	e.create(broker.QueueConfig{Name: "q1"})
	if got := e.receive("q1", 5); len(got) != 0 {
		t.Fatalf("a re-created queue has messages: %+v", got)
	}
}

// Priority orders a key's messages (0 first); a delayed message waits for its time.
func TestRPCPriorityAndDelay(t *testing.T) {
	e := newEnv(t)
	e.create(broker.QueueConfig{Name: "p"})
	late := e.enqueue("p", broker.QueueMessage{Payload: []byte("late"), Delay: time.Minute})
	low := e.enqueue("p", broker.QueueMessage{Payload: []byte("low"), Priority: 5})
	high := e.enqueue("p", broker.QueueMessage{Payload: []byte("high"), Priority: 0})
	got := e.receive("p", 10)
	if len(got) != 2 || got[0].ID != high || got[1].ID != low {
		t.Fatalf("received %+v, want high then low", got)
	}
	e.clk.Advance(time.Minute)
	if d := e.receiveOne("p"); d.ID != late {
		t.Fatalf("after the delay: %+v", d)
	}
}

// A subscription streams leased messages; closing it returns the unsettled ones at once.
func TestRPCSubscription(t *testing.T) {
	e := newEnv(t)
	e.create(broker.QueueConfig{Name: "s"})
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	sub, err := e.q.ConsumeQueue(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	id := e.enqueue("s", broker.QueueMessage{Payload: []byte("streamed"), Headers: map[string]string{"h": "1"}})
	d, err := sub.Next(ctx)
	if err != nil || d.ID != id || string(d.Payload) != "streamed" || d.Attempt != 1 || d.Headers["h"] != "1" {
		t.Fatalf("next = %+v, %v", d, err)
	}
	sub.Close()
	if _, err := sub.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("next after close = %v, want EOF", err)
	}
	// Released at once; a release is not a failed attempt.
	if d := e.receiveOne("s"); d.ID != id || d.Attempt != 1 {
		t.Fatalf("after close: %+v", d)
	}
	_, err = e.q.ConsumeQueue(ctx, "missing")
	wantCode(t, err, herald.CodeNodeNotFound)
}
