package server

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/lockqueue"
	"github.com/herald-mq/herald/namedqueue"
	"github.com/herald-mq/herald/watch"
)

// node is the one implementation of broker.Broker: what the JSON API, the RPC API and
// every other surface of this process reach. It routes a stream by mode once, and
// converts settlements between the seam's values and the consume engine's.
type node struct {
	eng *engine.Engine
	del *delivery.Service
	wat *watch.Service
	lq  *lockqueue.Service
	nq  *namedqueue.Service
	// status reports the node among its store's nodes (set by the server).
	status func(ctx context.Context) (broker.Status, error)
}

var _ broker.Broker = (*node)(nil)

func (n *node) OpenSession(ctx context.Context) (string, error) { return n.eng.OpenSession(ctx) }

func (n *node) CloseSession(ctx context.Context, id string) error {
	return n.eng.CloseSession(ctx, id)
}

func (n *node) Exec(ctx context.Context, sessionID, query string, params map[string]herald.Value) (*herald.Response, error) {
	return n.eng.Exec(ctx, sessionID, query, params)
}

func (n *node) Prepare(_ context.Context, query string) (broker.Prepared, error) {
	p, err := n.eng.Prepare(query)
	if err != nil {
		return broker.Prepared{}, err
	}
	return broker.Prepared{Name: p.Name, Query: p.Query, Params: p.Params}, nil
}

func (n *node) ExecPrepared(ctx context.Context, sessionID, name string, params map[string]herald.Value) (*herald.Response, error) {
	p, err := n.eng.Lookup(name)
	if err != nil {
		return nil, err
	}
	return n.eng.ExecPrepared(ctx, sessionID, p, params)
}

func (n *node) Unprepare(_ context.Context, name string) bool { return n.eng.Unprepare(name) }

func (n *node) PublishAsync(ctx context.Context, sessionID string, msgs []herald.Publication) ([]herald.Published, func(context.Context) error, error) {
	return n.eng.PublishAsync(ctx, sessionID, msgs)
}

func (n *node) Position() (seq, tick uint64) { return n.eng.Position() }

func (n *node) Push(ctx context.Context, queueID string, item json.RawMessage, priority int64) (broker.PushResult, error) {
	return n.lq.Push(ctx, queueID, item, priority)
}

func (n *node) Pop(ctx context.Context, queueID string, o broker.PopOptions) (broker.PopResult, error) {
	return n.lq.Pop(ctx, queueID, o)
}

func (n *node) Acknowledge(ctx context.Context, queueID, lockID string) (broker.AckResult, error) {
	return n.lq.Acknowledge(ctx, queueID, lockID)
}

func (n *node) Release(ctx context.Context, queueID, lockID string) (int, error) {
	return n.lq.Release(ctx, queueID, lockID)
}

func (n *node) CreateQueue(ctx context.Context, c broker.QueueConfig) (broker.QueueConfig, error) {
	return n.nq.CreateQueue(ctx, c)
}

func (n *node) DeleteQueue(ctx context.Context, name string) (int, error) {
	return n.nq.DeleteQueue(ctx, name)
}

func (n *node) Enqueue(ctx context.Context, queue string, m broker.QueueMessage) (herald.NodeID, error) {
	return n.nq.Enqueue(ctx, queue, m)
}

func (n *node) ConsumeQueue(ctx context.Context, queue string) (broker.Subscription, error) {
	return n.nq.ConsumeQueue(ctx, queue)
}

func (n *node) AckMessage(ctx context.Context, queue string, id herald.NodeID) error {
	return n.nq.AckMessage(ctx, queue, id)
}

func (n *node) NackMessage(ctx context.Context, queue string, id herald.NodeID, o broker.QueueNack) error {
	return n.nq.NackMessage(ctx, queue, id, o)
}

func (n *node) ExtendMessage(ctx context.Context, queue string, id herald.NodeID, by time.Duration) (time.Time, error) {
	return n.nq.ExtendMessage(ctx, queue, id, by)
}

func (n *node) RedriveDeadLetters(ctx context.Context, queue string) (int, error) {
	return n.nq.RedriveDeadLetters(ctx, queue)
}

func (n *node) Status(ctx context.Context) (broker.Status, error) { return n.status(ctx) }

func (n *node) FrameBudget(done <-chan struct{}) (func(), bool) { return n.wat.FrameBudget(done) }

// Open decides the statement's mode, once, and opens its stream there.
func (n *node) Open(ctx context.Context, req broker.StreamRequest) (broker.Stream, error) {
	mode := modeOf(req.Query)
	if req.Only != 0 && req.Only != mode {
		return nil, herald.Errorf(herald.CodeInvalidQuery, "this stream serves %s mode, and the WATCH asks for %s mode: open it on a %s stream", req.Only, mode, mode)
	}
	if mode == broker.ModeWatch {
		st, err := n.wat.Open(ctx, req.SessionID, req.Query, req.Params, req.After)
		if err != nil {
			return nil, err
		}
		return &watchStream{st.(watchCaps)}, nil
	}
	c, err := n.del.Subscribe(ctx, req.SessionID, req.Query, req.Params, req.Credit, req.MaxCredit)
	if err != nil {
		return nil, err
	}
	return &consumeStream{Stream: c, credit: c.SetCredit}, nil
}

// modeOf is the mode a statement runs in: consume mode for [mode: consume], and for text
// that is no single WATCH (the consume engine's compiler says what is wrong with it).
func modeOf(query string) broker.Mode {
	if parser.ConsumeMode(query) {
		return broker.ModeConsume
	}
	return broker.ModeWatch
}

// Settle converts a batch to the consume engine's settlements and settles it with the
// principal of ctx.
func (n *node) Settle(ctx context.Context, items []broker.Settle) ([]broker.SettleResult, uint64, uint64) {
	res, seq, tick := n.del.SettleMany(ctx, settlements(ctx, items))
	return settleResults(res), seq, tick
}

func (n *node) SettleAsync(ctx context.Context, items []broker.Settle, done func([]broker.SettleResult, uint64, uint64)) {
	n.del.SettleAsync(settlements(ctx, items), func(res []delivery.SettleResult, seq, tick uint64) {
		done(settleResults(res), seq, tick)
	})
}

func settlements(ctx context.Context, items []broker.Settle) []delivery.Settle {
	p := herald.PrincipalFrom(ctx)
	out := make([]delivery.Settle, len(items))
	for i, it := range items {
		out[i] = delivery.Settle{DeliveryID: it.DeliveryID, Action: delivery.Action(it.Action), Delay: it.Delay, By: it.By, Principal: p}
	}
	return out
}

func settleResults(res []delivery.SettleResult) []broker.SettleResult {
	out := make([]broker.SettleResult, len(res))
	for i, r := range res {
		out[i] = broker.SettleResult{Err: r.Err, Deadline: r.Deadline}
	}
	return out
}

// watchCaps is what a watch-mode stream has of its own: batched takes and a callback.
type watchCaps interface {
	herald.Stream
	Take(dst []herald.Event, max int) ([]herald.Event, bool)
	SetNotify(fn func())
}

// watchStream is a watch-mode stream as the seam declares it.
type watchStream struct{ watchCaps }

func (*watchStream) Mode() broker.Mode { return broker.ModeWatch }

func (*watchStream) SetCredit(int) error {
	return herald.Errorf(herald.CodeMalformedRequest, "credit applies to consume-mode streams")
}

// consumeStream is a consume-mode stream as the seam declares it. Its events are leases
// taken as they are read, so it takes without waiting, and a callback (SetNotify) moves
// them through a relay started only when one is asked for.
type consumeStream struct {
	herald.Stream
	credit func(int) error

	mu    sync.Mutex
	relay *relay
}

func (*consumeStream) Mode() broker.Mode { return broker.ModeConsume }

func (c *consumeStream) SetCredit(n int) error { return c.credit(n) }

func (c *consumeStream) Events() <-chan herald.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.relay != nil {
		return c.relay.events
	}
	return c.Stream.Events()
}

func (c *consumeStream) Take(dst []herald.Event, max int) ([]herald.Event, bool) {
	return broker.TakeReady(c.Events(), dst, max)
}

func (c *consumeStream) SetNotify(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.relay == nil {
		c.relay = newRelay(c.Stream, fn)
	}
}

func (c *consumeStream) Close() {
	c.mu.Lock()
	r := c.relay
	c.mu.Unlock()
	if r != nil {
		r.stop()
	}
	c.Stream.Close()
}

// relay moves a stream's events to a channel of its own and calls notify after each,
// and once more when the stream has ended; its goroutine ends with the stream or stop.
type relay struct {
	events   chan herald.Event
	stopped  chan struct{}
	stopOnce sync.Once
}

func newRelay(st herald.Stream, notify func()) *relay {
	r := &relay{events: make(chan herald.Event, 16), stopped: make(chan struct{})}
	go func() {
		defer func() { close(r.events); notify() }()
		for {
			var ev herald.Event
			var ok bool
			select {
			case ev, ok = <-st.Events():
			case <-st.Done():
				select { // what it queued before it ended still goes out
				case ev, ok = <-st.Events():
				default:
					return
				}
			}
			if !ok {
				return
			}
			select {
			case r.events <- ev:
				notify()
			case <-r.stopped:
				return
			}
		}
	}()
	return r
}

func (r *relay) stop() { r.stopOnce.Do(func() { close(r.stopped) }) }
