package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/herald-mq/herald/heraldtest"
)

// The worker's decisions, without a server: sent is acked, a failed send is retried,
// an address that cannot work is dead-lettered at once.
func TestMailer(t *testing.T) {
	failing := Mailer{Send: func(context.Context, Email) error { return errors.New("smtp: 451") }}
	working := Mailer{Send: func(context.Context, Email) error { return nil }}
	for _, tc := range []struct {
		m    Mailer
		to   string
		want string
	}{{working, "ann@example.com", "ack"}, {failing, "ann@example.com", "nack"}, {working, "nobody", "reject"}} {
		msg, _ := heraldtest.Work(t, tc.m, Email{To: tc.to, Subject: "hi", Body: []byte{0xff}})
		if got := msg.Settlement(); got != tc.want {
			t.Errorf("to %s: %s, want %s", tc.to, got, tc.want)
		}
	}
}

// v2 of the worker adds an optional attribute: its declaration evolves the type, and
// v1's, run again by a v1 worker that restarts, changes nothing.
const schemaV2 = `node Email { to: String, subject: String, body: Bytes, reply_to: String? }`

// EmailV2 is v2's payload; v1 workers decode it as an Email, without reply_to.
type EmailV2 struct {
	Email
	ReplyTo string `json:"reply_to,omitempty"`
}

// Against a server: setup survives a second run and v2's declaration, a failed send is
// retried after the backoff and then acknowledged, a bad address ends as a dead letter,
// v2's emails are sent by v1, and cancelling the context drains the worker.
func TestWorker(t *testing.T) {
	srv := heraldtest.NewServer(t)
	c := srv.Client()
	ctx, cancel := context.WithCancel(context.Background())
	for _, s := range []string{schema, schema, schemaV2, schema} {
		if _, err := c.Exec(ctx, s, nil); err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	var flaky atomic.Int32
	m := Mailer{Send: func(ctx context.Context, e Email) error {
		if e.To == "flaky@example.com" && flaky.Add(1) == 1 {
			return errors.New("smtp: 451 try again")
		}
		return nil
	}}
	done := make(chan error, 1)
	go func() { done <- run(ctx, srv.URL(), m) }()
	ids := map[string]string{}
	for _, to := range []string{"ann@example.com", "flaky@example.com", "nobody"} {
		id, err := c.Publish(ctx, "Email", Email{To: to, Subject: "hello", Body: []byte("hi")})
		if err != nil {
			t.Fatal(err)
		}
		ids[to] = id
	}
	v2, err := c.Publish(ctx, "Email", EmailV2{Email{To: "bob@example.com"}, "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	srv.RequireAcked("Email", v2)
	srv.RequireAcked("Email", ids["ann@example.com"])
	srv.RequireAcked("Email", ids["flaky@example.com"])
	if l := srv.RequireDeadLettered("Email", ids["nobody"]); l.Reason != "no_retry" {
		t.Errorf("dead letter %+v", l)
	}
	if n := flaky.Load(); n != 2 {
		t.Errorf("the flaky address was tried %d times, want 2", n)
	}
	srv.WaitDrained("Email")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// SIGINT drains the worker: the email being sent when it comes is finished and
// acknowledged, and serve returns without an error.
func TestDrainOnSIGINT(t *testing.T) {
	srv := heraldtest.NewServer(t)
	started, release := make(chan struct{}), make(chan struct{})
	m := Mailer{Send: func(ctx context.Context, e Email) error {
		close(started)
		<-release
		return nil
	}}
	done := make(chan error, 1)
	go func() { done <- serve(srv.URL(), m) }()
	if err := setup(context.Background(), srv.Client()); err != nil {
		t.Fatal(err)
	}
	id, err := srv.Client().Publish(context.Background(), "Email", Email{To: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	<-started // serve has its signal handler by now
	seen := make(chan os.Signal, 1)
	signal.Notify(seen, os.Interrupt)
	defer signal.Stop(seen)
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-seen // serve's handler has it too: the drain begins with the email in hand
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	srv.RequireAcked("Email", id)
}
