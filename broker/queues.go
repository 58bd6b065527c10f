package broker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/herald-mq/herald"
)

// LockQueues is the queue REST contract: items pushed with a priority, popped at once or
// under one acknowledgement lock per queue. Its refusals are coded errors: E4001 for a
// bad request or lock id, E4007 when the queue holds no lock, E4021 QUEUE_LOCKED (with
// a *LockHeld in the chain) and E4022 LOCK_EXPIRED.
type LockQueues interface {
	Push(ctx context.Context, queueID string, item json.RawMessage, priority int64) (PushResult, error)
	Pop(ctx context.Context, queueID string, o PopOptions) (PopResult, error)
	Acknowledge(ctx context.Context, queueID, lockID string) (AckResult, error)
	// Release gives a held lock's items back at once; it returns how many.
	Release(ctx context.Context, queueID, lockID string) (int, error)
}

// Limits of the lock-queue contract.
const (
	DefaultLockTTL  = 30 * time.Second
	MinLockTTL      = 1 * time.Second
	MaxLockTTL      = 300 * time.Second
	DefaultPopCount = 1
	MaxPopCount     = 100
)

// ClampTTL bounds a lock's lifetime to MinLockTTL–MaxLockTTL, in whole seconds; 0 means
// DefaultLockTTL.
func ClampTTL(d time.Duration) time.Duration {
	if d == 0 {
		return DefaultLockTTL
	}
	d = d.Truncate(time.Second)
	return min(max(d, MinLockTTL), MaxLockTTL)
}

// ClampCount bounds the items of one pop to 1–MaxPopCount; 0 means DefaultPopCount.
func ClampCount(n int) int {
	if n == 0 {
		return DefaultPopCount
	}
	return min(max(n, 1), MaxPopCount)
}

// PushResult describes a pushed item.
type PushResult struct {
	ID       herald.NodeID // the QueueItem node
	Priority int64
}

// PopOptions modify a pop.
type PopOptions struct {
	Count      int           // items to take (default 1, at most MaxPopCount)
	RequireAck bool          // hold the items under a lock until acknowledged
	TTL        time.Duration // the lock's lifetime (see ClampTTL)
}

// PopResult is what a pop took.
type PopResult struct {
	Items         []json.RawMessage // in priority order, then push order
	Locked        bool              // a lock now holds the items (RequireAck with items)
	LockID        string
	LockExpiresAt time.Time
}

// AckResult is what an acknowledgement did.
type AckResult struct {
	// Acknowledged items are deleted from the queue.
	Acknowledged int
	// Returned items were not acknowledged because their lease ended as the
	// acknowledgement arrived; they are back in the queue at their original place.
	Returned int
}

// LockHeld is the detail of E4021 QUEUE_LOCKED: when the lock that refused the pop
// expires.
type LockHeld struct{ ExpiresAt time.Time }

func (l *LockHeld) Error() string {
	return "an acknowledgement lock holds the queue until " + l.ExpiresAt.UTC().Format(time.RFC3339Nano)
}

// NamedQueues is the queue RPC's contract: named queues with a visibility timeout, an
// attempt limit, a dead-letter queue and weighted fairness keys, consumed by lease and
// settled by message id.
type NamedQueues interface {
	CreateQueue(ctx context.Context, c QueueConfig) (QueueConfig, error)
	// DeleteQueue removes a queue and its messages; it returns how many were removed.
	DeleteQueue(ctx context.Context, name string) (int, error)
	Enqueue(ctx context.Context, queue string, m QueueMessage) (herald.NodeID, error)
	ConsumeQueue(ctx context.Context, queue string) (Subscription, error)
	AckMessage(ctx context.Context, queue string, id herald.NodeID) error
	NackMessage(ctx context.Context, queue string, id herald.NodeID, o QueueNack) error
	ExtendMessage(ctx context.Context, queue string, id herald.NodeID, by time.Duration) (time.Time, error)
	// RedriveDeadLetters puts a queue's dead letters back in it; it returns how many.
	RedriveDeadLetters(ctx context.Context, queue string) (int, error)
}

// QueueConfig is a named queue's configuration.
type QueueConfig struct {
	Name string
	// VisibilityTimeout is how long a consumer holds a message; 0 means the default
	// (30 s). Whole milliseconds.
	VisibilityTimeout time.Duration
	// MaxAttempts bounds the deliveries of a message; when the last one fails (a Nack
	// or an expiry) the message is dead-lettered. 0 means no limit.
	MaxAttempts int
	// DeadLetterQueue names an existing queue that receives the dead letters; "" keeps
	// them with this queue.
	DeadLetterQueue string
	// Weights maps fairness keys to their weight (≥ 1); other keys weigh 1.
	Weights map[string]int64
	// CreatedAt is set by CreateQueue.
	CreatedAt time.Time
}

// QueueMessage is one message to enqueue.
type QueueMessage struct {
	Payload     []byte
	Headers     map[string]string
	FairnessKey string
	Priority    int64         // 0 is the highest; not negative
	Delay       time.Duration // hold the message back this long
}

// Delivered is a leased message of a named queue.
type Delivered struct {
	ID          herald.NodeID
	Queue       string
	Payload     []byte
	Headers     map[string]string
	FairnessKey string
	Priority    int64
	Weight      int64
	// Attempt is 1 for the first delivery; a Nack or an expired lease adds one.
	Attempt int
	// Releases counts earlier deliveries given back because their consumer's stream
	// ended: not failed attempts.
	Releases   int
	Deadline   time.Time
	EnqueuedAt time.Time
}

// QueueNack modifies a Nack of a named queue's message.
type QueueNack struct {
	Delay      time.Duration // redeliver no earlier than this
	DeadLetter bool          // dead-letter at once
}

// Subscription is one consumer of a named queue.
type Subscription interface {
	// Next waits for the next leased message; io.EOF once the subscription has ended.
	Next(ctx context.Context) (Delivered, error)
	// Close ends it; its unsettled messages return to the queue at once.
	Close()
	// Done is closed when it has ended.
	Done() <-chan struct{}
}

// MaxQueueName bounds the name of a queue (a lock queue's id, a named queue's name).
const MaxQueueName = 128

// ValidQueueName reports whether name can name a queue: 1 to MaxQueueName characters
// from A–Z, a–z, 0–9 and `-`, `_`, `.`, `~`, `:`.
func ValidQueueName(name string) bool {
	if name == "" || len(name) > MaxQueueName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == '~', c == ':':
		default:
			return false
		}
	}
	return true
}
