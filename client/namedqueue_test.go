package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// The queue RPC from the Go client: create, enqueue with a fairness key, priority and
// headers, consume, extend, nack, dead-letter, redrive, ack and delete.
func TestNamedQueueRoundTrip(t *testing.T) {
	srv := heraldtest.NewServer(t)
	c := srv.Client()
	ctx := context.Background()
	q := c.NamedQueue("emails")
	cfg, err := q.Create(ctx, client.QueueConfig{VisibilityTimeout: time.Minute, MaxAttempts: 3, Weights: map[string]int64{"b": 2}})
	if err != nil || cfg.Name != "emails" || cfg.VisibilityTimeout != time.Minute || cfg.MaxAttempts != 3 || cfg.Weights["b"] != 2 || cfg.CreatedAt.IsZero() {
		t.Fatalf("Create: %+v %v", cfg, err)
	}
	if _, err := q.Create(ctx, client.QueueConfig{}); !errors.Is(err, herald.CodeDuplicateID) {
		t.Fatalf("second Create: %v, want E2004", err)
	}
	id, err := q.Enqueue(ctx, client.QueueMessage{Payload: []byte("hi"), Headers: map[string]string{"trace": "t1"}, FairnessKey: "b", Priority: 1})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := q.Consume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := cons.Next(ctx)
	if err != nil || string(d.ID) != id || string(d.Payload) != "hi" || d.Headers["trace"] != "t1" || d.FairnessKey != "b" || d.Priority != 1 || d.Weight != 2 || d.Attempt != 1 {
		t.Fatalf("Next: %+v %v", d, err)
	}
	if dl, err := q.Extend(ctx, id, 2*time.Minute); err != nil || dl.Before(d.Deadline) {
		t.Fatalf("Extend: %v %v (was %v)", dl, err, d.Deadline)
	}
	if err := q.Nack(ctx, id, client.QueueNack{DeadLetter: true}); err != nil {
		t.Fatal(err)
	}
	if n, err := q.RedriveDeadLetters(ctx); err != nil || n != 1 {
		t.Fatalf("Redrive: %d %v", n, err)
	}
	d, err = cons.Next(ctx)
	if err != nil || string(d.ID) != id {
		t.Fatalf("after the redrive: %+v %v", d, err)
	}
	if err := q.Ack(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(ctx, id); !errors.Is(err, herald.CodeInvalidDeliveryID) {
		t.Fatalf("second Ack: %v, want E8004", err)
	}
	if _, err := q.Enqueue(ctx, client.QueueMessage{Payload: []byte("left")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cons.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Next(ctx); err == nil {
		t.Fatalf("Next after Close: %v", err)
	}
	// A consumer whose context ends, with a message it was not asked for, lets it go.
	cctx, cancel := context.WithCancel(ctx)
	other, err := q.Consume(cctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := other.Next(ctx); err == nil {
		t.Fatal("Next on a consumer whose context ended returned no error")
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Delete(ctx); err != nil || n != 1 {
		t.Fatalf("Delete: %d %v", n, err)
	}
	if _, err := c.NamedQueue("bad name").Enqueue(ctx, client.QueueMessage{}); !errors.Is(err, herald.CodeInvalidArgument) {
		t.Fatalf("a bad name: %v, want E4019", err)
	}
}
