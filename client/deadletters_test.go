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

// The statements the dead-letter methods run: stable forms, values as parameters.
func TestDeadLetterStatements(t *testing.T) {
	stmt, params, err := client.DeadLettersStatement(client.DeadLetterFilter{Queue: "emails", Reason: "no_retry", OlderThan: time.Hour, Limit: 10})
	want := `MATCH d: _DeadLetter WHERE d.queue = $queue AND d.failure_reason = $reason AND d.created_at <= now() - 1h ` +
		`RETURN d.id, d.queue, d.group, d.failure_reason, d.delivery_attempts, d.created_at, d.subject_id, d.subject_type, d.original_match ORDER BY d.created_at ASC, d.id ASC LIMIT 10`
	if err != nil || stmt != want || params["queue"] != "emails" || params["reason"] != "no_retry" {
		t.Fatalf("list:\n%s\nwant\n%s\n%v %v", stmt, want, params, err)
	}
	stmt, params, err = client.RedriveStatement(client.DeadLetterFilter{Group: "workers", Type: "Task"}, nil)
	if want := `MATCH d: _DeadLetter WHERE d.group = $group AND d.subject_type = $type REDRIVE d`; err != nil || stmt != want || params["group"] != "workers" || params["type"] != "Task" {
		t.Fatalf("redrive: %s %v %v", stmt, params, err)
	}
	stmt, _, err = client.PurgeStatement(client.DeadLetterFilter{All: true}, nil)
	if want := `MATCH d: _DeadLetter KILL d`; err != nil || stmt != want {
		t.Fatalf("purge all: %s %v", stmt, err)
	}
	stmt, params, err = client.PurgeStatement(client.DeadLetterFilter{Queue: "q", Limit: 2}, []string{"dl_a", "dl_b"})
	if want := `MATCH d: _DeadLetter WHERE d.queue = $queue AND d.id IN $ids KILL d`; err != nil || stmt != want || len(params["ids"].([]any)) != 2 {
		t.Fatalf("purge by id: %s %v %v", stmt, params, err)
	}
	if _, _, err := client.PurgeStatement(client.DeadLetterFilter{}, nil); !errors.Is(err, herald.CodeInvalidArgument) {
		t.Fatalf("purge without a filter: %v, want E4019", err)
	}
	if _, _, err := client.DeadLettersStatement(client.DeadLetterFilter{Limit: -1}); !errors.Is(err, herald.CodeInvalidArgument) {
		t.Fatalf("negative limit: %v, want E4019", err)
	}
}

// Dead letters of every queue model — a consume group's, a REST queue's item, a queue
// RPC message — listed, redriven and purged by filter against a real server.
func TestDeadLettersAgainstServer(t *testing.T) {
	srv := heraldtest.NewServer(t)
	c := srv.Client()
	ctx := context.Background()

	// A queue RPC message, dead-lettered by its NACK.
	q := c.NamedQueue("emails")
	if _, err := q.Create(ctx, client.QueueConfig{VisibilityTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	id, err := q.Enqueue(ctx, client.QueueMessage{Payload: []byte("hi")})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := q.Consume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if _, err := cons.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Nack(ctx, id, client.QueueNack{DeadLetter: true}); err != nil {
		t.Fatal(err)
	}
	// A REST queue's item and a Task of the group "workers", rejected by consumers.
	if _, err := c.Queue("jobs").Push(ctx, raw(`{"n":1}`), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `SPAWN t: Task { n = 1 }`, nil); err != nil {
		t.Fatal(err)
	}
	items := make(chan *client.Message, 2)
	mustSubscribe(t, c, `WATCH i: QueueItem [mode: consume, group: "inspect"] RETURN i`,
		func(_ context.Context, m *client.Message) error { items <- m; return nil }, client.WithPolicy(client.Manual))
	tasks := make(chan *client.Message, 2)
	mustSubscribe(t, c, `WATCH t: Task [mode: consume, group: "workers"] RETURN t.n`,
		func(_ context.Context, m *client.Message) error { tasks <- m; return nil }, client.WithPolicy(client.Manual))
	for _, ch := range []chan *client.Message{items, tasks} {
		if err := recvT(t, ch).Reject(ctx); err != nil {
			t.Fatal(err)
		}
	}

	all, err := c.DeadLetters(ctx, client.DeadLetterFilter{})
	if err != nil || len(all) != 3 {
		t.Fatalf("all letters: %+v %v", all, err)
	}
	for _, tc := range []struct {
		f    client.DeadLetterFilter
		want string // the subject type of the one letter selected
	}{
		{client.DeadLetterFilter{Queue: "emails"}, "QueueMessage"},
		{client.DeadLetterFilter{Queue: "jobs"}, "QueueItem"},
		{client.DeadLetterFilter{Group: "workers"}, "Task"},
		{client.DeadLetterFilter{Type: "Task", Reason: "no_retry"}, "Task"},
	} {
		got, err := c.DeadLetters(ctx, tc.f)
		if err != nil || len(got) != 1 || got[0].Type != tc.want {
			t.Fatalf("%+v: %+v %v", tc.f, got, err)
		}
	}
	if got, err := c.DeadLetters(ctx, client.DeadLetterFilter{OlderThan: time.Hour}); err != nil || len(got) != 0 {
		t.Fatalf("older than an hour: %+v %v", got, err)
	}
	if got, err := c.DeadLetters(ctx, client.DeadLetterFilter{Limit: 2}); err != nil || len(got) != 2 || got[0].ID != all[0].ID {
		t.Fatalf("limit 2: %+v %v", got, err)
	}

	// Redriving the group's letter delivers the Task to the group again.
	if n, err := c.RedriveDeadLetters(ctx, client.DeadLetterFilter{Group: "workers"}); err != nil || n != 1 {
		t.Fatalf("redrive workers: %d %v", n, err)
	}
	if m := recvT(t, tasks); m.Attempt != 1 {
		t.Fatalf("redelivered: attempt %d", m.Attempt)
	}
	// Purging needs a filter or All; the REST queue's letter goes, for good.
	if _, err := c.PurgeDeadLetters(ctx, client.DeadLetterFilter{}); !errors.Is(err, herald.CodeInvalidArgument) {
		t.Fatalf("purge without a filter: %v", err)
	}
	if n, err := c.PurgeDeadLetters(ctx, client.DeadLetterFilter{Queue: "jobs"}); err != nil || n != 1 {
		t.Fatalf("purge jobs: %d %v", n, err)
	}
	// With a limit, the oldest letters are named by id.
	if n, err := c.RedriveDeadLetters(ctx, client.DeadLetterFilter{Limit: 5}); err != nil || n != 1 {
		t.Fatalf("redrive with a limit: %d %v", n, err)
	}
	if d, err := cons.Next(ctx); err != nil || string(d.ID) != id {
		t.Fatalf("the queue message after its redrive: %+v %v", d, err)
	}
	if got, err := c.DeadLetters(ctx, client.DeadLetterFilter{}); err != nil || len(got) != 0 {
		t.Fatalf("left: %+v %v", got, err)
	}
	if n, err := c.PurgeDeadLetters(ctx, client.DeadLetterFilter{All: true}); err != nil || n != 0 {
		t.Fatalf("purge of none: %d %v", n, err)
	}
}
