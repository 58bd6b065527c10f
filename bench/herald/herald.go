// Package herald is the benchmark adapter for Herald itself: messages are BenchMsg nodes
// published with SPAWN and consumed by a consume-mode WATCH with manual ACK and NACK.
// It drives the server through the Go client, exactly as an application would.
package herald

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/herald-mq/herald/bench"
	"github.com/herald-mq/herald/client"
)

// Type is the node type of benchmark messages; Setup declares it and deletes its nodes.
const Type = "BenchMsg"

// Group is the consumer group the benchmark's consumers share.
const Group = "herald-bench"

// watch is the consume-mode statement each consumer runs; its prefetch is the stream's
// credit.
var watch = fmt.Sprintf(`WATCH m: %s [mode: consume, group: %q] RETURN m.body AS body`, Type, Group)

// Broker drives one Herald server.
type Broker struct {
	c          *client.Client
	name       string
	durability string
	meter      func(flush bool) (syncs, walBytes, tableBytes uint64)
}

var _ bench.Broker = (*Broker)(nil)

// Open connects to the server at url (e.g. "http://127.0.0.1:7420"). durability
// describes how that server was started, for the report; "" states the default. meter,
// when not nil, reads the server's store counters (an in-process server's
// server.Server.StoreCounters).
func Open(ctx context.Context, url, durability string, meter func(flush bool) (syncs, walBytes, tableBytes uint64)) (*Broker, error) {
	c, err := client.Dial(ctx, url, client.WithTimeout(30*time.Second), client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	if durability == "" {
		durability = "Herald server at " + url + " (Pebble store; by default each commit's WAL write is fsynced before the answer)"
	}
	return &Broker{c: c, name: "herald", durability: durability, meter: meter}, nil
}

// Named sets the name the reports show for this server, "herald" unless set: a second
// Herald target in one run, such as one on another store, needs a name of its own.
func (b *Broker) Named(name string) *Broker {
	b.name = name
	return b
}

// ForRunner returns the broker as bench.Run should see it: a bench.StoreMeter when Open
// was given a meter (an in-process server, whose CPU time is the process's too), else
// b, whose server's store and CPU the bench cannot read.
func (b *Broker) ForRunner() bench.Broker {
	if b.meter == nil {
		return b
	}
	return metered{b}
}

// metered is a Broker whose server runs in the process.
type metered struct{ *Broker }

var _ bench.StoreMeter = metered{}

// StoreCounters implements bench.StoreMeter.
func (m metered) StoreCounters(flush bool) (syncs, walBytes, tableBytes uint64) {
	return m.meter(flush)
}

// Name implements bench.Broker.
func (b *Broker) Name() string { return b.name }

// Durability implements bench.Broker.
func (b *Broker) Durability() string { return b.durability }

// Setup implements bench.Broker: it declares the message type (declaring it again is
// harmless) and deletes every message left from an earlier run.
func (b *Broker) Setup(ctx context.Context) error {
	if _, err := b.c.Exec(ctx, "node "+Type+" { body: String }", nil); err != nil {
		return err
	}
	_, err := b.c.Exec(ctx, "MATCH m: "+Type+" KILL m", nil)
	return err
}

// Publish implements bench.Broker: the client's publish stream answers once the commit
// is durable; concurrent publishes share frames and commits.
func (b *Broker) Publish(ctx context.Context, payload []byte) error {
	_, err := b.c.Publish(ctx, Type, map[string]any{"body": string(payload)})
	return err
}

// Check subscribes once and closes at once, to tell whether the server serves
// consume-mode watches at all.
func (b *Broker) Check(ctx context.Context) error {
	sub, err := b.c.Subscribe(ctx, watch, func(context.Context, *client.Message) error { return nil },
		client.WithPolicy(client.Manual))
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return sub.Close(cctx)
}

// Consume implements bench.Broker with n subscriptions to one group, each with its own
// stream and prefetch as its credit, settling manually. Like the peers' consumers, each
// runs one handler at a time and does not wait for its ACK (or NACK) to be confirmed:
// AckAsync queues it, the server confirms it once it is durable, and only then is its
// credit back. A settlement that fails fails the run; the phase's end waits for every
// settlement made to be confirmed.
func (b *Broker) Consume(ctx context.Context, n, prefetch int, handler func(context.Context, bench.Msg) error) (err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var once sync.Once
	var failure error
	fail := func(err error) {
		once.Do(func() {
			failure = err
			cancel(err)
		})
	}
	// Settlements are checked in the order made, by one goroutine per consumer.
	var pending atomic.Int64
	checks := make([]chan *client.SettleFuture, 0, n)
	var checkers sync.WaitGroup
	// The streams outlive ctx until Close has stopped them gracefully: unsettled
	// deliveries go back to the queue at once.
	subCtx, subCancel := context.WithCancel(context.WithoutCancel(ctx))
	subs := make([]*client.Subscription, 0, n)
	defer func() {
		for end := time.Now().Add(5 * time.Second); pending.Load() > 0 && time.Now().Before(end); {
			time.Sleep(time.Millisecond) // the last settlements are still syncing
		}
		cctx, ccancel := context.WithTimeout(subCtx, 5*time.Second)
		defer ccancel()
		for _, s := range subs {
			_ = s.Close(cctx)
		}
		subCancel()
		for _, c := range checks {
			close(c)
		}
		checkers.Wait()
		if err == nil && failure != nil {
			err = failure // a settlement confirmed after the phase ended failed
		}
	}()
	for range n {
		check := make(chan *client.SettleFuture, prefetch)
		checks = append(checks, check)
		checkers.Go(func() {
			for f := range check {
				if err := f.Err(); err != nil {
					fail(fmt.Errorf("herald: a settlement failed: %w", err))
				}
				pending.Add(-1)
			}
		})
		sub, err := b.c.Subscribe(subCtx, watch, func(hctx context.Context, m *client.Message) error {
			body, ok := m.Match["body"].(string)
			if !ok {
				fail(fmt.Errorf("herald: delivery %s has no string body: %v", m.DeliveryID, m.Match))
				return nil
			}
			// The body is lent to the handler as bytes without a copy, as the other
			// clients hand theirs over: handlers only read it (bench.Msg).
			payload := unsafe.Slice(unsafe.StringData(body), len(body))
			if err := handler(hctx, msg{m: m, body: payload, check: check, pending: &pending}); err != nil {
				fail(err)
			}
			return nil
		}, client.WithPolicy(client.Manual), client.WithPrefetch(prefetch))
		if err != nil {
			return err
		}
		subs = append(subs, sub)
		go func() {
			select {
			case <-sub.Done():
				if err := sub.Err(); err != nil {
					fail(fmt.Errorf("herald: stream ended: %w", err))
				}
			case <-ctx.Done():
			}
		}()
	}
	<-ctx.Done()
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// Close implements bench.Broker.
func (b *Broker) Close() error { return b.c.Close() }

type msg struct {
	m       *client.Message
	body    []byte
	check   chan<- *client.SettleFuture
	pending *atomic.Int64
}

func (m msg) Payload() []byte { return m.body }

// Ack queues ACK with the delivery id and returns; the settlement is confirmed once
// durable (see Consume).
func (m msg) Ack(ctx context.Context) error { return m.queue(ctx, m.m.AckAsync()) }

// Nack queues NACK with the delivery id: the message is redelivered, attempt + 1.
func (m msg) Nack(ctx context.Context) error { return m.queue(ctx, m.m.NackAsync()) }

func (m msg) queue(ctx context.Context, f *client.SettleFuture) error {
	m.pending.Add(1)
	select {
	case m.check <- f:
		return nil // the usual case, without making ctx's Done channel
	default:
	}
	select {
	case m.check <- f:
		return nil
	case <-ctx.Done():
		m.pending.Add(-1)
		return ctx.Err()
	}
}
