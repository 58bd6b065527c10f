package client

import (
	"context"

	"github.com/herald-mq/herald"
)

// Decode stores the message's match in the value v points to, through the message's
// Codec: the client's (JSON unless Dial's WithCodec set another), JSON for a Message
// built by hand without one.
// For `RETURN m`, the whole node, a struct receives the node's attributes by name and
// its id in a field named "id".
func (m *Message) Decode(v any) error {
	return m.codec().Unmarshal(m.Match, v)
}

func (m *Message) codec() Codec {
	if m.Codec != nil {
		return m.Codec
	}
	if m.sub != nil {
		return m.sub.c.codec
	}
	return JSON
}

// Job is a message with its payload decoded: what a Worker receives. The Message's
// methods (Ack, NackAfter, Extend, Attempt, …) are the job's.
type Job[T any] struct {
	*Message
	// Payload is the message's match decoded into a T.
	Payload T
}

// Worker processes the messages of a consume watch as values of type T, in the style
// of River's workers: Work's returned error decides the settlement through the
// subscription's policy (nil: ACK; an error: NACK under NackOnError, the default;
// herald.NackAfter and herald.Reject choose for themselves).
type Worker[T any] interface {
	Work(ctx context.Context, job *Job[T]) error
}

// WorkFunc is a function that is a Worker.
type WorkFunc[T any] func(ctx context.Context, job *Job[T]) error

// Work calls f.
func (f WorkFunc[T]) Work(ctx context.Context, job *Job[T]) error { return f(ctx, job) }

// Typed returns a Handler that decodes each message into a T and hands it to w. A
// message that does not decode is rejected — dead-lettered at once, since no retry
// can make it fit — with the decoding error (E4019) as the reason.
func Typed[T any](w Worker[T]) Handler {
	return func(ctx context.Context, m *Message) error {
		j := &Job[T]{Message: m}
		if err := m.Decode(&j.Payload); err != nil {
			return herald.Reject(err)
		}
		return w.Work(ctx, j)
	}
}

// Work starts a consume watch built from cfg and runs w on every message, decoded
// into a T: Client.Consume with a Typed handler.
func Work[T any](ctx context.Context, c *Client, cfg ConsumerConfig, w Worker[T], opts ...SubscribeOption) (*Subscription, error) {
	if w == nil {
		return nil, invalid("Work needs a worker")
	}
	return c.Consume(ctx, cfg, Typed(w), opts...)
}

// Settle settles m as a subscription under policy p settles a message whose handler
// returned err (the table in the package documentation), unless m is settled already.
// Tests of handlers use it on a Message they built: it calls no server there, and
// Settlement then says what the subscription would have done.
func (p Policy) Settle(ctx context.Context, m *Message, err error) error {
	act, delay := decide(p, err)
	if act == actNone || m.Settled() {
		return nil
	}
	return settleBy(ctx, m, act, delay)
}
