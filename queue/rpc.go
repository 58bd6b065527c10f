package queue

// The queue RPC's contract: named queues with a visibility timeout, an attempt limit, a
// dead-letter queue and weighted fairness keys; messages enqueued with a payload,
// headers, a fairness key, a priority and an optional delay; consumers that lease them
// and settle them by message id. Like the REST contract it is a translation: a queue is
// a _Queue node, a message is a QueueMessage node, consuming is a consume-mode WATCH,
// and settlement, attempts, expiry, dead letters and fairness are the consume engine's.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
)

// Types written by the queue RPC.
const (
	// QueueType is the system node type of a queue's configuration.
	QueueType = "_Queue"
	// MessageType is the node type of a queued message:
	// { queue, payload, headers, fairness_key, weight, priority, enqueued_at, available_at }.
	MessageType = "QueueMessage"
)

// Defaults and limits of the queue RPC.
const (
	DefaultVisibilityTimeout = 30 * time.Second
	// ConsumeBuffer caps the unsettled messages of one ConsumeQueue stream.
	ConsumeBuffer = 1000
	// MaxEnqueueBatch bounds the messages of one EnqueueBatch.
	MaxEnqueueBatch = 10000
)

// Config is a queue's configuration, stored on its _Queue node.
type Config struct {
	Name string
	// VisibilityTimeout is how long a consumer holds a message (the watch's
	// ack_timeout); 0 means DefaultVisibilityTimeout. Whole milliseconds.
	VisibilityTimeout time.Duration
	// MaxAttempts bounds the deliveries of a message; when the last one fails (Nack or
	// expiry) the message is dead-lettered. 0 means no limit.
	MaxAttempts int
	// DeadLetterQueue names an existing queue whose node the dead letters are linked
	// to; "" links them to this queue's own node.
	DeadLetterQueue string
	// Weights maps fairness keys to their weight (≥ 1); other keys weigh 1.
	Weights map[string]int64
	// CreatedAt is set by CreateQueue.
	CreatedAt time.Time

	nodeID      herald.NodeID
	incarnation string
	dlqNodeID   herald.NodeID
}

// Message is one message to enqueue.
type Message struct {
	Payload     []byte
	Headers     map[string]string
	FairnessKey string
	Priority    int64         // 0 is the highest; not negative
	Delay       time.Duration // hold the message back this long
}

// Delivered is a leased message.
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

// NackOptions modify a Nack.
type NackOptions struct {
	Delay      time.Duration // redeliver no earlier than this
	DeadLetter bool          // dead-letter at once
}

func invalid(format string, args ...any) error {
	return herald.Errorf(herald.CodeMalformedRequest, format, args...)
}

func checkName(field, name string) error {
	if !ValidID(name) {
		return invalid("%s %q is invalid: use 1 to %d characters from letters, digits and - _ . ~ :", field, name, MaxIDLength)
	}
	return nil
}

func unknownQueue(name string) error {
	return herald.Errorf(herald.CodeNodeNotFound, "queue %q does not exist", name)
}

// notLeased is the answer to settling a message without a current lease.
func notLeased(queue string, id herald.NodeID) error {
	return herald.Errorf(herald.CodeInvalidDeliveryID, "message %q of queue %q is not leased: unknown, already settled, or back in the queue", id, queue)
}

// queueNodeID names a queue's _Queue node. It is a plain word (so that a watch can name
// it as `#id` in dead_letter) derived from the queue name.
func queueNodeID(name string) herald.NodeID {
	sum := sha256.Sum256([]byte(name))
	return herald.NodeID("_q" + hex.EncodeToString(sum[:10]))
}

// CreateQueue declares a queue. An existing name is refused (E2004 DUPLICATE_ID,
// already_exists); a dead-letter queue must exist (E2005 NODE_NOT_FOUND).
func (s *Service) CreateQueue(ctx context.Context, c Config) (Config, error) {
	if err := checkName("queue name", c.Name); err != nil {
		return Config{}, err
	}
	if c.VisibilityTimeout < 0 || c.MaxAttempts < 0 {
		return Config{}, invalid("visibility timeout and max attempts must not be negative")
	}
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = DefaultVisibilityTimeout
	}
	c.VisibilityTimeout = c.VisibilityTimeout.Truncate(time.Millisecond)
	if c.VisibilityTimeout == 0 {
		return Config{}, invalid("the visibility timeout must be at least 1ms")
	}
	if c.DeadLetterQueue != "" {
		if err := checkName("dead-letter queue", c.DeadLetterQueue); err != nil {
			return Config{}, err
		}
	}
	for k, w := range c.Weights {
		if w < 1 {
			return Config{}, invalid("the weight of fairness key %q must be 1 or more, not %d", k, w)
		}
	}
	weights, err := json.Marshal(orEmpty(c.Weights))
	if err != nil {
		return Config{}, herald.Errorf(herald.CodeInternal, "encoding weights: %v", err)
	}
	c.nodeID = queueNodeID(c.Name)
	c.incarnation = randToken(8)
	c.CreatedAt = s.clock.Now()
	defer s.acquire(rpcLockKey(c.Name))()
	_, _, err = s.eng.System(ctx, func(tx *engine.SysTx) error {
		if tx.Node(c.nodeID) != nil {
			return herald.Errorf(herald.CodeDuplicateID, "queue %q already exists", c.Name)
		}
		if c.DeadLetterQueue != "" && c.DeadLetterQueue != c.Name {
			if n := tx.Node(queueNodeID(c.DeadLetterQueue)); n == nil || n.Type != QueueType {
				return herald.Errorf(herald.CodeNodeNotFound, "dead-letter queue %q does not exist; create it first", c.DeadLetterQueue)
			}
		}
		tx.PutNode(&herald.Node{ID: c.nodeID, Type: QueueType, Attrs: herald.AttrsOf(map[string]herald.Value{
			"name":               herald.String(c.Name),
			"visibility_timeout": herald.Duration(c.VisibilityTimeout),
			"max_attempts":       herald.Int(int64(c.MaxAttempts)),
			"dead_letter_queue":  herald.String(c.DeadLetterQueue),
			"fairness_weights":   herald.String(string(weights)),
			"incarnation":        herald.String(c.incarnation),
			"created_at":         herald.Timestamp(c.CreatedAt),
		})})
		return nil
	})
	if err != nil {
		return Config{}, err
	}
	c.Weights = orEmpty(c.Weights)
	c.dlqNodeID = c.nodeID
	if c.DeadLetterQueue != "" {
		c.dlqNodeID = queueNodeID(c.DeadLetterQueue)
	}
	return c, nil
}

func orEmpty(m map[string]int64) map[string]int64 {
	if m == nil {
		return map[string]int64{}
	}
	return m
}

// rpcLockKey keeps the RPC's create and delete of a queue apart from REST operations
// on a queue of the same name (they are separate queues).
func rpcLockKey(name string) string { return "\x00rpc:" + name }

// GetQueue reads a queue's configuration.
func (s *Service) GetQueue(name string) (Config, error) {
	if err := checkName("queue name", name); err != nil {
		return Config{}, err
	}
	var c Config
	var found bool
	err := s.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		c, found = readQueue(tx, name)
		return nil
	})
	if err != nil {
		return Config{}, err
	}
	if !found {
		return Config{}, unknownQueue(name)
	}
	return c, nil
}

func readQueue(tx *graph.Tx, name string) (Config, bool) {
	id := queueNodeID(name)
	n := tx.Node(id)
	if n == nil || n.Type != QueueType || n.Attrs.Get("name").AsString() != name {
		return Config{}, false
	}
	c := Config{
		Name:              name,
		VisibilityTimeout: n.Attrs.Get("visibility_timeout").AsDuration(),
		MaxAttempts:       int(n.Attrs.Get("max_attempts").AsInt()),
		DeadLetterQueue:   n.Attrs.Get("dead_letter_queue").AsString(),
		CreatedAt:         n.Attrs.Get("created_at").AsTime(),
		Weights:           map[string]int64{},
		nodeID:            id,
		incarnation:       n.Attrs.Get("incarnation").AsString(),
	}
	_ = json.Unmarshal([]byte(n.Attrs.Get("fairness_weights").AsString()), &c.Weights)
	c.dlqNodeID = id
	if c.DeadLetterQueue != "" {
		c.dlqNodeID = queueNodeID(c.DeadLetterQueue)
	}
	return c, true
}

// DeleteQueue removes a queue's node and every message in it, in one commit. Leases of
// its messages end with them (settling them answers not_found); dead letters stay on
// record. It returns how many messages were deleted.
func (s *Service) DeleteQueue(ctx context.Context, name string) (int, error) {
	if err := checkName("queue name", name); err != nil {
		return 0, err
	}
	defer s.acquire(rpcLockKey(name))()
	deleted := 0
	_, _, err := s.eng.System(ctx, func(tx *engine.SysTx) error {
		if _, ok := readQueue(tx.Tx, name); !ok {
			return unknownQueue(name)
		}
		for _, id := range tx.NodesByAttr(MessageType, "queue", herald.String(name)) {
			tx.DeleteNode(id)
			deleted++
		}
		tx.DeleteNode(queueNodeID(name))
		return nil
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}

// Enqueue adds one message to a queue and returns its id.
func (s *Service) Enqueue(ctx context.Context, queue string, m Message) (herald.NodeID, error) {
	ids, err := s.EnqueueBatch(ctx, queue, []Message{m})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// EnqueueBatch adds messages to a queue in one transaction (all or none) and returns
// their ids in order. Each message is stamped with its fairness key's weight from the
// queue's configuration, so the consume watch reads it as `weight: m.weight`.
func (s *Service) EnqueueBatch(ctx context.Context, queue string, msgs []Message) ([]herald.NodeID, error) {
	if err := checkName("queue", queue); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	if len(msgs) > MaxEnqueueBatch {
		return nil, invalid("at most %d messages per batch, not %d", MaxEnqueueBatch, len(msgs))
	}
	for _, m := range msgs {
		if m.Priority < 0 {
			return nil, invalid("priority must be 0 (the highest) or more, not %d", m.Priority)
		}
		if m.Delay < 0 {
			return nil, invalid("delay must not be negative")
		}
	}
	cfg, err := s.GetQueue(queue)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	params := map[string]herald.Value{"queue": herald.String(queue), "now": herald.Timestamp(now)}
	var q strings.Builder
	if len(msgs) > 1 {
		q.WriteString("BEGIN;\n")
	}
	for i, m := range msgs {
		headers, err := json.Marshal(m.Headers)
		if err != nil {
			return nil, invalid("headers: %v", err)
		}
		if m.Headers == nil {
			headers = []byte("{}")
		}
		weight, ok := cfg.Weights[m.FairnessKey]
		if !ok {
			weight = 1
		}
		p := "p" + strconv.Itoa(i)
		params[p+"_payload"] = herald.String(base64.StdEncoding.EncodeToString(m.Payload))
		params[p+"_headers"] = herald.String(string(headers))
		params[p+"_key"] = herald.String(m.FairnessKey)
		params[p+"_weight"] = herald.Int(weight)
		params[p+"_priority"] = herald.Int(m.Priority)
		avail := ""
		if m.Delay > 0 {
			params[p+"_at"] = herald.Timestamp(now.Add(m.Delay))
			avail = fmt.Sprintf(", available_at = $%s_at", p)
		}
		fmt.Fprintf(&q, "SPAWN m: %s { queue = $queue, payload = $%[2]s_payload, headers = $%[2]s_headers, fairness_key = $%[2]s_key, weight = $%[2]s_weight, priority = $%[2]s_priority, enqueued_at = $now%[3]s } RETURNING m.id;\n",
			MessageType, p, avail)
	}
	if len(msgs) > 1 {
		q.WriteString("COMMIT;\n")
	}
	resp, err := s.eng.Exec(ctx, "", q.String(), params)
	if err != nil {
		return nil, err
	}
	ids := make([]herald.NodeID, 0, len(msgs))
	for _, r := range resp.Results {
		if len(r.Rows) == 1 && len(r.Rows[0]) == 1 {
			ids = append(ids, herald.NodeID(r.Rows[0][0].AsString()))
		}
	}
	if len(ids) != len(msgs) {
		return nil, herald.Errorf(herald.CodeInternal, "enqueue returned %d ids for %d messages", len(ids), len(msgs))
	}
	return ids, nil
}

// statement is the consume watch of a queue. It has no parameters, so that the consume
// engine can compile it again after a restart and keep the queue's options for leases
// it recovers; the queue name is validated and needs no escaping. Every consumer of the
// queue joins one group, named after the queue and its incarnation (a queue deleted and
// created again is a new group). fair=false leaves fairness out (for benchmarks).
func statement(c Config, fair bool) string {
	maxRedeliveries := unlimitedRedeliveries
	if c.MaxAttempts > 0 {
		maxRedeliveries = c.MaxAttempts - 1
	}
	fairness := ", fairness: m.fairness_key, weight: m.weight"
	group := fmt.Sprintf("queue-rpc:%s:%s", c.Name, c.incarnation)
	if !fair {
		fairness = ""
		group += ":unfair"
	}
	return fmt.Sprintf(`WATCH m: %s WHERE m.queue = "%s" [mode: consume, group: "%s", ordering: attribute(m.priority ASC)%s, available_at: m.available_at, ack_timeout: %dms, max_redeliveries: %d, dead_letter: #%s, buffer: %d] RETURN m`,
		MessageType, c.Name, group, fairness, c.VisibilityTimeout.Milliseconds(), maxRedeliveries, c.dlqNodeID, ConsumeBuffer)
}

// Subscription is one consumer of a queue. Next returns its leased messages; Close ends
// it and returns its unsettled messages to the queue at once.
type Subscription struct {
	queue string
	st    herald.Stream
}

// Consume registers a consumer of a queue. Its messages come by deficit round robin
// across fairness keys and by priority inside a key; at most ConsumeBuffer are
// unsettled at a time.
func (s *Service) Consume(ctx context.Context, queue string) (*Subscription, error) {
	return s.consume(ctx, queue, true)
}

func (s *Service) consume(ctx context.Context, queue string, fair bool) (*Subscription, error) {
	cfg, err := s.GetQueue(queue)
	if err != nil {
		return nil, err
	}
	st, err := s.del.Consume(surface(ctx), "", statement(cfg, fair), nil)
	if err != nil {
		return nil, err
	}
	return &Subscription{queue: queue, st: st}, nil
}

// Next waits for the next leased message. It returns io.EOF once the subscription has
// ended (Close, or the server stopping), the stream's error if it failed, or ctx's.
func (sub *Subscription) Next(ctx context.Context) (Delivered, error) {
	for {
		select {
		case <-ctx.Done():
			return Delivered{}, ctx.Err()
		case ev, ok := <-sub.st.Events():
			if !ok {
				return Delivered{}, io.EOF
			}
			switch ev.Type {
			case herald.EventConsumed:
				return delivered(sub.queue, ev), nil
			case herald.EventError:
				if ev.Error != nil {
					return Delivered{}, ev.Error
				}
				return Delivered{}, herald.Errorf(ev.Code, "%s", ev.Message)
			}
			// A timeout event needs no answer: the message comes back with its
			// attempt count up.
		}
	}
}

// Close ends the subscription; its unsettled messages return to the queue at once.
func (sub *Subscription) Close() { sub.st.Close() }

// Done is closed when the subscription has ended.
func (sub *Subscription) Done() <-chan struct{} { return sub.st.Done() }

// Receive leases up to n messages that are ready now (none when nothing is), without a
// stream: a pull. The leases are settled by message id like streamed ones, and expire
// after the queue's visibility timeout.
func (s *Service) Receive(ctx context.Context, queue string, n int) ([]Delivered, error) {
	cfg, err := s.GetQueue(queue)
	if err != nil {
		return nil, err
	}
	evs, err := s.del.Lease(surface(ctx), "", statement(cfg, true), nil, n)
	if err != nil {
		return nil, err
	}
	out := make([]Delivered, len(evs))
	for i, ev := range evs {
		out[i] = delivered(queue, ev)
	}
	return out, nil
}

// delivered reads a consumed event whose match is a whole QueueMessage node.
func delivered(queue string, ev herald.Event) Delivered {
	m := ev.Match
	d := Delivered{
		ID:          herald.NodeID(m.MapGet("id").AsString()),
		Queue:       queue,
		FairnessKey: m.MapGet("fairness_key").AsString(),
		Priority:    m.MapGet("priority").AsInt(),
		Weight:      m.MapGet("weight").AsInt(),
		Attempt:     ev.Attempt,
		Releases:    ev.Releases,
		Deadline:    ev.Deadline,
		Headers:     map[string]string{},
	}
	if p := m.MapGet("payload"); p.Kind() == herald.KindString {
		if b, err := base64.StdEncoding.DecodeString(p.AsString()); err == nil {
			d.Payload = b
		} else {
			d.Payload = []byte(p.AsString()) // written by hand, not base64
		}
	}
	if h := m.MapGet("headers"); h.Kind() == herald.KindString {
		_ = json.Unmarshal([]byte(h.AsString()), &d.Headers)
	}
	if t := m.MapGet("enqueued_at"); t.Kind() == herald.KindTimestamp {
		d.EnqueuedAt = t.AsTime()
	}
	return d
}

// lease finds the current lease of a message of queue: its delivery id. A message that
// does not exist, belongs to another queue, or is not leased answers not_found (E8004).
//
// A message id is not a capability (anyone who may read the queue sees it): a lease
// made for one principal is settled only by that principal or one with admin; to any
// other it answers not_found as well.
func (s *Service) lease(ctx context.Context, queue string, id herald.NodeID) (delivery.Handle, error) {
	if err := checkName("queue", queue); err != nil {
		return delivery.Handle{}, err
	}
	if id == "" {
		return delivery.Handle{}, invalid("a message id is required")
	}
	mine := false
	err := s.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		n := tx.Node(id)
		mine = n != nil && n.Type == MessageType && n.Attrs.Get("queue").Kind() == herald.KindString && n.Attrs.Get("queue").AsString() == queue
		return nil
	})
	if err != nil {
		return delivery.Handle{}, err
	}
	if !mine {
		return delivery.Handle{}, notLeased(queue, id)
	}
	h, holder, ok := s.del.LeaseOf(id)
	if !ok || !holds(ctx, holder) {
		return delivery.Handle{}, notLeased(queue, id)
	}
	return h, nil
}

// settleHandle settles one lease by its handle.
func (s *Service) settleHandle(ctx context.Context, h delivery.Handle, it delivery.Settle) (delivery.SettleResult, error) {
	r := s.del.SettleHandles(ctx, []delivery.Handle{h}, it)
	return r[0], r[0].Err
}

// settled maps the consume engine's E8004 (the lease ended between lookup and
// settlement) to the message's not_found.
func settled(queue string, id herald.NodeID, err error) error {
	if err != nil && herald.CodeOf(err) == herald.CodeInvalidDeliveryID {
		return notLeased(queue, id)
	}
	return err
}

// Ack settles a leased message as done: it is deleted. Acknowledging a message that is
// unknown, not leased or already acknowledged answers not_found and changes nothing.
func (s *Service) Ack(ctx context.Context, queue string, id herald.NodeID) error {
	h, err := s.lease(ctx, queue, id)
	if err != nil {
		return err
	}
	_, err = s.settleHandle(ctx, h, delivery.Settle{Action: delivery.ActAck})
	return settled(queue, id, err)
}

// Nack settles a leased message as failed. In one commit its lease ends and its attempt
// count is recorded one up; it returns to the ready queue at its place (its fairness key
// and priority unchanged), after o.Delay if set. When it has used the queue's
// max_attempts, or with o.DeadLetter, it is dead-lettered instead.
func (s *Service) Nack(ctx context.Context, queue string, id herald.NodeID, o NackOptions) error {
	if o.Delay < 0 {
		return invalid("delay must not be negative")
	}
	h, err := s.lease(ctx, queue, id)
	if err != nil {
		return err
	}
	act := delivery.ActNack
	if o.DeadLetter {
		act = delivery.ActReject
	}
	_, err = s.settleHandle(ctx, h, delivery.Settle{Action: act, Delay: o.Delay})
	return settled(queue, id, err)
}

// Extend moves a leased message's deadline to now + by (0: the visibility timeout).
func (s *Service) Extend(ctx context.Context, queue string, id herald.NodeID, by time.Duration) (time.Time, error) {
	if by < 0 {
		return time.Time{}, invalid("by must not be negative")
	}
	h, err := s.lease(ctx, queue, id)
	if err != nil {
		return time.Time{}, err
	}
	r, err := s.settleHandle(ctx, h, delivery.Settle{Action: delivery.ActExtend, By: by})
	return r.Deadline, settled(queue, id, err)
}

// RedriveDeadLetters puts the dead-lettered messages of a queue back into it: each is
// spawned again (under its old id when free) with its attempt count reset, and its
// letter deleted. It returns how many came back.
func (s *Service) RedriveDeadLetters(ctx context.Context, queue string) (int, error) {
	if _, err := s.GetQueue(queue); err != nil {
		return 0, err
	}
	var letters []herald.NodeID
	err := s.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		for _, id := range tx.NodesByAttr("_DeadLetter", "subject_type", herald.String(MessageType)) {
			n := tx.Node(id)
			var m struct {
				Queue string `json:"queue"`
			}
			if n != nil && json.Unmarshal([]byte(n.Attrs.Get("original_match").AsString()), &m) == nil && m.Queue == queue {
				letters = append(letters, id)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range letters {
		if _, err := s.del.Redrive(ctx, l); err != nil {
			if herald.CodeOf(err) == herald.CodeNodeNotFound {
				continue // redriven by someone else meanwhile
			}
			return n, err
		}
		n++
	}
	return n, nil
}

// randToken returns n random bytes as lower-case hex.
func randToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
