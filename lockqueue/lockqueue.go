// Package lockqueue implements the queue REST contract (push, pop with an optional
// acknowledgement lock, acknowledge, release: broker.LockQueues) as a translation onto
// the graph and the consume engine. A queue item is an ordinary QueueItem node, a pop
// leases items through a consume-mode WATCH and settles them with ACK, and the one
// piece of extra state, the lock of an acknowledged pop, is a _QueueLock node, so
// queues survive restarts and are visible with MATCH and WATCH.
package lockqueue

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
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/internal/keyed"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// Types written by the queue API.
const (
	// ItemType is the node type of a queue item: { queue, item, priority, pushed_at }.
	ItemType = "QueueItem"
	// LockType is the system node type of an acknowledgement lock.
	LockType = "_QueueLock"
)

const (
	// unlimitedRedeliveries keeps an item in its queue however often its leases expire:
	// the queue contract has no dead letters.
	unlimitedRedeliveries = 1_000_000_000
	// lockIDBytes is the randomness of a lock id (128 bits; 22 URL-safe characters).
	lockIDBytes = 16
)

// The contract's refusals are coded errors (see broker.LockQueues).
func invalid(format string, args ...any) error {
	return herald.Errorf(herald.CodeMalformedRequest, format, args...)
}

func noLock(queue string) error {
	return herald.Errorf(herald.CodeNotFound, "queue %q has no active lock", queue)
}

func expired(what string) error {
	return herald.Errorf(herald.CodeLockExpired, "the lock expired before this %s; its items are back in the queue", what)
}

func locked(queue string, expiresAt time.Time) error {
	return &herald.Error{Code: herald.CodeQueueLocked, Err: &broker.LockHeld{ExpiresAt: expiresAt},
		Message: fmt.Sprintf("queue %q is held by an unacknowledged pop; try again after lock_expires_at", queue)}
}

// Service serves the queue contract. It keeps no queue state of its own: items are
// QueueItem nodes, leases belong to the consume engine, and locks are _QueueLock nodes.
// It only serializes the operations of one queue in this process.
type Service struct {
	eng   *engine.Engine
	del   *delivery.Service
	clock herald.Clock

	locks keyed.Mutex // one operation per queue at a time

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

var _ broker.LockQueues = (*Service)(nil)

// New returns the queue service over an engine and its running consume engine.
func New(eng *engine.Engine, del *delivery.Service) *Service {
	return &Service{eng: eng, del: del, clock: eng.Clock()}
}

func checkID(id string) error {
	if !broker.ValidQueueName(id) {
		return invalid("queue id %q is invalid: use 1 to %d characters from letters, digits and - _ . ~ :", id, broker.MaxQueueName)
	}
	return nil
}

// Push appends item (a JSON text) to the queue with a priority (0 is the highest). It
// spawns a QueueItem node through the ordinary query path, with parameters.
func (s *Service) Push(ctx context.Context, queue string, item json.RawMessage, priority int64) (broker.PushResult, error) {
	if err := checkID(queue); err != nil {
		return broker.PushResult{}, err
	}
	if priority < 0 {
		return broker.PushResult{}, invalid("priority must be 0 (the highest) or more, not %d", priority)
	}
	text, err := compactItem(item)
	if err != nil {
		return broker.PushResult{}, err
	}
	resp, err := s.eng.Exec(ctx, "",
		`SPAWN i: QueueItem { queue = $queue, item = $item, priority = $priority, pushed_at = now() } RETURNING i.id`,
		map[string]herald.Value{
			"queue":    herald.String(queue),
			"item":     herald.String(text),
			"priority": herald.Int(priority),
		})
	if err != nil {
		return broker.PushResult{}, err
	}
	s.pushed.Add(1)
	res := broker.PushResult{Priority: priority}
	if len(resp.Results) == 1 && len(resp.Results[0].Rows) == 1 && len(resp.Results[0].Rows[0]) == 1 {
		res.ID = herald.NodeID(resp.Results[0].Rows[0][0].AsString())
	}
	return res, nil
}

// compactItem validates an item and returns its compact JSON text.
func compactItem(item json.RawMessage) (string, error) {
	if len(item) == 0 {
		return "", invalid(`the body needs an "item": any JSON value except null`)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, item); err != nil {
		return "", invalid("item is not valid JSON: %v", err)
	}
	if b.String() == "null" {
		return "", invalid(`"item" must not be null`)
	}
	return b.String(), nil
}

// Pop takes up to o.Count items, highest priority first and in push order within a
// priority. Without RequireAck the items are deleted at once. With it they stay leased
// under one lock per queue until Acknowledge or the lock's expiry, when they return to
// their original place. While a lock is active every pop of the queue is refused
// (Locked); an expired lock is cleared first, its items already being back.
func (s *Service) Pop(ctx context.Context, queue string, o broker.PopOptions) (broker.PopResult, error) {
	if err := checkID(queue); err != nil {
		return broker.PopResult{}, err
	}
	if err := herald.PrincipalFrom(ctx).Check(herald.ActConsume, ItemType); err != nil {
		return broker.PopResult{}, err
	}
	count := broker.ClampCount(o.Count)
	ttl := broker.DefaultLockTTL
	if o.RequireAck {
		ttl = broker.ClampTTL(o.TTL)
	}
	defer s.locks.Lock(queue)()

	lk, err := s.readLock(queue)
	if err != nil {
		return broker.PopResult{}, err
	}
	if lk != nil {
		if s.clock.Now().Before(lk.expiresAt) {
			return broker.PopResult{}, locked(queue, lk.expiresAt)
		}
		if err := s.clearExpired(ctx, lk); err != nil {
			return broker.PopResult{}, err
		}
	}

	// A queue without items answers at once, without setting up a consume group.
	if empty, err := s.empty(queue); err != nil {
		return broker.PopResult{}, err
	} else if empty {
		return broker.PopResult{Items: []json.RawMessage{}}, nil
	}
	evs, err := s.del.Lease(herald.OnBehalf(ctx), "", consumeStatement(queue, ttl), nil, count)
	if err != nil {
		return broker.PopResult{}, err
	}
	res := broker.PopResult{Items: []json.RawMessage{}}
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
		return broker.PopResult{}, err
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
		return broker.PopResult{}, err
	}
	res.Locked, res.LockID, res.LockExpiresAt = true, lockID, expires
	s.popped.Add(uint64(len(res.Items)))
	return res, nil
}

// settleAtOnce acknowledges leased items (a pop without acknowledgement). An item whose
// ACK fails is not reported as popped: its lease expires and it returns to the queue.
func (s *Service) settleAtOnce(ctx context.Context, evs []herald.Event) (broker.PopResult, error) {
	res := broker.PopResult{Items: make([]json.RawMessage, 0, len(evs))}
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
		return broker.PopResult{}, firstErr
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

// Acknowledge settles the queue's lock: every item it holds is deleted and the lock
// removed. A missing lock id or one that does not match the active lock is Invalid (the
// lock stays); no lock is NotFound; an expired lock is removed and answers Expired — its
// items are back in the queue, never dropped.
func (s *Service) Acknowledge(ctx context.Context, queue, lockID string) (broker.AckResult, error) {
	if err := checkID(queue); err != nil {
		return broker.AckResult{}, err
	}
	if lockID == "" {
		return broker.AckResult{}, invalid(`the body needs the "lock_id" that the pop returned`)
	}
	defer s.locks.Lock(queue)()

	lk, err := s.readLock(queue)
	if err != nil {
		return broker.AckResult{}, err
	}
	if lk == nil {
		return broker.AckResult{}, noLock(queue)
	}
	if !s.clock.Now().Before(lk.expiresAt) {
		if err := s.clearExpired(ctx, lk); err != nil {
			return broker.AckResult{}, err
		}
		return broker.AckResult{}, expired("acknowledgement")
	}
	if subtle.ConstantTimeCompare([]byte(hashLockID(lockID)), []byte(lk.hash)) != 1 {
		return broker.AckResult{}, invalid("lock_id does not match the active lock of queue %q", queue)
	}

	ctx = context.WithoutCancel(ctx) // settle the whole lock once started
	var res broker.AckResult
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
		return res, expired("acknowledgement")
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
		return 0, invalid(`the body needs the "lock_id" that the pop returned`)
	}
	defer s.locks.Lock(queue)()
	lk, err := s.readLock(queue)
	if err != nil {
		return 0, err
	}
	if lk == nil {
		return 0, noLock(queue)
	}
	if !s.clock.Now().Before(lk.expiresAt) {
		if err := s.clearExpired(ctx, lk); err != nil {
			return 0, err
		}
		return 0, expired("release")
	}
	if subtle.ConstantTimeCompare([]byte(hashLockID(lockID)), []byte(lk.hash)) != 1 {
		return 0, invalid("lock_id does not match the active lock of queue %q", queue)
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

// QueueOfGroup returns the queue a consume group serves when the group is one of this
// API's (named "queue:<queue>:<ttl>s", see consumeStatement), else "".
func QueueOfGroup(group string) string {
	rest, ok := strings.CutPrefix(group, "queue:")
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 || !strings.HasSuffix(rest, "s") {
		return ""
	}
	if _, err := strconv.Atoi(rest[i+1 : len(rest)-1]); err != nil {
		return ""
	}
	return rest[:i]
}

// consumeStatement is the consume watch of a queue's pops, built as a tree and printed.
// It carries no parameters so that the consume engine can compile it again after a
// restart and keep its options for recovered leases. The group is per queue and lock
// lifetime, so concurrent members always agree on the text.
func consumeStatement(queue string, ttl time.Duration) string {
	secs := int64(ttl / time.Second)
	i := ast.NewIdent("i")
	return printer.String(&ast.WatchStmt{
		Pattern: ast.Bind("i", ItemType),
		Where:   ast.Binary(ast.Sel(i, "queue"), token.EQL, ast.Str(queue)),
		Options: []*ast.OptionList{ast.Options(
			ast.Option("mode", ast.NewIdent("consume")),
			ast.Option("group", ast.Str(fmt.Sprintf("queue:%s:%ds", queue, secs))),
			ast.Option("ordering", ast.Ordering(ast.Asc(ast.Sel(i, "priority")))),
			ast.Option("ack_timeout", ast.Dur(ttl.Truncate(time.Second))),
			ast.Option("max_redeliveries", ast.Int(unlimitedRedeliveries)),
		)},
		Return: ast.Returning(i),
	})
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
