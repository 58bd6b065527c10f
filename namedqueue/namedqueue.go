// Package namedqueue implements the queue RPC's contract (broker.NamedQueues): named
// queues with a visibility timeout, an attempt limit, a dead-letter queue and weighted
// fairness keys, whose messages consumers lease and settle by message id. It is a
// translation onto the graph and the consume engine: a queue is a _Queue node, a
// message a QueueMessage node, consuming a consume-mode WATCH, and settlement,
// attempts, expiry, dead letters and fairness are the consume engine's.
package namedqueue

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
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/internal/keyed"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
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

// unlimitedRedeliveries stands for "no attempt limit" in a queue's consume watch.
const unlimitedRedeliveries = 1_000_000_000

// Service serves the named-queue contract. It keeps no queue state of its own: queues
// and messages are nodes and leases belong to the consume engine; it only serializes
// the creation and deletion of one queue in this process.
type Service struct {
	eng   *engine.Engine
	del   *delivery.Service
	clock herald.Clock
	locks keyed.Mutex
}

var _ broker.NamedQueues = (*Service)(nil)

// New returns the named-queue service over an engine and its running consume engine.
func New(eng *engine.Engine, del *delivery.Service) *Service {
	return &Service{eng: eng, del: del, clock: eng.Clock()}
}

// config is a queue's configuration as stored on its _Queue node, with the node ids its
// consume watch names.
type config struct {
	broker.QueueConfig
	nodeID      herald.NodeID
	incarnation string // a queue deleted and created again is a new incarnation
	dlqNodeID   herald.NodeID
}

func invalid(format string, args ...any) error {
	return herald.Errorf(herald.CodeMalformedRequest, format, args...)
}

func checkName(field, name string) error {
	if !broker.ValidQueueName(name) {
		return invalid("%s %q is invalid: use 1 to %d characters from letters, digits and - _ . ~ :", field, name, broker.MaxQueueName)
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
func (s *Service) CreateQueue(ctx context.Context, qc broker.QueueConfig) (broker.QueueConfig, error) {
	c := config{QueueConfig: qc}
	if err := checkName("queue name", c.Name); err != nil {
		return broker.QueueConfig{}, err
	}
	if c.VisibilityTimeout < 0 || c.MaxAttempts < 0 {
		return broker.QueueConfig{}, invalid("visibility timeout and max attempts must not be negative")
	}
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = DefaultVisibilityTimeout
	}
	c.VisibilityTimeout = c.VisibilityTimeout.Truncate(time.Millisecond)
	if c.VisibilityTimeout == 0 {
		return broker.QueueConfig{}, invalid("the visibility timeout must be at least 1ms")
	}
	if c.DeadLetterQueue != "" {
		if err := checkName("dead-letter queue", c.DeadLetterQueue); err != nil {
			return broker.QueueConfig{}, err
		}
	}
	for k, w := range c.Weights {
		if w < 1 {
			return broker.QueueConfig{}, invalid("the weight of fairness key %q must be 1 or more, not %d", k, w)
		}
	}
	weights, err := json.Marshal(orEmpty(c.Weights))
	if err != nil {
		return broker.QueueConfig{}, herald.Errorf(herald.CodeInternal, "encoding weights: %v", err)
	}
	c.nodeID = queueNodeID(c.Name)
	c.incarnation = randToken(8)
	c.CreatedAt = s.clock.Now()
	defer s.locks.Lock(c.Name)()
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
		return broker.QueueConfig{}, err
	}
	c.Weights = orEmpty(c.Weights)
	c.dlqNodeID = c.nodeID
	if c.DeadLetterQueue != "" {
		c.dlqNodeID = queueNodeID(c.DeadLetterQueue)
	}
	return c.QueueConfig, nil
}

func orEmpty(m map[string]int64) map[string]int64 {
	if m == nil {
		return map[string]int64{}
	}
	return m
}

// GetQueue reads a queue's configuration.
func (s *Service) GetQueue(name string) (broker.QueueConfig, error) {
	c, err := s.getQueue(name)
	return c.QueueConfig, err
}

func (s *Service) getQueue(name string) (config, error) {
	if err := checkName("queue name", name); err != nil {
		return config{}, err
	}
	var c config
	var found bool
	err := s.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		c, found = readQueue(tx, name)
		return nil
	})
	if err != nil {
		return config{}, err
	}
	if !found {
		return config{}, unknownQueue(name)
	}
	return c, nil
}

func readQueue(tx *graph.Tx, name string) (config, bool) {
	id := queueNodeID(name)
	n := tx.Node(id)
	if n == nil || n.Type != QueueType || n.Attrs.Get("name").AsString() != name {
		return config{}, false
	}
	c := config{
		QueueConfig: broker.QueueConfig{
			Name:              name,
			VisibilityTimeout: n.Attrs.Get("visibility_timeout").AsDuration(),
			MaxAttempts:       int(n.Attrs.Get("max_attempts").AsInt()),
			DeadLetterQueue:   n.Attrs.Get("dead_letter_queue").AsString(),
			CreatedAt:         n.Attrs.Get("created_at").AsTime(),
			Weights:           map[string]int64{},
		},
		nodeID:      id,
		incarnation: n.Attrs.Get("incarnation").AsString(),
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
	defer s.locks.Lock(name)()
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
func (s *Service) Enqueue(ctx context.Context, queue string, m broker.QueueMessage) (herald.NodeID, error) {
	ids, err := s.EnqueueBatch(ctx, queue, []broker.QueueMessage{m})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// EnqueueBatch adds messages to a queue in one transaction (all or none) and returns
// their ids in order. Each message is stamped with its fairness key's weight from the
// queue's configuration, so the consume watch reads it as `weight: m.weight`.
func (s *Service) EnqueueBatch(ctx context.Context, queue string, msgs []broker.QueueMessage) ([]herald.NodeID, error) {
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
	cfg, err := s.getQueue(queue)
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

// QueueOfGroup returns the queue a consume group serves when the group is one of this
// API's (named "queue-rpc:<queue>:<incarnation>", see statement), else "".
func QueueOfGroup(group string) string {
	rest, ok := strings.CutPrefix(group, "queue-rpc:")
	if !ok {
		return ""
	}
	rest = strings.TrimSuffix(rest, ":unfair")
	if i := strings.LastIndexByte(rest, ':'); i > 0 {
		return rest[:i]
	}
	return ""
}

// statement is the consume watch of a queue, built as a tree and printed. It has no
// parameters, so that the consume engine can compile it again after a restart and keep
// the queue's options for leases it recovers. Every consumer of the queue joins one
// group, named after the queue and its incarnation (a queue deleted and created again
// is a new group). fair=false leaves fairness out (for benchmarks).
func statement(c config, fair bool) string {
	maxRedeliveries := int64(unlimitedRedeliveries)
	if c.MaxAttempts > 0 {
		maxRedeliveries = int64(c.MaxAttempts - 1)
	}
	m := ast.NewIdent("m")
	group := fmt.Sprintf("queue-rpc:%s:%s", c.Name, c.incarnation)
	opts := []*ast.WatchOption{
		ast.Option("mode", ast.NewIdent("consume")),
		nil, // group
		ast.Option("ordering", ast.Ordering(ast.Asc(ast.Sel(m, "priority")))),
	}
	if fair {
		opts = append(opts, ast.Option("fairness", ast.Sel(m, "fairness_key")), ast.Option("weight", ast.Sel(m, "weight")))
	} else {
		group += ":unfair"
	}
	opts[1] = ast.Option("group", ast.Str(group))
	opts = append(opts,
		ast.Option("available_at", ast.Sel(m, "available_at")),
		ast.Option("ack_timeout", ast.Dur(c.VisibilityTimeout)),
		ast.Option("max_redeliveries", ast.Int(maxRedeliveries)),
		ast.Option("dead_letter", ast.Ref(string(c.dlqNodeID))),
		ast.Option("buffer", ast.Int(ConsumeBuffer)),
	)
	return printer.String(&ast.WatchStmt{
		Pattern: ast.Bind("m", MessageType),
		Where:   ast.Binary(ast.Sel(m, "queue"), token.EQL, ast.Str(c.Name)),
		Options: []*ast.OptionList{ast.Options(opts...)},
		Return:  ast.Returning(m),
	})
}

// subscription is one consumer of a queue (broker.Subscription). Next returns its leased
// messages; Close ends it and returns its unsettled messages to the queue at once.
type subscription struct {
	queue string
	st    herald.Stream
}

// ConsumeQueue registers a consumer of a queue. Its messages come by deficit round
// robin across fairness keys and by priority inside a key; at most ConsumeBuffer are
// unsettled at a time.
func (s *Service) ConsumeQueue(ctx context.Context, queue string) (broker.Subscription, error) {
	return s.consume(ctx, queue, true)
}

func (s *Service) consume(ctx context.Context, queue string, fair bool) (*subscription, error) {
	cfg, err := s.getQueue(queue)
	if err != nil {
		return nil, err
	}
	st, err := s.del.Consume(herald.OnBehalf(ctx), "", statement(cfg, fair), nil)
	if err != nil {
		return nil, err
	}
	return &subscription{queue: queue, st: st}, nil
}

// Next waits for the next leased message. It returns io.EOF once the subscription has
// ended (Close, or the server stopping), the stream's error if it failed, or ctx's.
func (sub *subscription) Next(ctx context.Context) (broker.Delivered, error) {
	for {
		select {
		case <-ctx.Done():
			return broker.Delivered{}, ctx.Err()
		case ev, ok := <-sub.st.Events():
			if !ok {
				return broker.Delivered{}, io.EOF
			}
			switch ev.Type {
			case herald.EventConsumed:
				return delivered(sub.queue, ev), nil
			case herald.EventError:
				if ev.Error != nil {
					return broker.Delivered{}, ev.Error
				}
				return broker.Delivered{}, herald.Errorf(ev.Code, "%s", ev.Message)
			}
			// A timeout event needs no answer: the message comes back with its
			// attempt count up.
		}
	}
}

// Close ends the subscription; its unsettled messages return to the queue at once.
func (sub *subscription) Close() { sub.st.Close() }

// Done is closed when the subscription has ended.
func (sub *subscription) Done() <-chan struct{} { return sub.st.Done() }

// Receive leases up to n messages that are ready now (none when nothing is), without a
// stream: a pull. The leases are settled by message id like streamed ones, and expire
// after the queue's visibility timeout.
func (s *Service) Receive(ctx context.Context, queue string, n int) ([]broker.Delivered, error) {
	cfg, err := s.getQueue(queue)
	if err != nil {
		return nil, err
	}
	evs, err := s.del.Lease(herald.OnBehalf(ctx), "", statement(cfg, true), nil, n)
	if err != nil {
		return nil, err
	}
	out := make([]broker.Delivered, len(evs))
	for i, ev := range evs {
		out[i] = delivered(queue, ev)
	}
	return out, nil
}

// delivered reads a consumed event whose match is a whole QueueMessage node.
func delivered(queue string, ev herald.Event) broker.Delivered {
	m := ev.Match
	d := broker.Delivered{
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
	if !ok || !herald.Holds(ctx, holder) {
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

// AckMessage settles a leased message as done: it is deleted. Acknowledging a message that is
// unknown, not leased or already acknowledged answers not_found and changes nothing.
func (s *Service) AckMessage(ctx context.Context, queue string, id herald.NodeID) error {
	h, err := s.lease(ctx, queue, id)
	if err != nil {
		return err
	}
	_, err = s.settleHandle(ctx, h, delivery.Settle{Action: delivery.ActAck})
	return settled(queue, id, err)
}

// NackMessage settles a leased message as failed. In one commit its lease ends and its attempt
// count is recorded one up; it returns to the ready queue at its place (its fairness key
// and priority unchanged), after o.Delay if set. When it has used the queue's
// max_attempts, or with o.DeadLetter, it is dead-lettered instead.
func (s *Service) NackMessage(ctx context.Context, queue string, id herald.NodeID, o broker.QueueNack) error {
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

// ExtendMessage moves a leased message's deadline to now + by (0: the visibility timeout).
func (s *Service) ExtendMessage(ctx context.Context, queue string, id herald.NodeID, by time.Duration) (time.Time, error) {
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
