// Package watermill adapts Herald to Watermill: a message.Publisher and a
// message.Subscriber whose messages are WatermillMessage nodes, consumed through
// consume-mode watches, with Ack and Nack mapped to Herald's ACK and NACK.
//
// Each consumer group of a topic, the default one (subscribers without a consumer
// group) included, is registered as a WatermillGroup node by its first Subscribe or
// SubscribeInitialize, and receives the messages published after that. Publish writes
// one WatermillMessage node per registered group of the topic. While a topic has no
// registered group at all, Publish writes one node for the default group, so that
// messages published before the first subscriber are not lost: the first subscribers
// without a consumer group receive them (a named group does not).
package watermill

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
)

// Node types used by the adapter.
const (
	MessageType = "WatermillMessage"
	GroupType   = "WatermillGroup"
)

// Schema declares the adapter's node types.
const Schema = `node WatermillMessage { topic: String, grp: String, uuid: String, payload: String, metadata: String }
node WatermillGroup { topic: String, grp: String }`

// DefaultMaxRedeliveries is the MaxRedeliveries of a Config that leaves it 0: a message
// that keeps failing is delivered 17 times, then dead-lettered.
const DefaultMaxRedeliveries = 16

// ErrClosed is returned by Publish and Subscribe after Close.
var ErrClosed = errors.New("watermill: closed")

// Config configures a Publisher or Subscriber.
type Config struct {
	// ConsumerGroup names the subscriber's consumer group. Subscribers of one topic in
	// one group share its messages; each group gets every message. Empty: the topic's
	// default group.
	ConsumerGroup string
	// AckTimeout is the consume watch's ack_timeout (default 30s): an unsettled message
	// is redelivered after it.
	AckTimeout time.Duration
	// MaxRedeliveries is the watch's max_redeliveries (default DefaultMaxRedeliveries):
	// how many times a message is delivered again after a Nack or an expired AckTimeout.
	// When its last delivery fails as well, the message is dead-lettered: Herald deletes
	// its node and records it as a _DeadLetter node (MATCH d: _DeadLetter RETURN d),
	// which REDRIVE can put back. A message given back because its subscriber closed
	// does not count as a failed delivery.
	MaxRedeliveries int
	// CloseTimeout bounds how long Close waits for a subscription to stop (default 5s).
	CloseTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.AckTimeout <= 0 {
		c.AckTimeout = 30 * time.Second
	}
	if c.MaxRedeliveries <= 0 {
		c.MaxRedeliveries = DefaultMaxRedeliveries
	}
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = 5 * time.Second
	}
	return c
}

// schemaAttempts bounds how often EnsureSchema declares the schema when concurrent
// declarations conflict with its own.
const schemaAttempts = 5

// EnsureSchema declares the adapter's node types. Declaring a type as it is already
// declared changes nothing, so it is safe to call any number of times and from
// concurrent callers; it fails if a type of the same name is an edge type, or has nodes
// that hold one of the adapter's attributes as another kind (E2013).
func EnsureSchema(ctx context.Context, c *client.Client) error {
	for attempt := 1; ; attempt++ {
		_, err := c.Exec(ctx, Schema, nil)
		if err == nil {
			return nil
		}
		// A concurrent declaration of the same type conflicts with this one; declaring
		// again finds the type declared and changes nothing.
		if herald.CodeOf(err) != herald.CodeTxConflict || attempt == schemaAttempts {
			return fmt.Errorf("watermill: declaring the schema: %w", err)
		}
	}
}

// Publisher publishes Watermill messages as Herald nodes.
type Publisher struct {
	c      *client.Client
	mu     sync.RWMutex
	closed bool
}

// NewPublisher returns a Publisher on c, declaring the schema if needed. Close does not
// close c.
func NewPublisher(ctx context.Context, c *client.Client) (*Publisher, error) {
	if err := EnsureSchema(ctx, c); err != nil {
		return nil, err
	}
	return &Publisher{c: c}, nil
}

// Publish creates the messages' nodes, one per registered consumer group of topic (one
// for the default group while none is registered), each synced before Publish returns.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrClosed
	}
	ctx := context.Background()
	groups, err := p.groups(ctx, topic)
	if err != nil {
		return err
	}
	for _, msg := range msgs {
		meta, err := json.Marshal(map[string]string(msg.Metadata))
		if err != nil {
			return fmt.Errorf("watermill: metadata: %w", err)
		}
		// The message's context gives the publish its trace (the node stores it, see
		// the client's WithTracerProvider); its cancellation is not the publish's.
		mctx := context.WithoutCancel(msg.Context())
		for _, g := range groups {
			_, err := p.c.Publish(mctx, MessageType, map[string]any{
				"topic":    topic,
				"grp":      g,
				"uuid":     msg.UUID,
				"payload":  base64.StdEncoding.EncodeToString(msg.Payload),
				"metadata": string(meta),
			})
			if err != nil {
				return fmt.Errorf("watermill: publish %s: %w", msg.UUID, err)
			}
		}
	}
	return nil
}

// groups lists the consumer groups of topic that Publish writes a copy for: the
// registered ones, or the default group "" while none is.
func (p *Publisher) groups(ctx context.Context, topic string) ([]string, error) {
	resp, err := p.c.Exec(ctx, `MATCH g: WatermillGroup WHERE g.topic = $t RETURN DISTINCT g.grp`, map[string]any{"t": topic})
	if err != nil {
		return nil, fmt.Errorf("watermill: listing consumer groups: %w", err)
	}
	var out []string
	for _, row := range resp.Last().Rows {
		if len(row) == 1 {
			if g, ok := row[0].(string); ok {
				out = append(out, g)
			}
		}
	}
	if len(out) == 0 {
		out = []string{""}
	}
	return out, nil
}

// Close stops publishing; it does not close the client.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}

// Subscriber consumes Watermill messages through consume-mode watches.
type Subscriber struct {
	c   *client.Client
	cfg Config

	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	subs    sync.WaitGroup
}

// NewSubscriber returns a Subscriber on c, declaring the schema if needed. Close does
// not close c.
func NewSubscriber(ctx context.Context, c *client.Client, cfg Config) (*Subscriber, error) {
	if err := EnsureSchema(ctx, c); err != nil {
		return nil, err
	}
	return &Subscriber{c: c, cfg: cfg.withDefaults(), closing: make(chan struct{})}, nil
}

// SubscribeInitialize registers the subscriber's consumer group (the default group
// when Config.ConsumerGroup is empty) for topic, so that messages published from now on
// are kept for it.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	return s.register(context.Background(), topic)
}

// register creates the WatermillGroup node of the subscriber's consumer group for
// topic unless it exists. Its id is derived from topic and group, so concurrent
// registrations create one node.
func (s *Subscriber) register(ctx context.Context, topic string) error {
	g := s.cfg.ConsumerGroup
	sum := sha256.Sum256([]byte(topic + "\x00" + g))
	id := "wmg_" + hex.EncodeToString(sum[:16])
	resp, err := s.c.Exec(ctx, `MATCH g: WatermillGroup WHERE g.topic = $t AND g.grp = $g RETURN g.id`,
		map[string]any{"t": topic, "g": g})
	if err != nil {
		return fmt.Errorf("watermill: consumer group: %w", err)
	}
	if len(resp.Last().Rows) > 0 {
		return nil
	}
	if _, err := s.c.Publish(ctx, GroupType, map[string]any{"topic": topic, "grp": g}, client.WithID(id)); err != nil {
		// A concurrent registration under the same id may have won.
		resp, err2 := s.c.Exec(ctx, `MATCH g: WatermillGroup WHERE g.topic = $t AND g.grp = $g RETURN g.id`,
			map[string]any{"t": topic, "g": g})
		if err2 == nil && len(resp.Last().Rows) > 0 {
			return nil
		}
		return fmt.Errorf("watermill: consumer group: %w", err)
	}
	return nil
}

func (s *Subscriber) watch(topic string) string {
	group := "watermill:" + topic + ":" + s.cfg.ConsumerGroup
	return fmt.Sprintf(`WATCH m: WatermillMessage WHERE m.topic = $topic AND m.grp = $grp `+
		`[mode: consume, group: %s, ack_timeout: %dms, max_redeliveries: %d, buffer: 1] RETURN m`,
		quote(group), s.cfg.AckTimeout.Milliseconds(), s.cfg.MaxRedeliveries)
}

// quote writes s as a Herald string literal.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Subscribe consumes topic in the subscriber's consumer group. Each message waits for
// Ack (Herald ACK: the node is deleted) or Nack (Herald NACK: redelivered) before the
// next one is delivered. The channel closes when ctx is done or Close is called.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.subs.Add(1)
	s.mu.Unlock()

	if err := s.register(ctx, topic); err != nil {
		s.subs.Done()
		return nil, err
	}
	out := make(chan *message.Message)
	stop := make(chan struct{}) // closed when the subscription ends, for whatever reason
	var (
		hmu      sync.Mutex
		stopped  bool
		handlers sync.WaitGroup
	)
	handler := func(hctx context.Context, m *client.Message) error {
		hmu.Lock()
		if stopped {
			hmu.Unlock()
			return nil
		}
		handlers.Add(1)
		hmu.Unlock()
		defer handlers.Done()
		msg, err := decode(m.Match)
		if err != nil {
			// A node that is not a Watermill message: dead-letter it.
			return m.Reject(hctx)
		}
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// The message's context ends with the subscription, as before; its values are
		// the handler's, which hold the span of the delivery (the publisher's trace).
		msg.SetContext(valuesOf{mctx, hctx})
		select {
		case out <- msg:
		case <-stop:
			return nil
		case <-hctx.Done():
			return nil
		}
		select {
		case <-msg.Acked():
		case <-msg.Nacked():
		case <-stop:
		case <-hctx.Done():
		}
		// The message may have been settled just as the subscription ended, with both
		// ready at once: the settlement still counts.
		select {
		case <-msg.Acked():
			return m.Ack(context.WithoutCancel(hctx))
		case <-msg.Nacked():
			return m.Nack(context.WithoutCancel(hctx))
		default:
			return nil // left unsettled: Herald releases it when the subscription closes
		}
	}
	sub, err := s.c.Subscribe(ctx, s.watch(topic), handler,
		client.WithPolicy(client.Manual),
		client.WithParams(map[string]any{"topic": topic, "grp": s.cfg.ConsumerGroup}))
	if err != nil {
		s.subs.Done()
		return nil, fmt.Errorf("watermill: subscribe %s: %w", topic, err)
	}
	go func() {
		defer s.subs.Done()
		select {
		case <-ctx.Done():
		case <-s.closing:
		case <-sub.Done():
		}
		close(stop)
		cctx, cancel := context.WithTimeout(context.Background(), s.cfg.CloseTimeout)
		_ = sub.Close(cctx)
		cancel()
		hmu.Lock()
		stopped = true
		hmu.Unlock()
		handlers.Wait()
		close(out)
	}()
	return out, nil
}

// decode turns a WatermillMessage node into a Watermill message.
// valuesOf is a context that ends as its Context does and holds the values of values.
type valuesOf struct {
	context.Context
	values context.Context
}

func (c valuesOf) Value(key any) any { return c.values.Value(key) }

func decode(node map[string]any) (*message.Message, error) {
	uuid, _ := node["uuid"].(string)
	p, _ := node["payload"].(string)
	payload, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		return nil, fmt.Errorf("watermill: payload: %w", err)
	}
	msg := message.NewMessage(uuid, payload)
	if meta, _ := node["metadata"].(string); meta != "" {
		var md map[string]string
		if err := json.Unmarshal([]byte(meta), &md); err != nil {
			return nil, fmt.Errorf("watermill: metadata: %w", err)
		}
		for k, v := range md {
			msg.Metadata.Set(k, v)
		}
	}
	return msg, nil
}

// Close ends every subscription (their unsettled messages are released for
// redelivery) and waits for their channels to close. It does not close the client.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()
	s.subs.Wait()
	return nil
}

var (
	_ message.Publisher            = (*Publisher)(nil)
	_ message.Subscriber           = (*Subscriber)(nil)
	_ message.SubscribeInitializer = (*Subscriber)(nil)
)
