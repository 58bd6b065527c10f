// Package delivery runs consume-mode watches: groups of consumers, ready queues ordered
// by arrival, attributes and fairness keys, durable leases with ack timeouts, ACK, NACK,
// EXTEND, backoff and dead letters.
// Every state change commits through the engine's pipeline, so leases survive a crash.
package delivery

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/option"
)

// Defaults of consume-mode options (see lang/option).
const (
	DefaultAckTimeout      = option.DefaultAckTimeout
	DefaultMaxRedeliveries = option.DefaultMaxRedeliveries
	DefaultBuffer          = option.DefaultBuffer
)

// Event types sent to consumers (the stream types are the root package's).
const (
	EventConsumed = herald.EventConsumed
	EventTimeout  = herald.EventTimeout
	EventError    = herald.EventError
	EventWarning  = herald.EventWarning
)

// Event is one message on a consumer's stream.
type Event = herald.Event

// NackOptions modify a NACK.
type NackOptions struct {
	NoRetry bool          // dead-letter at once with reason no_retry
	Delay   time.Duration // redeliver no earlier than this (overrides the watch's backoff)
}

// Dead-letter reasons.
const (
	ReasonNoRetry         = "no_retry"
	ReasonMaxRedeliveries = "max_redeliveries_exceeded"
)

// Stream is one consumer's view of a consume watch; Close releases its unsettled leases
// at once, so they are redelivered without waiting for their ack timeout.
type Stream = herald.Stream

// Consumer is a consume stream with credit-based flow control: the server has at most
// Credit unsettled deliveries out to it at once.
type Consumer interface {
	Stream
	// SetCredit changes the credit, from 1 up to the stream's largest credit (E4001
	// otherwise). Raising it lets more deliveries out at once; lowering it holds new ones
	// back until settlements bring the count under it.
	SetCredit(n int) error
}

// Handle names a lease without being its capability: it is a hash of the delivery id.
// The server keeps handles, never delivery ids, in anything a client can read (the
// queue API's lock records them so), and only internal callers settle by handle.
type Handle [16]byte

// HandleOf returns the handle of a delivery id.
func HandleOf(deliveryID string) Handle {
	sum := sha256.Sum256([]byte(deliveryID))
	var h Handle
	copy(h[:], sum[:16])
	return h
}

// String renders a handle in hex.
func (h Handle) String() string { return hex.EncodeToString(h[:]) }

// ParseHandle reads a handle written by String.
func ParseHandle(s string) (Handle, bool) {
	var h Handle
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, false
	}
	copy(h[:], b)
	return h, true
}
