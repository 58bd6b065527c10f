// Package bench measures brokers with one workload: publish with confirmation, consume
// with explicit acknowledgement, end-to-end latency, and redelivery after a negative ack.
// A Broker adapter per system (Herald, NATS JetStream, RabbitMQ, Redis Streams) lives in
// its own package below bench, so that each client library stays confined to one place.
package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Broker is one system under test, as the scenarios drive it. Implementations must be
// safe for concurrent Publish calls and for Ack and Nack from several handlers at once.
type Broker interface {
	// Name is the short system name shown in reports, e.g. "nats".
	Name() string
	// Durability describes when the broker confirms a publish and what survives a
	// crash at that point, in one line.
	Durability() string
	// Setup creates the queue or stream if needed and leaves it empty, with no consumer
	// state left from an earlier run.
	Setup(ctx context.Context) error
	// Publish sends one message and returns only once the broker has confirmed it
	// according to its durability setting. It is called from many goroutines at once:
	// the workload keeps that many publishes in flight.
	Publish(ctx context.Context, payload []byte) error
	// Consume runs n competing consumers, each holding at most prefetch unsettled
	// deliveries, and calls handler once per delivery, possibly from several goroutines
	// at once. It blocks until ctx is done (then it returns nil) or until consuming
	// fails. A handler error stops Consume and is returned.
	Consume(ctx context.Context, n, prefetch int, handler func(ctx context.Context, m Msg) error) error
	// Close releases the connections.
	Close() error
}

// Msg is one delivery. A handler settles it exactly once with Ack or Nack.
type Msg interface {
	// Payload is the message body. It may share memory with the client's copy of the
	// message: read it, never change it.
	Payload() []byte
	// Ack settles the delivery as processed.
	Ack(ctx context.Context) error
	// Nack hands the message back for redelivery as soon as possible.
	Nack(ctx context.Context) error
}

// ErrPayload reports a payload that was not made by NewPayload.
var ErrPayload = errors.New("bench: malformed payload")

// payloadHeader is the fixed prefix of a payload: a 16-digit hex id, a space, a
// 19-digit Unix time in nanoseconds, a space.
const payloadHeader = 16 + 1 + 19 + 1

// MinPayloadSize is the smallest payload NewPayload makes.
const MinPayloadSize = payloadHeader

// NewPayload returns a printable payload of size bytes (at least MinPayloadSize) that
// carries the message id and the time it was sent. Printable text travels unchanged
// through every broker, including Herald's string attributes.
func NewPayload(id uint64, sent time.Time, size int) []byte {
	size = max(size, MinPayloadSize)
	b := make([]byte, 0, size)
	b = fmt.Appendf(b, "%016x %019d ", id, sent.UnixNano())
	for len(b) < size {
		b = append(b, 'a'+byte(len(b)%26))
	}
	return b
}

// ParsePayload returns the id and send time that NewPayload put in p.
func ParsePayload(p []byte) (id uint64, sent time.Time, err error) {
	if len(p) < payloadHeader || p[16] != ' ' || p[36] != ' ' {
		return 0, time.Time{}, ErrPayload
	}
	id, err = strconv.ParseUint(string(p[:16]), 16, 64)
	if err != nil {
		return 0, time.Time{}, ErrPayload
	}
	ns, err := strconv.ParseInt(string(p[17:36]), 10, 64)
	if err != nil {
		return 0, time.Time{}, ErrPayload
	}
	return id, time.Unix(0, ns), nil
}
