// Command jetstream-worker is examples/worker written against NATS JetStream, for the
// comparison in docs/worker.md: the same emails, consumer group, five attempts with a
// backoff, dead letters, idempotent setup and drain on SIGINT. JetStream has no dead
// letters of its own, so the program files them on a stream it publishes to itself.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Email is the payload, carried as JSON.
type Email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    []byte `json:"body"`
}

const (
	maxAttempts = 5
	concurrency = 4
)

// backoff is the delay before each retry: 1s, doubling, at most a minute.
func backoff(attempt uint64) time.Duration {
	return min(time.Second<<(attempt-1), time.Minute)
}

// errReject marks a failure that no retry can mend.
var errReject = errors.New("reject")

// Mailer is the worker; Send delivers one email.
type Mailer struct {
	Send func(ctx context.Context, e Email) error
}

// Work sends one email.
func (m Mailer) Work(ctx context.Context, e Email) error {
	if !strings.Contains(e.To, "@") {
		return fmt.Errorf("%w: no address in %q", errReject, e.To)
	}
	return m.Send(ctx, e)
}

// setup creates the streams and the consumer; CreateOrUpdate is idempotent.
func setup(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "EMAILS", Subjects: []string{"emails"}}); err != nil {
		return nil, err
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "FAILED_EMAILS", Subjects: []string{"emails.failed"}}); err != nil {
		return nil, err
	}
	return js.CreateOrUpdateConsumer(ctx, "EMAILS", jetstream.ConsumerConfig{
		Durable:    "mailers",
		AckPolicy:  jetstream.AckExplicitPolicy,
		MaxDeliver: maxAttempts,
		AckWait:    30 * time.Second,
	})
}

// handle decodes, works and settles one message; the last failed attempt, and a
// rejected one, go to the dead letters.
func handle(ctx context.Context, js jetstream.JetStream, w Mailer, msg jetstream.Msg) {
	var e Email
	err := json.Unmarshal(msg.Data(), &e)
	if err != nil {
		err = fmt.Errorf("%w: %v", errReject, err)
	} else {
		err = w.Work(ctx, e)
	}
	if err == nil {
		_ = msg.DoubleAck(ctx)
		return
	}
	md, mdErr := msg.Metadata()
	if mdErr != nil || errors.Is(err, errReject) || md.NumDelivered >= maxAttempts {
		deadLetter(ctx, js, msg, err)
		return
	}
	_ = msg.NakWithDelay(backoff(md.NumDelivered))
}

// deadLetter files msg with the reason, then ends its deliveries.
func deadLetter(ctx context.Context, js jetstream.JetStream, msg jetstream.Msg, reason error) {
	dl := nats.NewMsg("emails.failed")
	dl.Data = msg.Data()
	dl.Header.Set("reason", reason.Error())
	if _, err := js.PublishMsg(ctx, dl); err != nil {
		_ = msg.Nak() // not filed: try again rather than lose it
		return
	}
	_ = msg.Term()
}

// run works until ctx is cancelled, then drains: the running handlers finish.
func run(ctx context.Context, url string, w Mailer) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cons, err := setup(ctx, js)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, concurrency)
	own := context.WithoutCancel(ctx) // handlers finish their work during the drain
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			handle(own, js, w, msg)
		}()
	}, jetstream.PullMaxMessages(concurrency))
	if err != nil {
		return err
	}
	<-ctx.Done()
	cc.Drain()
	<-cc.Closed()
	wg.Wait()
	return nil
}

// serve runs the worker until SIGINT or SIGTERM.
func serve(url string, w Mailer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, url, w)
}

func main() {
	send := func(ctx context.Context, e Email) error {
		log.Printf("to %s: %s", e.To, e.Subject)
		return nil
	}
	if err := serve(cmp.Or(os.Getenv("NATS_URL"), nats.DefaultURL), Mailer{Send: send}); err != nil {
		log.Fatal(err)
	}
}
