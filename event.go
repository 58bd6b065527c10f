package herald

import (
	"sync"
	"sync/atomic"
	"time"
)

// Event types on a watch stream. Consume mode sends consumed and timeout; watch mode
// sends initial, added, removed, changed, gap, reset and heartbeat; error ends a stream.
const (
	EventConsumed  = "consumed"  // a match leased to this consumer; settle it by delivery id
	EventTimeout   = "timeout"   // a lease this consumer held expired (code E8003)
	EventInitial   = "initial"   // a match that existed when the watch started
	EventAdded     = "added"     // a new match
	EventRemoved   = "removed"   // a match that is gone (deleted, or no longer matches)
	EventChanged   = "changed"   // a match whose returned values changed; Prev holds the old ones
	EventGap       = "gap"       // Count events were dropped (best-effort delivery, on_full: drop)
	EventReset     = "reset"     // the requested position is older than the change log keeps
	EventHeartbeat = "heartbeat" // nothing matched; the position advances to Seq
	EventWindow    = "window"    // a window closed: its aggregate row, or its matches as a batch
	// EventTriggerFailed reports that a watch's ON MATCH DO actions failed for a match
	// (Code and Message say why); the stream goes on.
	EventTriggerFailed = "trigger_failed"
	// EventWarning comes first on a stream whose statement names a type no one has
	// declared or used yet (Code E2012, Message says which): the watch waits for it,
	// which is what it should do, unless the name is a typo. The stream goes on.
	EventWarning = "warning"
	EventError   = "error" // the stream ends because of the error in Code and Message
)

// Event is one message on a watch or consume stream. It marshals to the wire form, e.g.
// {"type":"consumed","match":{...},"delivery_id":"...","attempt":n,"seq":N,"tick":N}
// or {"type":"changed","match":{...},"prev":{...},"seq":N,"tick":N}.
type Event struct {
	Type       string `json:"type"`
	Match      Value  `json:"match,omitzero"`
	Prev       Value  `json:"prev,omitzero"`
	DeliveryID string `json:"delivery_id,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	// Releases counts earlier deliveries of the message given back because their
	// consumer left; they are not failed attempts (see Attempt).
	Releases int       `json:"releases,omitempty"`
	Count    int       `json:"count,omitempty"` // gap: how many events were dropped
	Seq      uint64    `json:"seq"`
	Tick     uint64    `json:"tick"`
	Deadline time.Time `json:"deadline,omitzero"`
	// Last marks the last event of its position in watch mode: once it is processed, the
	// stream may resume after Seq. Several events can share a seq (a snapshot, or one
	// commit with several matches). On server-sent events it is the event carrying `id:`.
	Last bool `json:"-"`
	// Uncommitted marks a visibility: immediate event showing the watcher's own session's
	// change before it commits; if the transaction rolls back, events undo it.
	Uncommitted bool   `json:"uncommitted,omitempty"`
	Error       *Error `json:"-"`
	// Code and Message repeat Error on the wire.
	Code    Code   `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// Enc, when set, is shared by the copies of this event that identical watches
	// send: each wire form is encoded once for all of them (see Encodings).
	Enc *Encodings `json:"-"`
}

// Encodings caches the wire encodings of one event for the streams that send it, so a
// thousand identical watches serialise it once per form rather than once each. It is
// safe for concurrent use. A form (EncodingForm) names the transport's format and
// whatever else varies between the copies (Last).
type Encodings struct {
	mu    sync.Mutex // held while a form is encoded the first time
	forms [numEncodingForms]atomic.Pointer[[]byte]
	size  atomic.Int64 // the event's memory estimate + 1; 0 until known
}

// EncodingForm is one wire form of an event that Encodings keeps.
type EncodingForm uint8

// The wire forms of a shared event: server-sent events, and the RPC's protobuf with the
// values as JSON or in their binary encoding; each with and without Last.
const (
	FormSSE EncodingForm = iota
	FormSSELast
	FormProto
	FormProtoLast
	FormProtoBinary
	FormProtoBinaryLast
	numEncodingForms
)

// Get returns the encoding in form, calling encode the first time. The result is
// shared: callers must not modify it.
func (e *Encodings) Get(form EncodingForm, encode func() ([]byte, error)) ([]byte, error) {
	slot := &e.forms[form]
	if b := slot.Load(); b != nil {
		return *b, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if b := slot.Load(); b != nil {
		return *b, nil
	}
	b, err := encode()
	if err != nil {
		return nil, err
	}
	slot.Store(&b)
	return b, nil
}

// Size returns the event's memory estimate recorded by SetSize, if there is one.
func (e *Encodings) Size() (int, bool) {
	n := e.size.Load()
	return int(n - 1), n > 0
}

// SetSize records the event's memory estimate for the other streams that hold it.
func (e *Encodings) SetSize(n int) { e.size.Store(int64(n) + 1) }

// IsZero reports whether v is null; it lets `omitzero` leave null values out of events.
func (v Value) IsZero() bool { return v.k == KindNull }

// Stream is one subscriber's view of a watch: events arrive on Events until the stream
// ends. Close ends it; for a consume watch it also releases unsettled leases at once.
type Stream interface {
	ID() string
	Events() <-chan Event
	Close()
	// Done is closed once the stream has ended (closed, cancelled, or failed).
	Done() <-chan struct{}
}
