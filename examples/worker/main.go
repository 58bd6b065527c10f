// Command worker sends the emails queued in Herald: a typed worker with retries,
// backoff and dead letters, set up idempotently, that drains on SIGINT. It is the
// program of docs/worker.md; bench/examples/jetstream-worker is the same program
// written against NATS JetStream.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
)

// Email is the payload: each field is an attribute of an Email node.
type Email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    []byte `json:"body"`
}

// config is the consumer: a group of mailers sharing the emails, five attempts with a
// backoff between them, and the dead letters filed under #failed_emails.
var config = client.ConsumerConfig{
	Type:        "Email",
	Group:       "mailers",
	MaxAttempts: 5,
	Backoff:     client.Exponential(time.Second, 2, time.Minute),
	DeadLetter:  "failed_emails",
	Concurrency: 4,
}

// Mailer is the worker; Send delivers one email.
type Mailer struct {
	Send func(ctx context.Context, e Email) error
}

// Work sends one email. An address that cannot work is rejected (dead-lettered at
// once); any other error is retried after the backoff.
func (m Mailer) Work(ctx context.Context, job *client.Job[Email]) error {
	if !strings.Contains(job.Payload.To, "@") {
		return herald.Reject(fmt.Errorf("no address in %q", job.Payload.To))
	}
	return m.Send(ctx, job.Payload)
}

// schema declares the Email type and ensures the node the dead letters are filed
// under: run again, by this worker or another, it changes nothing.
const schema = `
node Email { to: String, subject: String, body: Bytes }
SPAWN IF NOT EXISTS #failed_emails: DeadLetters {}`

func setup(ctx context.Context, c *client.Client) error {
	_, err := c.Exec(ctx, schema, nil)
	return err
}

// run works until ctx is cancelled, then drains: running jobs finish and are settled,
// the others go back to the queue.
func run(ctx context.Context, url string, w client.Worker[Email]) error {
	c, err := client.Dial(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := setup(ctx, c); err != nil {
		return err
	}
	sub, err := client.Work(ctx, c, config, w)
	if err != nil {
		return err
	}
	<-sub.Done()
	return sub.Err()
}

// serve runs the worker until SIGINT or SIGTERM.
func serve(url string, w client.Worker[Email]) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, url, w)
}

func main() {
	send := func(ctx context.Context, e Email) error {
		log.Printf("to %s: %s", e.To, e.Subject)
		return nil
	}
	if err := serve(cmp.Or(os.Getenv("HERALD_URL"), "http://127.0.0.1:7420"), Mailer{Send: send}); err != nil {
		log.Fatal(err)
	}
}
