// Package delivery runs consume-mode watches: groups of consumers, ready queues ordered
// by arrival, attributes and fairness keys, durable leases with ack timeouts, ACK, NACK,
// EXTEND, backoff and dead letters.
// Every state change commits through the engine's pipeline, so leases survive a crash.
package delivery

import (
	"time"

	"github.com/herald-mq/herald"
)

// Event types sent to consumers (the stream types are the root package's).
const (
	EventConsumed = herald.EventConsumed
	EventTimeout  = herald.EventTimeout
	EventError    = herald.EventError
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
