package client

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/api/convert"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
)

const consumeWatch = `WATCH j: Job [mode: consume] RETURN j.n AS n`

var errBoom = errors.New("boom")

func TestPolicyTable(t *testing.T) {
	type outcome struct {
		act   action
		delay time.Duration
	}
	none, ack, nack, reject := outcome{actNone, 0}, outcome{actAck, 0}, outcome{actNack, 0}, outcome{actReject, 0}
	later := outcome{actNack, 5 * time.Second}
	errs := []error{nil, errBoom, &PanicError{Value: "p"}, herald.NackAfter(errBoom, 5*time.Second), fmt.Errorf("wrapped: %w", herald.Reject(errBoom))}
	// Columns: success, error, panic, NackAfter(err, 5s), Reject(err).
	table := map[Policy][]outcome{
		AckFirst:      {none, none, none, none, none},
		Ack:           {ack, ack, ack, later, reject},
		RejectOnError: {ack, reject, reject, later, reject},
		NackOnError:   {ack, nack, nack, later, reject},
		Manual:        {none, none, none, later, reject},
	}
	for p, row := range table {
		for i, err := range errs {
			act, d := decide(p, err)
			if got := (outcome{act, d}); got != row[i] {
				t.Errorf("decide(%v, %v) = %+v, want %+v", p, err, got, row[i])
			}
		}
	}
}

// subscription starts a subscription on f and returns it with its stream and a channel
// that receives every message once the subscription is done with it.
func subscription(t *testing.T, f *fakeServer, h Handler, opts ...SubscribeOption) (*Subscription, *fakeStream, chan *Message) {
	t.Helper()
	c := f.dial(t)
	done := make(chan *Message, 100)
	opts = append(opts, func(o *subOptions) { o.processed = func(m *Message) { done <- m } })
	sub, err := c.Subscribe(context.Background(), consumeWatch, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close(context.Background()) })
	return sub, f.nextStream(t), done
}

func TestPoliciesOnTheWire(t *testing.T) {
	panics := func(context.Context, *Message) error { panic("handler bug") }
	fails := func(error) Handler { return func(context.Context, *Message) error { return errBoom } }
	returns := func(err error) Handler { return func(context.Context, *Message) error { return err } }
	cases := []struct {
		policy  Policy
		handler Handler
		want    []string
	}{
		{AckFirst, returns(nil), []string{`ACK "d1"`}},
		{AckFirst, fails(errBoom), []string{`ACK "d1"`}},
		{AckFirst, returns(herald.Reject(errBoom)), []string{`ACK "d1"`}},
		{Ack, returns(nil), []string{`ACK "d1"`}},
		{Ack, fails(errBoom), []string{`ACK "d1"`}},
		{Ack, panics, []string{`ACK "d1"`}},
		{Ack, returns(herald.NackAfter(errBoom, 5*time.Second)), []string{`NACK "d1" [delay: 5s]`}},
		{RejectOnError, returns(nil), []string{`ACK "d1"`}},
		{RejectOnError, fails(errBoom), []string{`NACK "d1" [no_retry]`}},
		{RejectOnError, panics, []string{`NACK "d1" [no_retry]`}},
		{RejectOnError, returns(herald.NackAfter(errBoom, 250*time.Millisecond)), []string{`NACK "d1" [delay: 250ms]`}},
		{NackOnError, returns(nil), []string{`ACK "d1"`}},
		{NackOnError, fails(errBoom), []string{`NACK "d1"`}},
		{NackOnError, panics, []string{`NACK "d1"`}},
		{NackOnError, returns(herald.NackAfter(errBoom, 0)), []string{`NACK "d1"`}},
		{NackOnError, returns(herald.Reject(errBoom)), []string{`NACK "d1" [no_retry]`}},
		{Manual, returns(nil), nil},
		{Manual, fails(errBoom), nil},
		{Manual, panics, nil},
		{Manual, returns(herald.Reject(nil)), []string{`NACK "d1" [no_retry]`}},
		{Manual, func(ctx context.Context, m *Message) error { return m.Ack(ctx) }, []string{`ACK "d1"`}},
		{Manual, func(ctx context.Context, m *Message) error { return m.NackAfter(ctx, time.Minute) }, []string{`NACK "d1" [delay: 60s]`}},
		{NackOnError, func(ctx context.Context, m *Message) error { _ = m.Reject(ctx); return errBoom }, []string{`NACK "d1" [no_retry]`}},
		{Ack, func(ctx context.Context, m *Message) error { return m.Extend(ctx, 30*time.Second) }, []string{`EXTEND "d1" [by: 30s]`, `ACK "d1"`}},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d_%v", i, c.policy), func(t *testing.T) {
			f := newFakeServer(t)
			_, st, done := subscription(t, f, c.handler, WithPolicy(c.policy))
			st.consumed("d1", 1, 1)
			recv(t, done)
			if got := f.drainStmts(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("statements %q, want %q", got, c.want)
			}
		})
	}
}

func TestMessageFields(t *testing.T) {
	f := newFakeServer(t)
	got := make(chan *Message, 1)
	_, st, done := subscription(t, f, func(ctx context.Context, m *Message) error { got <- m; return nil })
	st.consumed("d9", 42, 3)
	m := recv(t, got)
	recv(t, done)
	want := map[string]any{"n": int64(42)}
	if !reflect.DeepEqual(m.Match, want) || m.DeliveryID != "d9" || m.Attempt != 3 || m.Seq != 52 || m.Tick != 62 ||
		!m.Deadline.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("message %+v", m)
	}
	if !m.Settled() {
		t.Fatal("the message is not settled after the default policy acked it")
	}
}

func TestSettlesAtMostOnce(t *testing.T) {
	f := newFakeServer(t)
	errs := make(chan []error, 1)
	_, st, done := subscription(t, f, func(ctx context.Context, m *Message) error {
		errs <- []error{m.Ack(ctx), m.Ack(ctx), m.Nack(ctx), m.NackAfter(ctx, time.Second), m.Reject(ctx), m.Extend(ctx, time.Second)}
		return errBoom // NackOnError would nack, but the message is settled already
	}, WithPolicy(NackOnError))
	st.consumed("d1", 1, 1)
	got := recv(t, errs)
	recv(t, done)
	if got[0] != nil {
		t.Fatalf("first Ack: %v", got[0])
	}
	for i, err := range got[1:] {
		if !errors.Is(err, ErrSettled) {
			t.Errorf("settlement %d after the first: %v, want ErrSettled", i+2, err)
		}
	}
	if stmts := f.drainStmts(); !reflect.DeepEqual(stmts, []string{`ACK "d1"`}) {
		t.Fatalf("statements %q, want one ACK", stmts)
	}
}

func TestConcurrentSettlementsMakeOneCall(t *testing.T) {
	f := newFakeServer(t)
	var ok atomic.Int32
	_, st, done := subscription(t, f, func(ctx context.Context, m *Message) error {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if m.Ack(ctx) == nil {
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		return nil
	}, WithPolicy(Manual))
	st.consumed("d1", 1, 1)
	recv(t, done)
	if ok.Load() != 1 || len(f.drainStmts()) != 1 {
		t.Fatalf("%d settlements succeeded", ok.Load())
	}
}

func TestSettlementErrorComesBack(t *testing.T) {
	f := newFakeServer(t)
	f.settled["d1"] = true // the server already settled it: E8004
	errs := make(chan error, 1)
	_, st, done := subscription(t, f, func(ctx context.Context, m *Message) error {
		errs <- m.Ack(ctx)
		return nil
	}, WithPolicy(Manual))
	st.consumed("d1", 1, 1)
	if err := recv(t, errs); herald.CodeOf(err) != herald.CodeInvalidDeliveryID {
		t.Fatalf("Ack of a settled delivery: %v, want E8004", err)
	}
	recv(t, done)
}

func TestTimeoutCancelsTheHandler(t *testing.T) {
	f := newFakeServer(t)
	started := make(chan struct{})
	results := make(chan []error, 1)
	_, st, done := subscription(t, f, func(ctx context.Context, m *Message) error {
		close(started)
		<-ctx.Done()
		results <- []error{context.Cause(ctx), m.Ack(ctx), m.Extend(ctx, time.Second)}
		return nil
	}, WithPolicy(Ack))
	st.consumed("d1", 1, 1)
	recv(t, started)
	st.timeout("d1")
	got := recv(t, results)
	m := recv(t, done)
	for i, err := range got {
		if !errors.Is(err, ErrLeaseExpired) || herald.CodeOf(err) != herald.CodeAckTimeout {
			t.Errorf("error %d: %v, want ErrLeaseExpired with E8003", i, err)
		}
	}
	if m.Settled() {
		t.Error("an expired message reports settled")
	}
	if stmts := f.drainStmts(); len(stmts) != 0 {
		t.Fatalf("statements after the lease expired: %q", stmts)
	}
}

func TestTimeoutOfAQueuedMessageDropsIt(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	release := make(chan struct{})
	handled := make(chan string, 10)
	read := make(chan string, 10)
	done := make(chan *Message, 10)
	sub, err := c.Subscribe(context.Background(), consumeWatch, func(ctx context.Context, m *Message) error {
		handled <- m.DeliveryID
		if m.DeliveryID == "d1" {
			<-release
		}
		return nil
	}, func(o *subOptions) {
		o.processed = func(m *Message) { done <- m }
		o.readHook = func(ev event) { read <- ev.Type + " " + ev.DeliveryID }
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close(context.Background())
	st := f.nextStream(t)
	st.consumed("d1", 1, 1)
	if id := recv(t, handled); id != "d1" {
		t.Fatalf("handled %s first", id)
	}
	st.consumed("d2", 2, 1)
	st.timeout("d2")
	st.consumed("d3", 3, 1)
	for _, want := range []string{"consumed d1", "consumed d2", "timeout d2", "consumed d3"} {
		if got := recv(t, read); got != want {
			t.Fatalf("read %q, want %q", got, want)
		}
	}
	sub.mu.Lock()
	queued := len(sub.queue)
	_, d2 := sub.live["d2"]
	sub.mu.Unlock()
	if queued != 1 || d2 {
		t.Fatalf("%d queued, d2 live %v; want d3 alone", queued, d2)
	}
	close(release)
	recv(t, done)
	if id := recv(t, handled); id != "d3" {
		t.Fatalf("handled %s after d1, want d3", id)
	}
	recv(t, done)
}

func TestConcurrency(t *testing.T) {
	f := newFakeServer(t)
	const n = 3
	var running, peak atomic.Int32
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	_, st, done := subscription(t, f, func(ctx context.Context, m *Message) error {
		r := running.Add(1)
		for {
			p := peak.Load()
			if r <= p || peak.CompareAndSwap(p, r) {
				break
			}
		}
		started <- struct{}{}
		<-release
		running.Add(-1)
		return nil
	}, WithConcurrency(n))
	for i := range 2 * n {
		st.consumed(fmt.Sprintf("d%d", i), i, 1)
	}
	for range n {
		recv(t, started) // n handlers run at the same time
	}
	close(release)
	for range 2 * n {
		recv(t, done)
	}
	if peak.Load() != n {
		t.Fatalf("peak concurrency %d, want %d", peak.Load(), n)
	}
	if stmts := f.drainStmts(); len(stmts) != 2*n {
		t.Fatalf("%d settlements, want %d", len(stmts), 2*n)
	}
}

func TestCloseDrainsInFlightAndLeavesTheRest(t *testing.T) {
	f := newFakeServer(t)
	started := make(chan string, 10)
	release := make(chan struct{})
	sub, st, _ := subscription(t, f, func(ctx context.Context, m *Message) error {
		started <- m.DeliveryID
		<-release
		return ctx.Err() // nil unless Close cancelled us
	}, WithConcurrency(1), WithPolicy(NackOnError))
	st.consumed("d1", 1, 1)
	st.consumed("d2", 2, 1)
	if id := recv(t, started); id != "d1" {
		t.Fatalf("started %s", id)
	}
	sub.stopDispatch() // Close's first step, taken here so the order is certain
	closed := make(chan error, 1)
	go func() { closed <- sub.Close(context.Background()) }()
	select {
	case <-st.gone:
		t.Fatal("the stream closed while a handler was running")
	case err := <-closed:
		t.Fatalf("Close returned %v while a handler was running", err)
	default:
	}
	close(release)
	if err := recv(t, closed); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st.waitGone(t)
	<-sub.Done()
	if sub.Err() != nil {
		t.Fatalf("Err after Close: %v", sub.Err())
	}
	if stmts := f.drainStmts(); !reflect.DeepEqual(stmts, []string{`ACK "d1"`}) {
		t.Fatalf("statements %q: d1 acked, d2 left to redelivery", stmts)
	}
	select {
	case id := <-started:
		t.Fatalf("%s started after Close", id)
	default:
	}
	if err := sub.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCloseGivesUpAtTheDeadline(t *testing.T) {
	f := newFakeServer(t)
	started := make(chan struct{})
	causes := make(chan error, 1)
	sub, st, done := subscription(t, f, func(ctx context.Context, m *Message) error {
		close(started)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return m.Ack(ctx)
	})
	st.consumed("d1", 1, 1)
	recv(t, started)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sub.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v, want context.Canceled", err)
	}
	if err := recv(t, causes); !errors.Is(err, ErrSubscriptionClosed) {
		t.Fatalf("handler context cause %v, want ErrSubscriptionClosed", err)
	}
	st.waitGone(t)
	recv(t, done)
	<-sub.Done()
}

func TestServerEndsTheStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(*fakeStream)
		code herald.Code
	}{
		{"eof", func(st *fakeStream) { close(st.out) }, ""},
		{"error event", func(st *fakeStream) {
			st.out <- &heraldv1.SubscribeResponse{Events: []*heraldv1.WatchEvent{{Type: "error", Code: "E5003", Message: "the server is stopping"}}}
		}, herald.CodeShuttingDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t)
			started := make(chan struct{})
			causes := make(chan error, 1)
			sub, st, _ := subscription(t, f, func(ctx context.Context, m *Message) error {
				close(started)
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return nil
			})
			st.consumed("d1", 1, 1)
			recv(t, started)
			tc.end(st)
			<-sub.Done()
			err := sub.Err()
			if err == nil || (tc.code != "" && herald.CodeOf(err) != tc.code) {
				t.Fatalf("Err = %v, want code %q", err, tc.code)
			}
			if cause := recv(t, causes); cause == nil {
				t.Fatal("handler context not cancelled")
			}
		})
	}
}

// TestCancelledContextEndsTheSubscription: cancelling Subscribe's context ends the
// subscription and its stream — gracefully, as a drain (TestCancelledContextDrains),
// so Err reports nothing.
func TestCancelledContextEndsTheSubscription(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	ctx, cancel := context.WithCancel(context.Background())
	sub, err := c.Subscribe(ctx, consumeWatch, func(context.Context, *Message) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	st := f.nextStream(t)
	cancel()
	<-sub.Done()
	st.waitGone(t)
	if err := sub.Err(); err != nil {
		t.Fatalf("Err = %v after a drain, want nil", err)
	}
}

func TestClientCloseStopsSubscriptions(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	sub, err := c.Subscribe(context.Background(), consumeWatch, func(context.Context, *Message) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	st := f.nextStream(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	<-sub.Done()
	st.waitGone(t)
	if _, err := c.Subscribe(context.Background(), consumeWatch, func(context.Context, *Message) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
}

func TestSubscribeErrors(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	ctx := context.Background()
	h := func(context.Context, *Message) error { return nil }
	for name, call := range map[string]func() error{
		"no handler":     func() error { _, err := c.Subscribe(ctx, consumeWatch, nil); return err },
		"bad policy":     func() error { _, err := c.Subscribe(ctx, consumeWatch, h, WithPolicy(Policy(42))); return err },
		"no concurrency": func() error { _, err := c.Subscribe(ctx, consumeWatch, h, WithConcurrency(0)); return err },
		"bad prefetch":   func() error { _, err := c.Subscribe(ctx, consumeWatch, h, WithPrefetch(-1)); return err },
	} {
		if err := call(); err == nil {
			t.Errorf("%s: Subscribe succeeded", name)
		}
	}
	f.mu.Lock()
	f.refuse = append(f.refuse, herald.Errorf(herald.CodeNotImplemented, "consume mode is not served"))
	f.mu.Unlock()
	_, err := c.Subscribe(ctx, consumeWatch, h)
	if herald.CodeOf(err) != herald.CodeNotImplemented {
		t.Fatalf("Subscribe against a server without consume mode: %v", err)
	}
}

// Prefetch is the stream's credit: the statement's text is sent as it is. SetPrefetch
// changes the credit while the subscription runs.
func TestSubscribeSendsPrefetchAndParams(t *testing.T) {
	f := newFakeServer(t)
	sub, st, _ := subscription(t, f, func(context.Context, *Message) error { return nil },
		WithPrefetch(7), WithParams(map[string]any{"min": 3, "since": time.Unix(5, 0)}))
	if st.query != consumeWatch || st.credit != 7 || st.maxCredit < 7 ||
		!reflect.DeepEqual(st.params, map[string]any{"min": int64(3), "since": "1970-01-01T00:00:05Z"}) {
		t.Fatalf("stream query %q credit %d/%d params %v", st.query, st.credit, st.maxCredit, st.params)
	}
	if err := sub.SetPrefetch(20); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, st.credits); got != 20 {
		t.Fatalf("credit %d, want 20", got)
	}
	if err := sub.SetPrefetch(0); err == nil {
		t.Fatal("a prefetch of 0 was accepted")
	}
}

func TestMalformedDeliveriesAreIgnored(t *testing.T) {
	f := newFakeServer(t)
	handled := make(chan string, 10)
	_, st, done := subscription(t, f, func(ctx context.Context, m *Message) error { handled <- m.DeliveryID; return nil })
	st.out <- &heraldv1.SubscribeResponse{Deliveries: []*heraldv1.Delivery{
		{DeliveryId: `a" ; KILL #x`, Attempt: 1, Seq: 1, Tick: 1},
		{DeliveryId: "", Attempt: 1, Seq: 1, Tick: 1},
	}, Events: []*heraldv1.WatchEvent{{Type: "something_new", Seq: 1, Tick: 1}}}
	st.out <- &heraldv1.SubscribeResponse{Deliveries: []*heraldv1.Delivery{{DeliveryId: "ok", Attempt: 1, Seq: 1, Tick: 1, Match: convert.ToWire(herald.Int(7))}}}
	if id := recv(t, handled); id != "ok" {
		t.Fatalf("handled %q", id)
	}
	m := recv(t, done)
	if !reflect.DeepEqual(m.Match, map[string]any{"value": int64(7)}) {
		t.Fatalf("match %v", m.Match)
	}
}

func TestPanicError(t *testing.T) {
	e := &PanicError{Value: "x"}
	if e.Error() != "client: handler panicked: x" {
		t.Fatal(e.Error())
	}
	for p, want := range map[Policy]string{AckFirst: "AckFirst", Ack: "Ack", RejectOnError: "RejectOnError", NackOnError: "NackOnError", Manual: "Manual", Policy(9): "Policy(9)"} {
		if p.String() != want {
			t.Errorf("%d.String() = %q", int(p), p.String())
		}
	}
}

// AckAsync and NackAsync return before the server answers: the handler goes on to the
// next message, and each future reports its settlement's outcome, an error the server
// returned included; a message settles once either way.
func TestAsyncSettlements(t *testing.T) {
	f := newFakeServer(t)
	f.settled["d2"] = true // the server already settled it: E8004
	futures := make(chan *SettleFuture, 3)
	again := make(chan error, 1)
	_, st, done := subscription(t, f, func(ctx context.Context, m *Message) error {
		switch m.DeliveryID {
		case "d1":
			futures <- m.AckAsync()
			again <- m.Ack(ctx)
		case "d2":
			futures <- m.AckAsync()
		default:
			futures <- m.NackAsync()
		}
		return nil
	}, WithPolicy(Manual))
	st.consumed("d1", 1, 1)
	st.consumed("d2", 2, 1)
	st.consumed("d3", 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, want := range []herald.Code{"", herald.CodeInvalidDeliveryID, ""} {
		err := recv(t, futures).Wait(ctx)
		if (want == "" && err != nil) || (want != "" && herald.CodeOf(err) != want) {
			t.Errorf("settlement %d: %v, want %q", i+1, err, want)
		}
	}
	if err := recv(t, again); !errors.Is(err, ErrSettled) {
		t.Errorf("Ack after AckAsync: %v, want ErrSettled", err)
	}
	recv(t, done)
	stmts := f.drainStmts()
	sort.Strings(stmts)
	if want := []string{`ACK "d1"`, `NACK "d3"`}; !reflect.DeepEqual(stmts, want) { // d2 was refused
		t.Fatalf("statements %q, want %q", stmts, want)
	}
}

// The future of the settlement that claims a message is part of the message, so a
// consumer that acks without waiting allocates no future for each message; a later
// attempt gets a future of its own, and the first one's outcome stands.
func TestAsyncSettlementUsesTheMessagesFuture(t *testing.T) {
	f := newFakeServer(t)
	type result struct {
		first, second *SettleFuture
		own           bool
	}
	got := make(chan result, 1)
	_, st, done := subscription(t, f, func(ctx context.Context, m *Message) error {
		first := m.AckAsync()
		second := m.NackAsync()
		got <- result{first: first, second: second, own: first == &m.fut}
		return nil
	}, WithPolicy(Manual))
	st.consumed("d1", 1, 1)
	r := recv(t, got)
	if !r.own {
		t.Error("the claiming AckAsync allocated a future of its own")
	}
	if r.second == r.first {
		t.Fatal("a second settlement reused the first one's future")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.second.Wait(ctx); !errors.Is(err, ErrSettled) {
		t.Errorf("NackAsync after AckAsync: %v, want ErrSettled", err)
	}
	if err := r.first.Wait(ctx); err != nil {
		t.Errorf("the AckAsync: %v", err)
	}
	recv(t, done)
}

// A handler's context ends once its handler has returned and its message is settled,
// however it was settled; not while the handler runs, and not while a Manual message
// waits for its settlement. Each one left uncancelled would stay linked to the
// subscription's context for as long as the subscription runs.
func TestHandlerContextEndsWithItsMessage(t *testing.T) {
	type seen struct {
		ctx       context.Context
		errDuring error
	}
	for _, tc := range []struct {
		name   string
		policy Policy
		h      func(context.Context, *Message) error
		later  func(*Message) // settles a message the handler left
	}{
		{name: "auto ack", policy: NackOnError, h: func(context.Context, *Message) error { return nil }},
		{name: "auto nack", policy: NackOnError, h: func(context.Context, *Message) error { return errBoom }},
		{name: "ack first", policy: AckFirst, h: func(context.Context, *Message) error { return nil }},
		{name: "manual ack in the handler", policy: Manual, h: func(ctx context.Context, m *Message) error { return m.Ack(ctx) }},
		{name: "manual async ack in the handler", policy: Manual, h: func(ctx context.Context, m *Message) error { return m.AckAsync().Wait(ctx) }},
		{name: "manual ack later", policy: Manual, h: func(context.Context, *Message) error { return nil },
			later: func(m *Message) { _ = m.Ack(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t)
			ctxs := make(chan seen, 1)
			_, st, done := subscription(t, f, func(ctx context.Context, m *Message) error {
				err := tc.h(ctx, m)
				ctxs <- seen{ctx, ctx.Err()}
				return err
			}, WithPolicy(tc.policy))
			st.consumed("d1", 1, 1)
			m := recv(t, done)
			s := recv(t, ctxs)
			if s.errDuring != nil {
				t.Fatalf("the context ended while the handler ran: %v", s.errDuring)
			}
			if tc.later != nil {
				if err := s.ctx.Err(); err != nil {
					t.Fatalf("the context of an unsettled Manual message ended: %v", err)
				}
				tc.later(m)
			}
			select {
			case <-s.ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the context did not end after the message was settled")
			}
			if cause := context.Cause(s.ctx); !errors.Is(cause, ErrSettled) {
				t.Fatalf("cause %v, want ErrSettled", cause)
			}
		})
	}
}

// A settlement whose stream ends before the server answers may have committed or not:
// it says so with its own code (E4023), not as an expired lease (E8003), which would
// say that nothing changed.
func TestSettlementOutcomeUnknownWhenTheStreamEnds(t *testing.T) {
	f := newFakeServer(t)
	gate := make(chan struct{})
	f.mu.Lock()
	f.gate = gate // the settlement reaches the server, which does not answer yet
	f.mu.Unlock()
	defer close(gate)
	got := make(chan *Message, 1)
	_, st, _ := subscription(t, f, func(_ context.Context, m *Message) error { got <- m; return nil }, WithPolicy(Manual))
	st.consumed("d1", 1, 1)
	m := recv(t, got)
	acked := make(chan error, 1)
	go func() { acked <- m.Ack(context.Background()) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		f.mu.Lock()
		sent := len(f.batches) > 0
		f.mu.Unlock()
		if sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ACK never reached the server")
		}
	}
	close(st.out) // the stream ends before the answer
	err := recv(t, acked)
	if !errors.Is(err, herald.CodeOutcomeUnknown) || errors.Is(err, herald.CodeAckTimeout) || errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("ACK on a stream that ended: %v (code %s), want E4023 and not an expired lease", err, herald.CodeOf(err))
	}
}
