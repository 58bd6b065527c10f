// Package nats is the benchmark adapter for NATS JetStream: a work-queue stream on file
// storage, confirmed publishes, and a durable pull consumer with explicit acks.
// It is the only package of this module that imports the NATS client.
package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/herald-mq/herald/bench"
)

// DefaultURL is the local NATS server the benchmark talks to.
const DefaultURL = "nats://127.0.0.1:4222"

// Names of what the adapter creates; Setup deletes and recreates them.
const (
	Stream   = "HERALD_BENCH"
	Subject  = "herald.bench"
	Consumer = "herald-bench"
)

// Broker drives one NATS server.
type Broker struct {
	nc *natsgo.Conn
	js jetstream.JetStream
}

var _ bench.Broker = (*Broker)(nil)

// Open connects to url and checks that JetStream is enabled.
func Open(ctx context.Context, url string) (*Broker, error) {
	nc, err := natsgo.Connect(url, natsgo.Timeout(3*time.Second), natsgo.MaxReconnects(0), natsgo.Name("herald-bench"))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Broker{nc: nc, js: js}, nil
}

// Name implements bench.Broker.
func (b *Broker) Name() string { return "nats" }

// Durability implements bench.Broker. The server's sync interval is not visible to a
// client; the default is stated.
func (b *Broker) Durability() string {
	return "JetStream file storage, 1 replica: the PubAck follows the write to the store file; " +
		"the server fsyncs every 2 min by default (sync_interval), not before the ack"
}

// Setup implements bench.Broker: it recreates the work-queue stream, which drops its
// messages and its consumer.
func (b *Broker) Setup(ctx context.Context) error {
	if err := b.js.DeleteStream(ctx, Stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	_, err := b.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:      Stream,
		Subjects:  []string{Subject},
		Retention: jetstream.WorkQueuePolicy,
		Storage:   jetstream.FileStorage,
		Replicas:  1,
	})
	return err
}

// Publish implements bench.Broker: it returns once the server sent its PubAck.
func (b *Broker) Publish(ctx context.Context, payload []byte) error {
	_, err := b.js.Publish(ctx, Subject, payload)
	return err
}

// Consume implements bench.Broker with one durable pull consumer and n subscriptions
// to it; each subscription calls the handler from its own goroutine.
func (b *Broker) Consume(ctx context.Context, n, prefetch int, handler func(context.Context, bench.Msg) error) error {
	cons, err := b.js.CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{
		Durable:       Consumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: 10000,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var ccs []jetstream.ConsumeContext
	defer func() {
		for _, cc := range ccs {
			cc.Stop()
		}
	}()
	var once sync.Once
	fail := func(err error) { once.Do(func() { cancel(err) }) }
	for range n {
		cc, err := cons.Consume(func(m jetstream.Msg) {
			if ctx.Err() != nil {
				return
			}
			if err := handler(ctx, msg{m}); err != nil {
				fail(err)
			}
		}, jetstream.PullMaxMessages(prefetch), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConnectionClosed) {
				fail(err)
			}
		}))
		if err != nil {
			return err
		}
		ccs = append(ccs, cc)
	}
	<-ctx.Done()
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// Close implements bench.Broker.
func (b *Broker) Close() error {
	b.nc.Close()
	return nil
}

type msg struct{ m jetstream.Msg }

func (m msg) Payload() []byte { return m.m.Data() }

// Ack sends the acknowledgement without waiting for the server's reply, as JetStream
// consumers usually do.
func (m msg) Ack(ctx context.Context) error { return m.m.Ack() }

// Nack asks for redelivery at once.
func (m msg) Nack(ctx context.Context) error { return m.m.Nak() }
