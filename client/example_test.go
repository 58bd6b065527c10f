package client_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// TestMain runs the examples only against a server that serves consume streams: until
// the in-process server wires consume mode up, it restricts the run to the tests (when
// no -run pattern was given) and says so.
func TestMain(m *testing.M) {
	flag.Parse()
	if run := flag.Lookup("test.run"); run != nil && run.Value.String() == "" {
		if reason := consumeUnavailable(); reason != "" {
			fmt.Fprintf(os.Stderr, "client: skipping the Example tests: %s\n", reason)
			_ = run.Value.Set("^Test")
		}
	}
	os.Exit(m.Run())
}

// consumeUnavailable returns why the in-process server cannot run the examples, or "".
func consumeUnavailable() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := heraldtest.Start(ctx)
	if err != nil {
		return err.Error()
	}
	defer srv.Close()
	c := srv.Client()
	if _, err := c.Exec(ctx, `node Probe { n: Int }`, nil); err != nil {
		return err.Error()
	}
	sub, err := c.Subscribe(ctx, `WATCH p: Probe [mode: consume] RETURN p`, func(context.Context, *client.Message) error { return nil })
	if err != nil {
		switch herald.CodeOf(err) {
		case herald.CodeNotImplemented, herald.CodeNotFound:
			return "the server does not serve consume streams yet (" + err.Error() + ")"
		}
		return err.Error()
	}
	_ = sub.Close(ctx)
	return ""
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
