package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/tracing"
)

// Message is one delivery of a consume watch: a match leased to this subscriber until
// it is settled, its lease expires, or the subscription closes.
//
// A Message built by hand (client.Message{Match: …}), as a handler's unit test does,
// has no subscription: settling it records the settlement (see Settlement) and calls no
// server, so a handler that settles its messages itself can be tested without one.
type Message struct {
	// Match is the watch's match: for `RETURN v` of the message's own variable, the node
	// itself (its "id", "_type" and attributes); otherwise the RETURN row, column name (or
	// alias) to value. Numbers are int64 or float64, Bytes are []byte (the message's own
	// copy), nodes are maps.
	//
	// The strings of Match and DeliveryID share the memory of the frame the message
	// came in (a few dozen messages' worth), rather than a copy each: a program that
	// keeps many of them long after their messages are settled keeps their frames too,
	// and should keep copies (strings.Clone) instead.
	Match map[string]any
	// DeliveryID identifies this attempt; holding it is what allows settling it.
	DeliveryID string
	// Attempt is 1 for the first delivery; each NACK or expired lease adds one. A
	// delivery given back because its subscriber left does not count.
	Attempt int
	// Releases counts earlier deliveries given back because their subscriber left
	// (closed, or disconnected) before settling them.
	Releases int
	// Seq and Tick are the store position the match was read at.
	Seq  uint64
	Tick uint64
	// Deadline is when the lease expires unless extended, as the server said on delivery
	// (Extend does not update it); zero if the server did not say.
	Deadline time.Time
	// Codec is what Decode reads Match with. Nil, as it is on delivery, means the
	// client's codec (WithCodec), and JSON for a Message built by hand.
	Codec Codec

	sub    *Subscription
	conn   *consumeConn    // the stream it came on, which settles it
	ctx    context.Context // the handler's context; cancelled when the lease is gone
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	settled  string     // "" while unsettled, else what settled it
	expired  error      // set when the server reported the lease gone
	returned bool       // the handler has returned (or will not run)
	gone     bool       // the subscription forgot the message: it can no longer be settled
	span     trace.Span // the consumer span of its handling, ended with its context

	// fut is the future of the one settlement without waiting that claims the message
	// (settleAsync): part of the message, not an allocation of its own.
	fut SettleFuture
}

// finished records that the handler returned (handler) or that the message can no
// longer be settled (!handler), and cancels the handler's context once both hold. The
// context is linked to the subscription's until it is cancelled, so one left alone
// would stay there, with its share of memory, for as long as the subscription runs.
func (m *Message) finished(handler bool) {
	m.mu.Lock()
	if handler {
		m.returned = true
	} else {
		m.gone = true
	}
	end := m.returned && m.gone
	var span trace.Span
	if end {
		span, m.span = m.span, nil
	}
	m.mu.Unlock()
	if end {
		m.cancel(ErrSettled)
		if span != nil {
			span.End()
		}
	}
}

// traced records a settlement (or the lease's end) as an event of the message's span.
func (m *Message) traced(how string, err error) {
	m.mu.Lock()
	span := m.span
	m.mu.Unlock()
	tracing.Settled(span, how, err)
}

// Settled reports whether the message has been settled (or a settlement was attempted).
func (m *Message) Settled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.settled != ""
}

// Settlement says how the message was settled: "ack", "nack", "reject", or "" while it
// is not. Tests of handlers read it from a Message they built.
func (m *Message) Settlement() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.settled
}

// Ack settles the message as done: the server deletes its subject.
func (m *Message) Ack(ctx context.Context) error {
	return m.settle(ctx, "ack", 0)
}

// Nack returns the message to its queue for redelivery (after the watch's backoff).
func (m *Message) Nack(ctx context.Context) error {
	return m.settle(ctx, "nack", 0)
}

// NackAfter returns the message to its queue, to be redelivered no earlier than d from
// now. d <= 0 is a plain Nack.
func (m *Message) NackAfter(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return m.Nack(ctx)
	}
	return m.settle(ctx, "nack", d)
}

// Reject dead-letters the message at once, without a retry.
func (m *Message) Reject(ctx context.Context) error {
	return m.settle(ctx, "reject", 0)
}

// Extend pushes the lease's deadline d further (d <= 0: by the watch's ack_timeout). It
// does not settle the message and may be called any number of times before it is.
func (m *Message) Extend(ctx context.Context, d time.Duration) error {
	m.mu.Lock()
	switch {
	case m.expired != nil:
		m.mu.Unlock()
		return m.expired
	case m.settled != "":
		m.mu.Unlock()
		return ErrSettled
	}
	m.mu.Unlock()
	if m.sub == nil {
		return nil // built by hand: nothing to extend
	}
	err := m.conn.settle(ctx, settlement(m.DeliveryID, "extend", d)).err
	m.traced("extend", err)
	return err
}

// AckAsync is Ack without waiting: it queues the ACK (sent with the other settlements
// of the moment) and returns at once. The future reports the outcome once the server
// has answered, that is once the ACK is durable; until then the delivery still counts
// against the subscription's prefetch, and an ACK the server refuses (the lease expired
// meanwhile) is redelivered as any unsettled message is. A handler that acks this way
// can take the next message while the last one's ACK is syncing.
func (m *Message) AckAsync() *SettleFuture { return m.settleAsync("ack", 0) }

// NackAsync is Nack without waiting, as AckAsync is Ack.
func (m *Message) NackAsync() *SettleFuture { return m.settleAsync("nack", 0) }

func (m *Message) settleAsync(how string, delay time.Duration) *SettleFuture {
	if err := m.claim(how); err != nil {
		f := &SettleFuture{done: make(chan struct{}), m: m}
		f.finish(err)
		return f
	}
	// Only the one claim that succeeds gets here, so the message's own future is free.
	f := &m.fut
	f.done, f.m = make(chan struct{}), m
	if m.sub == nil {
		f.finish(nil) // built by hand: the claim is the whole settlement
		return f
	}
	m.conn.settleAsync(settlement(m.DeliveryID, how, delay), f)
	return f
}

// SettleFuture is the outcome of a settlement made without waiting (AckAsync,
// NackAsync).
type SettleFuture struct {
	done chan struct{}
	err  error
	m    *Message
}

// settled takes the server's answer: the message is forgotten, the future done.
func (f *SettleFuture) settled(out settleOutcome) {
	f.m.traced(f.m.Settlement(), out.err)
	f.m.sub.forget(f.m)
	f.finish(out.err)
}

// Done is closed once the server has answered (or the subscription's stream ended).
func (f *SettleFuture) Done() <-chan struct{} { return f.done }

// Err is the settlement's outcome once Done is closed: nil when it took effect.
func (f *SettleFuture) Err() error {
	<-f.done
	return f.err
}

// Wait waits for the outcome, or for ctx (the settlement still completes then).
func (f *SettleFuture) Wait(ctx context.Context) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *SettleFuture) finish(err error) {
	f.err = err
	close(f.done)
}

// claim marks m settled by how, or says why it cannot be.
func (m *Message) claim(how string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.expired != nil:
		return m.expired
	case m.settled != "":
		return fmt.Errorf("%w (%s)", ErrSettled, m.settledHow())
	}
	m.settled = how
	return nil
}

// settle makes the one settlement of m: how is ack, nack (after delay, if positive) or
// reject.
func (m *Message) settle(ctx context.Context, how string, delay time.Duration) error {
	if err := m.claim(how); err != nil {
		return err
	}
	if m.sub == nil {
		return nil // built by hand: the claim is the whole settlement
	}
	err := m.conn.settle(ctx, settlement(m.DeliveryID, how, delay)).err
	m.traced(how, err)
	m.sub.forget(m)
	return err
}

func (m *Message) settledHow() string { return m.settled }

// expire marks the lease gone because of cause and cancels the handler's context.
// It reports whether the message was still unsettled.
func (m *Message) expire(cause error) bool {
	m.mu.Lock()
	open := m.settled == "" && m.expired == nil
	if open {
		m.expired = cause
	}
	m.mu.Unlock()
	if open {
		m.traced("expired", cause)
	}
	m.cancel(cause)
	return open
}

// timeoutError is the error of a timeout event: the server's *herald.Error (E8003),
// which unwraps to ErrLeaseExpired.
func timeoutError(code herald.Code, msg string) error {
	if code == "" {
		code = herald.CodeAckTimeout
	}
	if msg == "" {
		msg = "the lease expired before it was settled"
	}
	return &herald.Error{Code: code, Message: msg, Err: ErrLeaseExpired}
}

// validID reports whether id is a URL-safe delivery id, as the server issues them.
func validID(id string) bool {
	if id == "" || len(id) > 256 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~') {
			return false
		}
	}
	return true
}
