package server

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// switchBroker is the seam the surfaces of a node on a shared store hold: it passes
// every call to the broker of the node's current role, which changes when the node
// takes over or steps down. A call in flight keeps the broker it started with.
type switchBroker struct {
	cur atomic.Pointer[brokerBox]
}

type brokerBox struct{ broker.Broker }

var _ broker.Broker = (*switchBroker)(nil)

func (s *switchBroker) set(b broker.Broker) { s.cur.Store(&brokerBox{b}) }

func (s *switchBroker) get() broker.Broker { return s.cur.Load().Broker }

func (s *switchBroker) OpenSession(ctx context.Context) (string, error) {
	return s.get().OpenSession(ctx)
}

func (s *switchBroker) CloseSession(ctx context.Context, id string) error {
	return s.get().CloseSession(ctx, id)
}

func (s *switchBroker) Exec(ctx context.Context, sessionID, query string, params map[string]herald.Value) (*herald.Response, error) {
	return s.get().Exec(ctx, sessionID, query, params)
}

func (s *switchBroker) Prepare(ctx context.Context, query string) (broker.Prepared, error) {
	return s.get().Prepare(ctx, query)
}

func (s *switchBroker) ExecPrepared(ctx context.Context, sessionID, name string, params map[string]herald.Value) (*herald.Response, error) {
	return s.get().ExecPrepared(ctx, sessionID, name, params)
}

func (s *switchBroker) Unprepare(ctx context.Context, name string) bool {
	return s.get().Unprepare(ctx, name)
}

func (s *switchBroker) PublishAsync(ctx context.Context, sessionID string, msgs []herald.Publication) ([]herald.Published, func(context.Context) error, error) {
	return s.get().PublishAsync(ctx, sessionID, msgs)
}

func (s *switchBroker) Position() (uint64, uint64) { return s.get().Position() }

func (s *switchBroker) Open(ctx context.Context, req broker.StreamRequest) (broker.Stream, error) {
	return s.get().Open(ctx, req)
}

func (s *switchBroker) FrameBudget(done <-chan struct{}) (func(), bool) {
	return s.get().FrameBudget(done)
}

func (s *switchBroker) Settle(ctx context.Context, items []broker.Settle) ([]broker.SettleResult, uint64, uint64) {
	return s.get().Settle(ctx, items)
}

func (s *switchBroker) SettleAsync(ctx context.Context, items []broker.Settle, done func([]broker.SettleResult, uint64, uint64)) {
	s.get().SettleAsync(ctx, items, done)
}

func (s *switchBroker) Push(ctx context.Context, queueID string, item json.RawMessage, priority int64) (broker.PushResult, error) {
	return s.get().Push(ctx, queueID, item, priority)
}

func (s *switchBroker) Pop(ctx context.Context, queueID string, o broker.PopOptions) (broker.PopResult, error) {
	return s.get().Pop(ctx, queueID, o)
}

func (s *switchBroker) Acknowledge(ctx context.Context, queueID, lockID string) (broker.AckResult, error) {
	return s.get().Acknowledge(ctx, queueID, lockID)
}

func (s *switchBroker) Release(ctx context.Context, queueID, lockID string) (int, error) {
	return s.get().Release(ctx, queueID, lockID)
}

func (s *switchBroker) CreateQueue(ctx context.Context, c broker.QueueConfig) (broker.QueueConfig, error) {
	return s.get().CreateQueue(ctx, c)
}

func (s *switchBroker) DeleteQueue(ctx context.Context, name string) (int, error) {
	return s.get().DeleteQueue(ctx, name)
}

func (s *switchBroker) Enqueue(ctx context.Context, queue string, m broker.QueueMessage) (herald.NodeID, error) {
	return s.get().Enqueue(ctx, queue, m)
}

func (s *switchBroker) ConsumeQueue(ctx context.Context, queue string) (broker.Subscription, error) {
	return s.get().ConsumeQueue(ctx, queue)
}

func (s *switchBroker) AckMessage(ctx context.Context, queue string, id herald.NodeID) error {
	return s.get().AckMessage(ctx, queue, id)
}

func (s *switchBroker) NackMessage(ctx context.Context, queue string, id herald.NodeID, o broker.QueueNack) error {
	return s.get().NackMessage(ctx, queue, id, o)
}

func (s *switchBroker) ExtendMessage(ctx context.Context, queue string, id herald.NodeID, by time.Duration) (time.Time, error) {
	return s.get().ExtendMessage(ctx, queue, id, by)
}

func (s *switchBroker) RedriveDeadLetters(ctx context.Context, queue string) (int, error) {
	return s.get().RedriveDeadLetters(ctx, queue)
}

func (s *switchBroker) Status(ctx context.Context) (broker.Status, error) {
	return s.get().Status(ctx)
}
