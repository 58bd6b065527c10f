package client

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// The bounds of the queue REST API (docs/queues.md), as the server's seam declares
// them: the server clamps a pop's count and a lock's lifetime to them, and refuses a
// queue id outside them.
const (
	MaxQueueIDLength = broker.MaxQueueName
	MaxPopCount      = broker.MaxPopCount
	MinLockTTL       = broker.MinLockTTL
	MaxLockTTL       = broker.MaxLockTTL
	DefaultLockTTL   = broker.DefaultLockTTL
)

// ValidQueueID reports whether id can name a queue: 1 to MaxQueueIDLength characters
// from A–Z, a–z, 0–9 and `-`, `_`, `.`, `~`, `:`.
func ValidQueueID(id string) bool { return broker.ValidQueueName(id) }

// Queue is one queue of the queue REST API: items pushed with a priority and popped
// highest priority first, optionally under the queue's one lock until acknowledged.
// Its items are QueueItem nodes, so queries and consume watches see them too. Get one
// with Client.Queue; it is safe for concurrent use.
type Queue struct {
	c  *Client
	id string
}

// Queue returns the queue named id. Nothing is sent: a queue exists while it holds
// items or a lock, and an invalid id is refused by the first call (E4019).
func (c *Client) Queue(id string) *Queue { return &Queue{c: c, id: id} }

// ID returns the queue's id.
func (q *Queue) ID() string { return q.id }

// Pushed is the answer to Push: the new item's node id and its priority.
type Pushed struct {
	ID       string `json:"id"`
	Priority int64  `json:"priority"`
}

// Push adds item, any JSON value but null, to the queue with priority (0 is the highest,
// and the first popped).
func (q *Queue) Push(ctx context.Context, item json.RawMessage, priority int64) (Pushed, error) {
	switch {
	case !json.Valid(item) || strings.TrimSpace(string(item)) == "null":
		return Pushed{}, invalid("push: the item %q is not a JSON value other than null", item)
	case priority < 0:
		return Pushed{}, invalid("push: priority %d: want 0 (the highest) or more", priority)
	}
	var ans Pushed
	body := map[string]any{"item": item, "priority": priority}
	if _, err := q.call(ctx, "push", nil, body, &ans); err != nil {
		return Pushed{}, err
	}
	return ans, nil
}

// PopOptions shape a pop. The zero value takes one item and removes it at once.
type PopOptions struct {
	// Count is how many items to take at most: 0 means 1; the server takes no more
	// than MaxPopCount.
	Count int
	// Lock holds the items under the queue's lock instead of removing them: they are
	// removed by Acknowledge, go back by Release, and come back by themselves when the
	// lock expires. While the lock is active every pop of the queue is refused.
	Lock bool
	// TTL is the lock's lifetime, in whole seconds: 0 means DefaultLockTTL; the server
	// keeps it within MinLockTTL and MaxLockTTL. Only with Lock.
	TTL time.Duration
}

// Popped is what a pop took. With PopOptions.Lock and at least one item, Locked is
// true and LockID is what Acknowledge and Release take.
type Popped struct {
	Items         []json.RawMessage // priority order, then push order within a priority
	Locked        bool
	LockID        string
	LockExpiresAt time.Time
}

// Pop takes items from the queue, highest priority first (see PopOptions). A queue
// whose lock is active refuses with E4021 (herald.CodeQueueLocked); Pop then returns,
// beside the error, a Popped whose LockExpiresAt says when that lock expires.
func (q *Queue) Pop(ctx context.Context, o PopOptions) (Popped, error) {
	switch {
	case o.Count < 0 || o.TTL < 0:
		return Popped{}, invalid("pop: count %d and TTL %s must not be negative", o.Count, o.TTL)
	case o.TTL != 0 && !o.Lock:
		return Popped{}, invalid("pop: a TTL needs Lock: only a locked pop has a lifetime")
	}
	v := url.Values{}
	if o.Count > 0 {
		v.Set("count", strconv.Itoa(o.Count))
	}
	if o.Lock {
		v.Set("require_ack", "true")
		if o.TTL > 0 {
			v.Set("ttl_seconds", strconv.FormatInt(int64(o.TTL/time.Second), 10))
		}
	}
	var ans struct {
		Items         []json.RawMessage `json:"items"`
		Locked        bool              `json:"locked"`
		LockID        string            `json:"lock_id"`
		LockExpiresAt json.Number       `json:"lock_expires_at"`
	}
	refusal, err := q.call(ctx, "pop", v, nil, &ans)
	if err != nil {
		return Popped{LockExpiresAt: refusal.expires()}, err
	}
	return Popped{Items: ans.Items, Locked: ans.Locked, LockID: ans.LockID, LockExpiresAt: unixTime(ans.LockExpiresAt)}, nil
}

// Acknowledged is the answer to Acknowledge: the items removed, and those whose lease
// had ended first and that are back in the queue.
type Acknowledged struct {
	Acknowledged int `json:"items_acknowledged"`
	Returned     int `json:"items_returned"`
}

// Acknowledge settles a locked pop: its items are removed and the lock is released. A
// lock id that does not match the active lock is refused with E4001, a queue without a
// lock with E4007, and a lock that expired first with E4022 (herald.CodeLockExpired):
// its items are back in the queue.
func (q *Queue) Acknowledge(ctx context.Context, lockID string) (Acknowledged, error) {
	var ans Acknowledged
	if _, err := q.call(ctx, "acknowledge", nil, map[string]string{"lock_id": lockID}, &ans); err != nil {
		return Acknowledged{}, err
	}
	return ans, nil
}

// Release gives a locked pop's items back to the queue at their place and removes the
// lock, so the queue can be popped again at once; it returns how many items went back.
// It is refused as Acknowledge is.
func (q *Queue) Release(ctx context.Context, lockID string) (int, error) {
	var ans struct {
		Released int `json:"items_released"`
	}
	if _, err := q.call(ctx, "release", nil, map[string]string{"lock_id": lockID}, &ans); err != nil {
		return 0, err
	}
	return ans.Released, nil
}

// queueRefusal is the body of a refusal of the queue contract: a message, and an
// error_code (400, 404, 410) or the lock's expiry (423).
type queueRefusal struct {
	Message       string      `json:"message"`
	ErrorCode     string      `json:"error_code"`
	LockExpiresAt json.Number `json:"lock_expires_at"`
}

func (r *queueRefusal) expires() time.Time {
	if r == nil {
		return time.Time{}
	}
	return unixTime(r.LockExpiresAt)
}

// call posts to POST /queue/{id}/{op} and decodes a 200 answer into out. A refusal of
// the contract comes back as its *herald.Error, with the refusal's body.
func (q *Queue) call(ctx context.Context, op string, v url.Values, body, out any) (*queueRefusal, error) {
	if !ValidQueueID(q.id) {
		return nil, invalid("queue id %q is invalid: use 1 to %d characters from letters, digits and - _ . ~ :", q.id, MaxQueueIDLength)
	}
	path := "/queue/" + url.PathEscape(q.id) + "/" + op
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	status, data, err := q.c.jsonCall(ctx, http.MethodPost, path, body)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return refusalError(status, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, herald.Errorf(herald.CodeInternal, "client: %s: unexpected answer %.200q", path, data)
	}
	return nil, nil
}

// refusalError reads a refused queue call: a body of the error table ({"error": …}) is
// that error; one of the contract's gets its code from error_code, or from the status
// for 423, which has none.
func refusalError(status int, data []byte) (*queueRefusal, error) {
	var probe struct {
		Error   json.RawMessage `json:"error"`
		Message *string         `json:"message"`
	}
	if json.Unmarshal(data, &probe) != nil || probe.Error != nil || probe.Message == nil {
		return nil, answerError(status, data)
	}
	var r queueRefusal
	_ = json.Unmarshal(data, &r)
	code := herald.Code(r.ErrorCode)
	switch {
	case status == http.StatusLocked:
		code = herald.CodeQueueLocked
	case r.ErrorCode == herald.CodeLockExpired.Name() || status == http.StatusGone:
		code = herald.CodeLockExpired
	case code.Info().Code != code: // not a code of the table: go by the status
		code = map[int]herald.Code{http.StatusBadRequest: herald.CodeMalformedRequest, http.StatusNotFound: herald.CodeNotFound}[status]
		if code == "" {
			code = herald.CodeInternal
		}
	}
	return &r, &herald.Error{Code: code, Message: r.Message}
}

// unixTime reads seconds since the Unix epoch, with a fraction, to the nanosecond; the
// zero time for an empty or unreadable number.
func unixTime(n json.Number) time.Time {
	f, err := n.Float64()
	if err != nil || n == "" {
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(math.Round(frac*1e9)))
}
