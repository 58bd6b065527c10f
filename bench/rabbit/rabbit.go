// Package rabbit is the benchmark adapter for RabbitMQ: a durable quorum queue,
// publisher confirms, and consumers with manual acknowledgement.
// It is the only package of this module that imports the AMQP 0-9-1 client.
package rabbit

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herald-mq/herald/bench"
)

// DefaultURL is the local RabbitMQ server the benchmark talks to.
const DefaultURL = "amqp://guest:guest@127.0.0.1:5672/"

// Queue is the quorum queue Setup recreates.
const Queue = "herald-bench"

// publishers is how many confirm channels Publish spreads over.
const publishers = 8

// Broker drives one RabbitMQ server.
type Broker struct {
	conn    *amqp.Connection
	version string
	pool    chan *amqp.Channel // confirm-mode channels for Publish
}

var _ bench.Broker = (*Broker)(nil)

// Open connects to url.
func Open(ctx context.Context, url string) (*Broker, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{Properties: amqp.Table{"connection_name": "herald-bench"}})
	if err != nil {
		return nil, err
	}
	b := &Broker{conn: conn, pool: make(chan *amqp.Channel, publishers)}
	if v, ok := conn.Properties["version"].(string); ok {
		b.version = v
	}
	for range publishers {
		ch, err := conn.Channel()
		if err == nil {
			err = ch.Confirm(false)
		}
		if err != nil {
			conn.Close()
			return nil, err
		}
		b.pool <- ch
	}
	return b, nil
}

// Name implements bench.Broker.
func (b *Broker) Name() string { return "rabbitmq" }

// Durability implements bench.Broker.
func (b *Broker) Durability() string {
	v := ""
	if b.version != "" {
		v = " " + b.version
	}
	return fmt.Sprintf("RabbitMQ%s durable quorum queue on 1 node, persistent messages: "+
		"the publisher confirm follows the fsync of the Raft log", v)
}

// Setup implements bench.Broker: it deletes and redeclares the quorum queue.
func (b *Broker) Setup(ctx context.Context) error {
	ch, err := b.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if _, err := ch.QueueDelete(Queue, false, false, false); err != nil {
		return err
	}
	_, err = ch.QueueDeclare(Queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	return err
}

// Publish implements bench.Broker: it waits for the broker's confirm and fails on a
// negative one.
func (b *Broker) Publish(ctx context.Context, payload []byte) error {
	var ch *amqp.Channel
	select {
	case ch = <-b.pool:
	case <-ctx.Done():
		return ctx.Err()
	}
	// The channel goes back as soon as the message is sent: other publishes go out on
	// it while this one waits for its confirm.
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", Queue, false, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent,
		ContentType:  "application/octet-stream",
		Body:         payload,
	})
	b.pool <- ch
	if err != nil {
		return err
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("rabbitmq: publish nacked by the broker")
	}
	return nil
}

// Consume implements bench.Broker with n channels, each with one consumer and a
// prefetch window; closing them requeues what they held unacknowledged.
func (b *Broker) Consume(ctx context.Context, n, prefetch int, handler func(context.Context, bench.Msg) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var once sync.Once
	fail := func(err error) { once.Do(func() { cancel(err) }) }
	var wg sync.WaitGroup
	for i := range n {
		ch, err := b.conn.Channel()
		if err != nil {
			fail(err)
			break
		}
		tag := fmt.Sprintf("herald-bench-%d", i)
		// The consumer is cancelled, its remaining deliveries drained (closing a
		// channel whose deliveries nobody reads blocks the connection) and the channel
		// closed, in this order, one step after the other; the close requeues what the
		// channel held unacknowledged.
		var deliveries <-chan amqp.Delivery
		defer func() {
			if deliveries != nil {
				_ = ch.Cancel(tag, false)
				for range deliveries {
				}
			}
			_ = ch.Close()
		}()
		if err := ch.Qos(prefetch, 0, false); err != nil {
			fail(err)
			break
		}
		deliveries, err = ch.Consume(Queue, tag, false, false, false, false, nil)
		if err != nil {
			deliveries = nil
			fail(err)
			break
		}
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case d, ok := <-deliveries:
					if !ok {
						fail(errors.New("rabbitmq: delivery channel closed"))
						return
					}
					if err := handler(ctx, msg{d}); err != nil {
						fail(err)
						return
					}
				}
			}
		})
	}
	<-ctx.Done()
	wg.Wait()
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// Close implements bench.Broker.
func (b *Broker) Close() error { return b.conn.Close() }

type msg struct{ d amqp.Delivery }

func (m msg) Payload() []byte { return m.d.Body }

// Ack acknowledges this delivery alone; AMQP acks are not confirmed by the broker.
func (m msg) Ack(ctx context.Context) error { return m.d.Ack(false) }

// Nack rejects this delivery with requeue, so the queue delivers it again.
func (m msg) Nack(ctx context.Context) error { return m.d.Nack(false, true) }
