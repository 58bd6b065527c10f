package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// TestMain fails the package's run if a test or example leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// setup starts a server with two jobs waiting, "ok" and "fail", and returns a client.
// Examples call it to keep their bodies about the subscription.
func setup(ctx context.Context) (*client.Client, func()) {
	srv, err := heraldtest.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(ctx, srv.URL(), client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Exec(ctx, `node Job { name: String }`, nil); err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"ok", "fail"} {
		if _, err := c.Publish(ctx, "Job", map[string]any{"name": name}); err != nil {
			log.Fatal(err)
		}
	}
	return c, func() { _ = c.Close(); _ = srv.Close() }
}

// report prints what is left: jobs waiting, and dead letters with their reason.
func report(ctx context.Context, c *client.Client) {
	jobs, err := c.Exec(ctx, `MATCH j: Job RETURN COUNT(j) AS jobs`, nil)
	if err != nil {
		log.Fatal(err)
	}
	letters, err := c.Exec(ctx, `MATCH d: _DeadLetter RETURN d.failure_reason AS reason`, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs left:", jobs.Last().Rows[0][0], "dead letters:", letters.Last().Rows)
}

// consume subscribes with policy, waits for calls handler invocations, and closes the
// subscription, which waits for the settlements that follow the last handler.
func consume(ctx context.Context, c *client.Client, policy client.Policy, calls int, handler client.Handler) {
	called := make(chan struct{}, calls)
	sub, err := c.Subscribe(ctx, `WATCH j: Job [mode: consume] RETURN j.name AS name`,
		func(ctx context.Context, m *client.Message) error {
			defer func() { called <- struct{}{} }()
			return handler(ctx, m)
		},
		client.WithPolicy(policy))
	if err != nil {
		log.Fatal(err)
	}
	for range calls {
		<-called
	}
	if err := sub.Close(ctx); err != nil {
		log.Fatal(err)
	}
}

var errThumbnail = errors.New("thumbnail service down")

// AckFirst acks each message as it arrives: the failed job is gone all the same.
func ExampleWithPolicy_ackFirst() {
	ctx := context.Background()
	c, stop := setup(ctx)
	defer stop()
	consume(ctx, c, client.AckFirst, 2, func(ctx context.Context, m *client.Message) error {
		fmt.Println("handling", m.Match["name"], "attempt", m.Attempt, "settled:", m.Settled())
		if m.Match["name"] == "fail" {
			return errThumbnail
		}
		return nil
	})
	report(ctx, c)
	// Output:
	// handling ok attempt 1 settled: true
	// handling fail attempt 1 settled: true
	// jobs left: 0 dead letters: []
}

// Ack acks after the handler whatever it returned.
func ExampleWithPolicy_ack() {
	ctx := context.Background()
	c, stop := setup(ctx)
	defer stop()
	consume(ctx, c, client.Ack, 2, func(ctx context.Context, m *client.Message) error {
		fmt.Println("handling", m.Match["name"], "attempt", m.Attempt, "settled:", m.Settled())
		if m.Match["name"] == "fail" {
			return errThumbnail
		}
		return nil
	})
	report(ctx, c)
	// Output:
	// handling ok attempt 1 settled: false
	// handling fail attempt 1 settled: false
	// jobs left: 0 dead letters: []
}

// RejectOnError acks on success and dead-letters on error, without a retry. A panic
// counts as an error.
func ExampleWithPolicy_rejectOnError() {
	ctx := context.Background()
	c, stop := setup(ctx)
	defer stop()
	consume(ctx, c, client.RejectOnError, 2, func(ctx context.Context, m *client.Message) error {
		fmt.Println("handling", m.Match["name"], "attempt", m.Attempt)
		if m.Match["name"] == "fail" {
			panic("nil thumbnail")
		}
		return nil
	})
	report(ctx, c)
	// Output:
	// handling ok attempt 1
	// handling fail attempt 1
	// jobs left: 0 dead letters: [[no_retry]]
}

// NackOnError acks on success and nacks on error: the failed job comes back with its
// attempt counter raised, and succeeds this time.
func ExampleWithPolicy_nackOnError() {
	ctx := context.Background()
	c, stop := setup(ctx)
	defer stop()
	consume(ctx, c, client.NackOnError, 3, func(ctx context.Context, m *client.Message) error {
		fmt.Println("handling", m.Match["name"], "attempt", m.Attempt)
		if m.Match["name"] == "fail" && m.Attempt == 1 {
			return errThumbnail
		}
		return nil
	})
	report(ctx, c)
	// Output:
	// handling ok attempt 1
	// handling fail attempt 1
	// handling fail attempt 2
	// jobs left: 0 dead letters: []
}

// Manual settles nothing by itself: the handler acks, nacks and rejects.
func ExampleWithPolicy_manual() {
	ctx := context.Background()
	c, stop := setup(ctx)
	defer stop()
	consume(ctx, c, client.Manual, 3, func(ctx context.Context, m *client.Message) error {
		fmt.Println("handling", m.Match["name"], "attempt", m.Attempt)
		switch {
		case m.Match["name"] == "ok":
			return m.Ack(ctx)
		case m.Attempt == 1:
			return m.Nack(ctx) // try once more
		default:
			return m.Reject(ctx) // give up: dead letter
		}
	})
	report(ctx, c)
	// Output:
	// handling ok attempt 1
	// handling fail attempt 1
	// handling fail attempt 2
	// jobs left: 0 dead letters: [[no_retry]]
}

// A handler chooses its outcome by the error it returns, under any policy but
// AckFirst: herald.NackAfter redelivers after a delay, herald.Reject dead-letters.
func ExampleWithPolicy_controlFlowErrors() {
	ctx := context.Background()
	c, stop := setup(ctx)
	defer stop()
	consume(ctx, c, client.Ack, 3, func(ctx context.Context, m *client.Message) error {
		fmt.Println("handling", m.Match["name"], "attempt", m.Attempt)
		switch {
		case m.Match["name"] == "ok" && m.Attempt == 1:
			return herald.NackAfter(errThumbnail, time.Millisecond) // back in a moment
		case m.Match["name"] == "fail":
			return herald.Reject(errThumbnail)
		}
		return nil
	})
	report(ctx, c)
	// Unordered output:
	// handling ok attempt 1
	// handling fail attempt 1
	// handling ok attempt 2
	// jobs left: 0 dead letters: [[no_retry]]
}

// Publish creates a message; Exec runs any query.
func ExampleClient_Publish() {
	ctx := context.Background()
	srv, err := heraldtest.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := client.Dial(ctx, srv.URL())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if _, err := c.Exec(ctx, `node Job { name: String, priority: Int = 0 }`, nil); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Publish(ctx, "Job", map[string]any{"name": "resize", "priority": 5}, client.WithID("job_1")); err != nil {
		log.Fatal(err)
	}
	resp, err := c.Exec(ctx, `MATCH j: Job WHERE j.priority >= $min RETURN j.id, j.name`, map[string]any{"min": 3})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Last().Columns, resp.Last().Rows)

	_, err = c.Exec(ctx, `MATCH j: Job WHERE RETURN j`, nil)
	var he *herald.Error
	if errors.As(err, &he) {
		fmt.Println(he.Code, he.Code.Name(), he.Line, he.Column)
	}
	// Output:
	// [j.id j.name] [[job_1 resize]]
	// E1001 SYNTAX_ERROR 1 20
}
