package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

type order struct {
	ID     string        `json:"id"`
	Tenant string        `json:"tenant"`
	Total  float64       `json:"total"`
	Body   []byte        `json:"body"`
	Due    time.Time     `json:"due"`
	Window time.Duration `json:"window"`
	Tags   []string      `json:"tags"`
}

// A struct published through the default codec is stored with Herald's kinds, its id
// field is the node's id, and a Worker gets it back as it was.
func TestPublishStructAndWork(t *testing.T) {
	srv := heraldtest.NewServer(t)
	srv.Exec(`node Order { tenant: String, total: Float, body: Bytes, due: Timestamp, window: Duration, tags: [String] }`, nil)
	c := srv.Client()
	ctx := context.Background()
	in := order{ID: "o1", Tenant: "acme", Total: 12.5, Body: []byte{0, 0xfe}, Due: time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC),
		Window: time.Minute, Tags: []string{"a", "b"}}
	id, err := c.Publish(ctx, "Order", in)
	if err != nil || id != "o1" {
		t.Fatalf("Publish: %q %v", id, err)
	}
	row := srv.Exec(`MATCH o: Order RETURN o.body, o.due < now(), o.window > 30s`, nil).Last().Rows[0]
	if !bytes.Equal(row[0].([]byte), in.Body) || row[1] != false || row[2] != true {
		t.Fatalf("stored as %v", row)
	}
	got := make(chan order, 1)
	_, err = client.Work(ctx, c, client.ConsumerConfig{Type: "Order", Filter: `m.tenant = $t`, Params: map[string]any{"t": "acme"}},
		client.WorkFunc[order](func(ctx context.Context, j *client.Job[order]) error {
			got <- j.Payload
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	if out := <-got; !reflect.DeepEqual(out, in) {
		t.Fatalf("worker got %+v, want %+v", out, in)
	}
	srv.WaitDrained("Order")
}

// Nested values are Map attributes: a nested struct and a list of structs are stored,
// a consumer's filter reads into them with selectors, and a worker gets them back.
func TestPublishNestedValues(t *testing.T) {
	srv := heraldtest.NewServer(t)
	ctx := context.Background()
	type customer struct {
		ID   string `json:"id"`
		Tier int    `json:"tier"`
	}
	type line struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}
	type nested struct {
		Customer customer `json:"customer"`
		Lines    []line   `json:"lines"`
	}
	srv.Exec(`node Order { customer: Map, lines: List }`, nil)
	c := srv.Client()
	in := nested{Customer: customer{ID: "c1", Tier: 2}, Lines: []line{{"a1", 2}, {"b2", 1}}}
	if _, err := c.Publish(ctx, "Order", in); err != nil {
		t.Fatalf("Publish of a nested struct: %v", err)
	}
	if _, err := c.Publish(ctx, "Order", nested{Customer: customer{ID: "c2", Tier: 1}}); err != nil {
		t.Fatal(err)
	}
	row := srv.Exec(`MATCH o: Order WHERE o.customer.tier > 1 RETURN o.customer.id, length(o.lines)`, nil).Last().Rows
	if len(row) != 1 || row[0][0] != "c1" || row[0][1] != int64(2) {
		t.Fatalf("rows %v", row)
	}
	got := make(chan nested, 1)
	_, err := client.Work(ctx, c, client.ConsumerConfig{Type: "Order", Filter: `m.customer.id = "c1"`},
		client.WorkFunc[nested](func(ctx context.Context, j *client.Job[nested]) error {
			got <- j.Payload
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	if out := <-got; !reflect.DeepEqual(out, in) {
		t.Fatalf("worker got %+v, want %+v", out, in)
	}
}

// WithDelay, WithPriority and WithFairnessKey set the attributes that a ConsumerConfig
// reads with AvailableAt, OrderBy: ByPriority and Fairness.
func TestPublishOptionsReachTheConsumer(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := heraldtest.NewServer(t, heraldtest.WithManualClock(start))
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.URL(), client.WithClock(srv.Clock()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv.Exec(`node Task { n: Int, priority: Int?, fairness_key: String?, available_at: Timestamp? }`, nil)
	publish := func(n int, opts ...client.PublishOption) {
		t.Helper()
		if _, err := c.Publish(ctx, "Task", map[string]any{"n": n}, opts...); err != nil {
			t.Fatal(err)
		}
	}
	publish(1, client.WithPriority(2), client.WithFairnessKey("a"))
	publish(2, client.WithPriority(0), client.WithFairnessKey("a"))
	publish(3, client.WithPriority(1), client.WithFairnessKey("a"))
	publish(4, client.WithDelay(time.Minute), client.WithPriority(0))
	got := make(chan int, 8)
	cfg := client.ConsumerConfig{Type: "Task", OrderBy: client.ByPriority, Fairness: client.AttrFairnessKey,
		AvailableAt: client.AttrAvailableAt, Prefetch: 1, AckTimeout: time.Hour} // no lease expires as the clock moves
	_, err = client.Work(ctx, c, cfg, client.WorkFunc[struct{ N int }](func(ctx context.Context, j *client.Job[struct{ N int }]) error {
		got <- j.Payload.N
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	var order []int
	for range 3 {
		order = append(order, <-got)
	}
	if !reflect.DeepEqual(order, []int{2, 3, 1}) {
		t.Fatalf("delivered %v, want by priority [2 3 1], the delayed one held back", order)
	}
	select {
	case n := <-got:
		t.Fatalf("message %d delivered before its time", n)
	default:
	}
	srv.Advance(time.Minute)
	if n := <-got; n != 4 {
		t.Fatalf("after the delay: %d, want 4", n)
	}
}

// A ConsumerConfig with attempts, backoff and a dead letter: a message that keeps
// failing is retried after the backoff and then dead-lettered, linked to the node.
func TestConsumerConfigRetriesAndDeadLetters(t *testing.T) {
	srv := heraldtest.NewServer(t, heraldtest.WithManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	srv.Exec(`node Job { n: Int }`, nil)
	srv.Exec(`SPAWN #failed_jobs: DeadLetters {}`, nil)
	c := srv.Client()
	ctx := context.Background()
	id, err := c.Publish(ctx, "Job", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	attempts := make(chan int, 4)
	cfg := client.ConsumerConfig{Type: "Job", MaxAttempts: 2, Backoff: client.Fixed(10 * time.Second), DeadLetter: "failed_jobs"}
	_, err = c.Consume(ctx, cfg, func(ctx context.Context, m *client.Message) error {
		// The handler NACKs itself (with the watch's backoff) so that the test knows
		// when the server has the NACK and may advance the clock past the backoff.
		if err := m.Nack(ctx); err != nil {
			t.Errorf("Nack: %v", err)
		}
		attempts <- m.Attempt
		return errors.New("always")
	})
	if err != nil {
		t.Fatal(err)
	}
	if a := <-attempts; a != 1 {
		t.Fatalf("first attempt %d", a)
	}
	srv.Advance(10 * time.Second) // the backoff
	if a := <-attempts; a != 2 {
		t.Fatalf("second attempt %d", a)
	}
	letter := srv.RequireDeadLettered("Job", id)
	if letter.Reason != "max_redeliveries_exceeded" || letter.Attempts != 2 {
		t.Fatalf("dead letter %+v", letter)
	}
	rows := srv.Exec(`MATCH d: _DeadLetter, _dead_letter_destination(d, #failed_jobs) RETURN d.subject_id`, nil).Last().Rows
	if len(rows) != 1 || rows[0][0] != id {
		t.Fatalf("letters linked to #failed_jobs: %v", rows)
	}
}

// lockedBuffer is a log destination safe for the subscription's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A subscription whose handler fails logs each failure at DEBUG and reports them
// together at the level it was given, not one WARN line each.
func TestSubscriptionReportsFailuresTogether(t *testing.T) {
	srv := heraldtest.NewServer(t)
	srv.Exec(`node Job { n: Int }`, nil)
	var logs lockedBuffer
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.URL(), client.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for n := range 5 {
		if _, err := c.Publish(ctx, "Job", map[string]any{"n": n}); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := c.Consume(ctx, client.ConsumerConfig{Type: "Job", MaxAttempts: 1}, func(ctx context.Context, m *client.Message) error {
		if m.Match["n"] == int64(0) {
			panic("zero")
		}
		return errors.New("no")
	}, client.WithLogLevel(slog.LevelInfo))
	if err != nil {
		t.Fatal(err)
	}
	srv.WaitDrained("Job")
	if err := sub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	<-sub.Done()
	out := logs.String()
	if n := strings.Count(out, "level=DEBUG msg=\"handler failed\""); n != 5 {
		t.Errorf("%d DEBUG lines of failures, want 5:\n%s", n, out)
	}
	if strings.Contains(out, "level=WARN") {
		t.Errorf("a WARN line:\n%s", out)
	}
	if n := strings.Count(out, "level=INFO msg=\"failed attempts since the last report\" component=herald-subscription failed=5 panicked=1 nacked=5 rejected=0"); n != 1 {
		t.Errorf("want one report of 5 failures at INFO:\n%s", out)
	}
}
