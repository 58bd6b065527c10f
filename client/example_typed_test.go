package client_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// Resize is a typed payload: its fields are the attributes of a Resize node.
type Resize struct {
	Image  []byte `json:"image"` // Bytes, not base64 text
	Width  int    `json:"width"`
	Format string `json:"format"`
}

// A typed worker: Publish takes the struct, the worker receives it decoded, and the
// error it returns decides the settlement.
func ExampleWork() {
	ctx := context.Background()
	srv, err := heraldtest.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := client.Dial(ctx, srv.URL(), client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, r := range []Resize{{Image: []byte{0x89, 'P'}, Width: 64, Format: "png"}, {Width: 64, Format: "bmp"}} {
		if _, err := c.Publish(ctx, "Resize", r); err != nil {
			log.Fatal(err)
		}
	}
	done := make(chan string, 2)
	sub, err := client.Work(ctx, c, client.ConsumerConfig{Type: "Resize"},
		client.WorkFunc[Resize](func(ctx context.Context, job *client.Job[Resize]) error {
			r := job.Payload
			if r.Format != "png" {
				done <- "rejected " + r.Format
				return herald.Reject(fmt.Errorf("cannot read %s", r.Format)) // dead-lettered
			}
			done <- fmt.Sprintf("resized %d bytes of %s to %d", len(r.Image), r.Format, r.Width)
			return nil // acknowledged
		}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-done)
	fmt.Println(<-done)
	if err := sub.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// resized 2 bytes of png to 64
	// rejected bmp
}

// A consumer's settings as Go values, and the statement they make.
func ExampleConsumerConfig_Statement() {
	cfg := client.ConsumerConfig{
		Type:        "Email",
		Filter:      `m.region = $region`,
		Group:       "mailers",
		OrderBy:     client.ByPriority,
		Fairness:    client.AttrFairnessKey,
		AvailableAt: client.AttrAvailableAt,
		AckTimeout:  time.Minute,
		MaxAttempts: 5,
		Backoff:     client.Exponential(time.Second, 2, time.Minute),
		DeadLetter:  "failed_emails",
	}
	stmt, err := cfg.Statement()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(stmt)
	// Output:
	// WATCH m: Email WHERE m.region = $region [mode: consume, group: "mailers", ordering: attribute(m.priority ASC), fairness: m.fairness_key, available_at: m.available_at, ack_timeout: 1m, max_redeliveries: 4, backoff: exponential(1s, 2.0, 1m), dead_letter: #failed_emails] RETURN m
}

// A named queue of the queue RPC: declared with an attempt limit, messages enqueued
// with a fairness key and a priority, consumed by lease and settled by id.
func ExampleNamedQueue() {
	ctx := context.Background()
	srv, err := heraldtest.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := client.Dial(ctx, srv.URL(), client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	q := c.NamedQueue("thumbnails")
	if _, err := q.Create(ctx, client.QueueConfig{MaxAttempts: 3, VisibilityTimeout: time.Minute}); err != nil {
		log.Fatal(err)
	}
	for i, tenant := range []string{"a", "b"} {
		m := client.QueueMessage{Payload: []byte("img-" + tenant), FairnessKey: tenant, Priority: int64(i)}
		if _, err := q.Enqueue(ctx, m); err != nil {
			log.Fatal(err)
		}
	}
	cons, err := q.Consume(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close()
	for range 2 {
		d, err := cons.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s (tenant %s, attempt %d)\n", d.Payload, d.FairnessKey, d.Attempt)
		if err := q.Ack(ctx, string(d.ID)); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// img-a (tenant a, attempt 1)
	// img-b (tenant b, attempt 1)
}
