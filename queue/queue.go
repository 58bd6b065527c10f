// Package queue implements the queue REST contract (push, pop with an optional
// acknowledgement lock, acknowledge) as a translation onto the graph and the consume
// engine. A queue item is an ordinary QueueItem node; a pop leases items through a
// consume-mode WATCH and settles them with ACK; the one piece of extra state, the lock
// of an acknowledged pop, is a _QueueLock node. Nothing about a queue lives outside the
// graph, so queues survive restarts and are visible with MATCH and WATCH.
package queue

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
)

// Types written by the queue API.
const (
	// ItemType is the node type of a queue item: { queue, item, priority, pushed_at }.
	ItemType = "QueueItem"
	// LockType is the system node type of an acknowledgement lock.
	LockType = "_QueueLock"
)

// Limits and defaults of the contract.
const (
	DefaultTTL   = 30 * time.Second
	MinTTL       = 1 * time.Second
	MaxTTL       = 300 * time.Second
	DefaultCount = 1
	MaxCount     = 100
	// MaxIDLength bounds a queue id.
	MaxIDLength = 128
	// unlimitedRedeliveries keeps an item in its queue however often its leases expire:
	// the queue contract has no dead letters.
	unlimitedRedeliveries = 1_000_000_000
	// lockIDBytes is the randomness of a lock id (128 bits; 22 URL-safe characters).
	lockIDBytes = 16
)

// Kind classifies the contract's refusals; the REST layer maps each to a status.
type Kind int

const (
	// Invalid: a malformed request, a missing or wrong lock id (400).
	Invalid Kind = iota + 1
	// NotFound: the queue has no active lock (404).
	NotFound
	// Expired: the lock expired before it was acknowledged (410).
	Expired
	// Locked: an acknowledgement lock holds the queue (423).
	Locked
)

// Error is a refusal of the contract. Other errors (storage, shutdown) are the engine's
// *herald.Error values, passed through.
type Error struct {
	Kind    Kind
	Message string
	// LockExpiresAt is when the blocking lock expires (Locked only).
	LockExpiresAt time.Time
}

func (e *Error) Error() string { return e.Message }

func refuse(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// Service serves the queue contract. It keeps no queue state of its own: items are
// QueueItem nodes, leases belong to the consume engine, and locks are _QueueLock nodes.
// It only serializes the operations of one queue in this process.
type Service struct {
	eng   *engine.Engine
	del   *delivery.Service
	clock herald.Clock

	mu    sync.Mutex
	locks map[string]*queueMutex

	pushed, popped, acknowledged, lockExpiries atomic.Uint64
}

// Metrics reports the queue REST API's totals (herald.MetricSource). The leases behind
// its locks are the consume engine's, counted there too.
func (s *Service) Metrics() []herald.Metric {
	total := func(name, help string, v *atomic.Uint64) herald.Metric {
		return herald.Metric{Name: name, Help: help, Counter: true, Value: float64(v.Load())}
	}
	return []herald.Metric{
		total("herald_queue_pushed_total", "Items pushed through the queue REST API.", &s.pushed),
		total("herald_queue_popped_total", "Items handed out by pops (with or without a lock).", &s.popped),
		total("herald_queue_acknowledged_total", "Items deleted by acknowledging their lock.", &s.acknowledged),
		total("herald_queue_lock_expiries_total", "Locks that expired before their acknowledgement; their items went back to the queue.", &s.lockExpiries),
	}
}

type queueMutex struct {
	sync.Mutex
	refs int
}

// New returns the queue service over an engine and its running consume engine.
func New(eng *engine.Engine, del *delivery.Service) *Service {
	return &Service{eng: eng, del: del, clock: eng.Clock(), locks: map[string]*queueMutex{}}
}

// acquire serializes operations on one queue; the returned func releases it.
func (s *Service) acquire(queue string) func() {
	s.mu.Lock()
	m := s.locks[queue]
	if m == nil {
		m = &queueMutex{}
		s.locks[queue] = m
	}
	m.refs++
	s.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		s.mu.Lock()
		if m.refs--; m.refs == 0 {
			delete(s.locks, queue)
		}
		s.mu.Unlock()
	}
}

// ValidID reports whether id can name a queue: 1 to MaxIDLength characters from
// A–Z, a–z, 0–9 and `-`, `_`, `.`, `~`, `:`.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == '~', c == ':':
		default:
			return false
		}
	}
	return true
}

func checkID(id string) error {
	if !ValidID(id) {
		return refuse(Invalid, "queue id %q is invalid: use 1 to %d characters from letters, digits and - _ . ~ :", id, MaxIDLength)
	}
	return nil
}

// ClampTTL bounds a lock's lifetime to MinTTL–MaxTTL, in whole seconds; 0 means DefaultTTL.
func ClampTTL(d time.Duration) time.Duration {
	if d == 0 {
		return DefaultTTL
	}
	d = d.Truncate(time.Second)
	return min(max(d, MinTTL), MaxTTL)
}

// ClampCount bounds the number of items of one pop to 1–MaxCount; 0 means DefaultCount.
func ClampCount(n int) int {
	if n == 0 {
		return DefaultCount
	}
	return min(max(n, 1), MaxCount)
}

// PushResult describes a pushed item.
type PushResult struct {
	ID       herald.NodeID // the QueueItem node
	Priority int64
}

// Push appends item (a JSON text) to the queue with a priority (0 is the highest). It
// spawns a QueueItem node through the ordinary query path, with parameters.
func (s *Service) Push(ctx context.Context, queue string, item json.RawMessage, priority int64) (PushResult, error) {
	if err := checkID(queue); err != nil {
		return PushResult{}, err
	}
	if priority < 0 {
		return PushResult{}, refuse(Invalid, "priority must be 0 (the highest) or more, not %d", priority)
	}
	text, err := compactItem(item)
	if err != nil {
		return PushResult{}, err
	}
	resp, err := s.eng.Exec(ctx, "",
		`SPAWN i: QueueItem { queue = $queue, item = $item, priority = $priority, pushed_at = now() } RETURNING i.id`,
		map[string]herald.Value{
			"queue":    herald.String(queue),
			"item":     herald.String(text),
			"priority": herald.Int(priority),
		})
	if err != nil {
		return PushResult{}, err
	}
	s.pushed.Add(1)
	res := PushResult{Priority: priority}
	if len(resp.Results) == 1 && len(resp.Results[0].Rows) == 1 && len(resp.Results[0].Rows[0]) == 1 {
		res.ID = herald.NodeID(resp.Results[0].Rows[0][0].AsString())
	}
	return res, nil
}

// compactItem validates an item and returns its compact JSON text.
func compactItem(item json.RawMessage) (string, error) {
	if len(item) == 0 {
		return "", refuse(Invalid, `the body needs an "item": any JSON value except null`)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, item); err != nil {
		return "", refuse(Invalid, "item is not valid JSON: %v", err)
	}
	if b.String() == "null" {
		return "", refuse(Invalid, `"item" must not be null`)
	}
	return b.String(), nil
}

// PopOptions shape a pop. Zero values take the defaults; out-of-range values are clamped.
type PopOptions struct {
	Count      int           // items to take (default 1, at most MaxCount)
	RequireAck bool          // hold the items under a lock until acknowledged
	TTL        time.Duration // the lock's lifetime (default 30 s, clamped to 1–300 s)
}

// PopResult is what a pop took.
type PopResult struct {
	Items         []json.RawMessage // in priority order, then push order
	Locked        bool              // a lock now holds the items (RequireAck with items)
	LockID        string
	LockExpiresAt time.Time
}

// Pop takes up to o.Count items, highest priority first and in push order within a
// priority. Without RequireAck the items are deleted at once. With it they stay leased
// under one lock per queue until Acknowledge or the lock's expiry, when they return to
// their original place. While a lock is active every pop of the queue is refused
// (Locked); an expired lock is cleared first, its items already being back.
func (s *Service) Pop(ctx context.Context, queue string, o PopOptions) (PopResult, error) {
	if err := checkID(queue); err != nil {
		return PopResult{}, err
	}
	if err := herald.PrincipalFrom(ctx).Check(herald.ActConsume, ItemType); err != nil {
		return PopResult{}, err
	}
	count := ClampCount(o.Count)
	ttl := DefaultTTL
	if o.RequireAck {
		ttl = ClampTTL(o.TTL)
	}
	defer s.acquire(queue)()

	lk, err := s.readLock(queue)
	if err != nil {
		return PopResult{}, err
	}
	if lk != nil {
		if s.clock.Now().Before(lk.expiresAt) {
			return PopResult{}, &Error{Kind: Locked, LockExpiresAt: lk.expiresAt,
				Message: fmt.Sprintf("queue %q is held by an unacknowledged pop; try again after lock_expires_at", queue)}
		}
		if err := s.clearExpired(ctx, lk); err != nil {
			return PopResult{}, err
		}
	}

	// A queue without items answers at once, without setting up a consume group.
	if empty, err := s.empty(queue); err != nil {
		return PopResult{}, err
	} else if empty {
		return PopResult{Items: []json.RawMessage{}}, nil
	}
	evs, err := s.del.Lease(surface(ctx), "", consumeStatement(queue, ttl), nil, count)
	if err != nil {
		return PopResult{}, err
	}
	res := PopResult{Items: []json.RawMessage{}}
	if len(evs) == 0 {
		return res, nil
	}
	// The items are leased now: finish the pop even if the client goes away, so that
	// its outcome is whole (a vanished client's locked items simply expire).
	ctx = context.WithoutCancel(ctx)
	if !o.RequireAck {
		return s.settleAtOnce(ctx, evs)
	}

	lockID, err := newLockID()
	if err != nil {
		s.giveBack(evs)
		return PopResult{}, err
	}
	ids := make([]delivery.Handle, len(evs))
	expires := evs[0].Deadline
	for i, ev := range evs {
		ids[i] = delivery.HandleOf(ev.DeliveryID)
		if ev.Deadline.Before(expires) {
			expires = ev.Deadline
		}
		res.Items = append(res.Items, itemOf(ev.Match))
	}
	lk = &lock{queue: queue, hash: hashLockID(lockID), deliveries: ids, expiresAt: expires, createdAt: s.clock.Now()}
	if err := s.writeLock(ctx, lk); err != nil {
		// Without a durable lock nobody could acknowledge these items: return them now.
		s.giveBack(evs)
		return PopResult{}, err
	}
	res.Locked, res.LockID, res.LockExpiresAt = true, lockID, expires
	s.popped.Add(uint64(len(res.Items)))
	return res, nil
}

// settleAtOnce acknowledges leased items (a pop without acknowledgement). An item whose
// ACK fails is not reported as popped: its lease expires and it returns to the queue.
func (s *Service) settleAtOnce(ctx context.Context, evs []herald.Event) (PopResult, error) {
	res := PopResult{Items: make([]json.RawMessage, 0, len(evs))}
	items := make([]delivery.Settle, len(evs))
	for i, ev := range evs {
		items[i] = delivery.Settle{DeliveryID: ev.DeliveryID, Action: delivery.ActAck}
	}
	results, _, _ := s.del.SettleMany(ctx, items)
	var firstErr error
	for i, r := range results {
		if r.Err != nil {
			if firstErr == nil {
				firstErr = r.Err
			}
			continue
		}
		res.Items = append(res.Items, itemOf(evs[i].Match))
	}
	if len(res.Items) == 0 && firstErr != nil {
		return PopResult{}, firstErr
	}
	s.popped.Add(uint64(len(res.Items)))
	return res, nil
}

// giveBack returns leased items to the queue at once (NACK keeps their place).
func (s *Service) giveBack(evs []herald.Event) {
	items := make([]delivery.Settle, len(evs))
	for i, ev := range evs {
		items[i] = delivery.Settle{DeliveryID: ev.DeliveryID, Action: delivery.ActNack}
	}
	s.del.SettleMany(context.Background(), items)
}

// AckResult is the outcome of an acknowledgement.
type AckResult struct {
	// Acknowledged items are deleted from the queue.
	Acknowledged int
	// Returned items were not acknowledged because their lease ended as the
	// acknowledgement arrived; they are back in the queue at their original place.
	Returned int
}

// Acknowledge settles the queue's lock: every item it holds is deleted and the lock
// removed. A missing lock id or one that does not match the active lock is Invalid (the
// lock stays); no lock is NotFound; an expired lock is removed and answers Expired — its
// items are back in the queue, never dropped.
func (s *Service) Acknowledge(ctx context.Context, queue, lockID string) (AckResult, error) {
	if err := checkID(queue); err != nil {
		return AckResult{}, err
	}
	if lockID == "" {
		return AckResult{}, refuse(Invalid, `the body needs the "lock_id" that the pop returned`)
	}
	defer s.acquire(queue)()

	lk, err := s.readLock(queue)
	if err != nil {
		return AckResult{}, err
	}
	if lk == nil {
		return AckResult{}, refuse(NotFound, "queue %q has no active lock", queue)
	}
	if !s.clock.Now().Before(lk.expiresAt) {
		if err := s.clearExpired(ctx, lk); err != nil {
			return AckResult{}, err
		}
		return AckResult{}, refuse(Expired, "the lock expired before this acknowledgement; its items are back in the queue")
	}
	if subtle.ConstantTimeCompare([]byte(hashLockID(lockID)), []byte(lk.hash)) != 1 {
		return AckResult{}, refuse(Invalid, "lock_id does not match the active lock of queue %q", queue)
	}

	ctx = context.WithoutCancel(ctx) // settle the whole lock once started
	var res AckResult
	var left []delivery.Handle
	var firstErr error
	for i, r := range s.del.SettleHandles(ctx, lk.deliveries, delivery.Settle{Action: delivery.ActAck}) {
		switch {
		case r.Err == nil:
			res.Acknowledged++
		case herald.CodeOf(r.Err) == herald.CodeInvalidDeliveryID:
			// The lease ended in the same instant: the consume engine has put the item
			// back (or will on its next round); it is not acknowledged.
			res.Returned++
		default:
			left = append(left, lk.deliveries[i])
			if firstErr == nil {
				firstErr = r.Err
			}
		}
	}
	if firstErr != nil {
		// Keep the lock on what is left so that a retry settles the rest.
		lk.deliveries = left
		if werr := s.writeLock(ctx, lk); werr != nil {
			return res, werr
		}
		return res, firstErr
	}
	if err := s.deleteLock(ctx, queue); err != nil {
		return res, err
	}
	s.acknowledged.Add(uint64(res.Acknowledged))
	if res.Acknowledged == 0 && res.Returned > 0 {
		return res, refuse(Expired, "the lock expired before this acknowledgement; its items are back in the queue")
	}
	return res, nil
}

// Release gives a lock's items back to the queue at once, each at its original place,
// and removes the lock: the opposite of Acknowledge. It refuses as Acknowledge does (a
// missing or wrong lock id, no lock, an expired lock) and returns how many items went
// back.
func (s *Service) Release(ctx context.Context, queue, lockID string) (int, error) {
	if err := checkID(queue); err != nil {
		return 0, err
	}
	if lockID == "" {
		return 0, refuse(Invalid, `the body needs the "lock_id" that the pop returned`)
	}
	defer s.acquire(queue)()
	lk, err := s.readLock(queue)
	if err != nil {
		return 0, err
	}
	if lk == nil {
		return 0, refuse(NotFound, "queue %q has no active lock", queue)
	}
	if !s.clock.Now().Before(lk.expiresAt) {
		if err := s.clearExpired(ctx, lk); err != nil {
			return 0, err
		}
		return 0, refuse(Expired, "the lock expired before this release; its items are back in the queue")
	}
	if subtle.ConstantTimeCompare([]byte(hashLockID(lockID)), []byte(lk.hash)) != 1 {
		return 0, refuse(Invalid, "lock_id does not match the active lock of queue %q", queue)
	}
	ctx = context.WithoutCancel(ctx)
	released := 0
	for _, r := range s.del.SettleHandles(ctx, lk.deliveries, delivery.Settle{Action: delivery.ActNack}) {
		if r.Err == nil {
			released++
		}
	}
	return released, s.deleteLock(ctx, queue)
}

// clearExpired removes an expired lock. Its leases ended with it (the lock expires at
// the earliest of their deadlines), so the consume engine returns the items to their
// original place; a lease that outlives the lock by a moment is given back at once with
// NACK, which keeps the place too. Nothing is deleted but the lock.
func (s *Service) clearExpired(ctx context.Context, lk *lock) error {
	s.lockExpiries.Add(1)
	s.del.SettleHandles(ctx, lk.deliveries, delivery.Settle{Action: delivery.ActNack}) // E8004 for leases that already expired
	// Leases that expired on their own may still be on their way back to the ready
	// queue (their expiry commits asynchronously): let that finish, so the pop that
	// follows sees every item the lock held.
	s.del.Flush()
	return s.deleteLock(ctx, lk.queue)
}

// consumeStatement is the consume watch of a queue's pops. It carries no parameters so
// that the consume engine can compile it again after a restart and keep its options for
// recovered leases; the queue id is validated by ValidID and needs no escaping. The
// group is per queue and lock lifetime, so concurrent members always agree on the text.
func consumeStatement(queue string, ttl time.Duration) string {
	secs := int64(ttl / time.Second)
	return fmt.Sprintf(`WATCH i: QueueItem WHERE i.queue = "%s" [mode: consume, group: "queue:%s:%ds", ordering: attribute(i.priority ASC), ack_timeout: %ds, max_redeliveries: %d] RETURN i`,
		queue, queue, secs, secs, unlimitedRedeliveries)
}

// itemOf extracts the item's JSON from a consumed match (the whole QueueItem node). An
// item text that is not JSON (written by hand through the query API) comes back as a
// JSON string.
func itemOf(match herald.Value) json.RawMessage {
	v := match.MapGet("item")
	if v.Kind() == herald.KindString && json.Valid([]byte(v.AsString())) {
		return json.RawMessage(v.AsString())
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// lock is a queue's acknowledgement lock, stored as a _QueueLock node.
type lock struct {
	queue      string
	hash       string            // SHA-256 of the lock id: the id itself is never stored
	deliveries []delivery.Handle // the leases' handles: their delivery ids are never stored
	expiresAt  time.Time
	createdAt  time.Time
}

func lockNodeID(queue string) herald.NodeID { return herald.NodeID("_queue_lock." + queue) }

// empty reports whether the queue has no items at all (leased or not).
func (s *Service) empty(queue string) (bool, error) {
	empty := true
	err := s.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		empty = tx.CountByAttr(ItemType, "queue", herald.String(queue)) == 0
		return nil
	})
	return empty, err
}

func (s *Service) readLock(queue string) (*lock, error) {
	var lk *lock
	err := s.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		n := tx.Node(lockNodeID(queue))
		if n == nil || n.Type != LockType {
			return nil
		}
		lk = &lock{
			queue:     queue,
			hash:      n.Attrs.Get("lock_id_sha256").AsString(),
			expiresAt: n.Attrs.Get("expires_at").AsTime(),
			createdAt: n.Attrs.Get("created_at").AsTime(),
		}
		for _, d := range n.Attrs.Get("delivery_handles").AsList() {
			if h, ok := delivery.ParseHandle(d.AsString()); ok {
				lk.deliveries = append(lk.deliveries, h)
			}
		}
		// A lock written before locks kept handles holds the delivery ids themselves.
		for _, d := range n.Attrs.Get("delivery_ids").AsList() {
			lk.deliveries = append(lk.deliveries, delivery.HandleOf(d.AsString()))
		}
		return nil
	})
	return lk, err
}

func (s *Service) writeLock(ctx context.Context, lk *lock) error {
	ids := make([]herald.Value, len(lk.deliveries))
	for i, d := range lk.deliveries {
		ids[i] = herald.String(d.String())
	}
	_, _, err := s.eng.System(ctx, func(tx *engine.SysTx) error {
		tx.PutNode(&herald.Node{ID: lockNodeID(lk.queue), Type: LockType, Attrs: herald.AttrsOf(map[string]herald.Value{
			"queue":            herald.String(lk.queue),
			"lock_id_sha256":   herald.String(lk.hash),
			"delivery_handles": herald.List(ids...),
			"expires_at":       herald.Timestamp(lk.expiresAt),
			"created_at":       herald.Timestamp(lk.createdAt),
		})})
		return nil
	})
	return err
}

func (s *Service) deleteLock(ctx context.Context, queue string) error {
	_, _, err := s.eng.System(ctx, func(tx *engine.SysTx) error {
		if n := tx.Node(lockNodeID(queue)); n != nil && n.Type == LockType {
			tx.DeleteNode(n.ID)
		}
		return nil
	})
	return err
}

// newLockID returns "l" and 128 random bits, URL-safe base64 without padding. The
// letter in front keeps an id from starting with "-", which a command line would take
// for a flag.
func newLockID() (string, error) {
	b := make([]byte, lockIDBytes)
	if _, err := rand.Read(b); err != nil {
		return "", herald.Errorf(herald.CodeInternal, "generating a lock id: %v", err)
	}
	return "l" + base64.RawURLEncoding.EncodeToString(b), nil
}

func hashLockID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}
