package heraldtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// The wait-until helpers see a worker's outcomes: acknowledged, drained, dead-lettered.
func TestWaitHelpers(t *testing.T) {
	srv := heraldtest.NewServer(t)
	srv.Exec(`node Job { n: Int }`, nil)
	srv.WaitDrained("Job") // nothing to wait for
	c := srv.Client()
	ctx := context.Background()
	var ids []string
	for n := range 3 {
		id, err := c.Publish(ctx, "Job", map[string]any{"n": n})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	_, err := c.Consume(ctx, client.ConsumerConfig{Type: "Job", MaxAttempts: 1}, func(ctx context.Context, m *client.Message) error {
		if m.Match["n"] == int64(1) {
			return errors.New("one fails")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.WaitDrained("Job")
	srv.RequireAcked("Job", ids[0])
	srv.RequireAcked("Job", ids[2])
	l := srv.RequireDeadLettered("Job", ids[1])
	if l.Subject != ids[1] || l.Reason != "max_redeliveries_exceeded" || l.Attempts != 1 || l.ID == "" {
		t.Fatalf("dead letter %+v", l)
	}
}

// A helper that waits in vain, or finds the other outcome, fails — here by panicking,
// as it does for a server from Start.
func TestWaitHelpersFail(t *testing.T) {
	srv, err := heraldtest.Start(context.Background(), heraldtest.WithWaitTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.Exec(`node Job { n: Int }`, nil)
	resp := srv.Exec(`SPAWN j: Job { n = 1 } RETURNING j.id`, nil)
	id := resp.Last().Rows[0][0].(string)
	mustPanic := func(what, want string, f func()) {
		t.Helper()
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), want) {
				t.Errorf("%s: panic %v, want one saying %q", what, r, want)
			}
		}()
		f()
	}
	mustPanic("WaitDrained", "not within", func() { srv.WaitDrained("Job") })
	mustPanic("RequireDeadLettered", "not within", func() { srv.RequireDeadLettered("Job", id) })
	mustPanic("a bad type", "not an identifier", func() { srv.WaitDrained("Job x") })
	// Dead-lettered, not acknowledged.
	srv.Exec(`SPAWN j: Bad { n = 1 }`, nil)
	bad := srv.Exec(`MATCH b: Bad RETURN b.id`, nil).Last().Rows[0][0].(string)
	_, err = srv.Client().Subscribe(context.Background(), `WATCH b: Bad [mode: consume] RETURN b`,
		func(context.Context, *client.Message) error { return herald.Reject(errors.New("no")) })
	if err != nil {
		t.Fatal(err)
	}
	srv.RequireDeadLettered("Bad", bad)
	mustPanic("RequireAcked", "dead-lettered", func() { srv.RequireAcked("Bad", bad) })
}

type payload struct {
	N    int    `json:"n"`
	Body []byte `json:"body"`
}

// Work runs a worker without a server and reports how the policy settled it.
func TestWork(t *testing.T) {
	w := client.WorkFunc[payload](func(ctx context.Context, j *client.Job[payload]) error {
		switch {
		case string(j.Payload.Body) != "b":
			return errors.New("the body did not survive the codec")
		case j.Payload.N == 1:
			return errors.New("retry me")
		case j.Payload.N == 2:
			return herald.Reject(errors.New("bad"))
		case j.Attempt > 1:
			return errors.New("attempt")
		}
		return nil
	})
	for _, tc := range []struct {
		n    int
		opts []heraldtest.WorkOption
		want string
	}{
		{0, nil, "ack"},
		{1, nil, "nack"},
		{1, []heraldtest.WorkOption{heraldtest.WithPolicy(client.RejectOnError)}, "reject"},
		{1, []heraldtest.WorkOption{heraldtest.WithPolicy(client.Manual)}, ""},
		{2, nil, "reject"},
		{0, []heraldtest.WorkOption{heraldtest.WithAttempt(2)}, "nack"},
		{0, []heraldtest.WorkOption{heraldtest.WithCodec(client.JSON)}, "ack"},
	} {
		m, err := heraldtest.Work(t, w, payload{N: tc.n, Body: []byte("b")}, tc.opts...)
		if m.Settlement() != tc.want || (tc.want == "ack") != (err == nil) {
			t.Errorf("n=%d %d options: settled %q (%v), want %q", tc.n, len(tc.opts), m.Settlement(), err, tc.want)
		}
	}
}
