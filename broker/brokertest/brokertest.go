// Package brokertest has fakes of the seam for the surfaces' tests: a broker.Broker
// whose methods call the funcs a test sets, and a broker.Stream the test feeds. One
// fake serves the JSON API's and the RPC API's tests alike.
package brokertest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// Broker is a fake broker.Broker. Each method calls the func field of its name when it
// is set; unset, it answers E4006 NOT_IMPLEMENTED (Position answers 0, 0; FrameBudget
// lets every frame through; SettleAsync calls SettleFunc and then done).
type Broker struct {
	OpenSessionFunc  func(ctx context.Context) (string, error)
	CloseSessionFunc func(ctx context.Context, id string) error
	ExecFunc         func(ctx context.Context, sessionID, query string, params map[string]herald.Value) (*herald.Response, error)
	PrepareFunc      func(ctx context.Context, query string) (broker.Prepared, error)
	ExecPreparedFunc func(ctx context.Context, sessionID, name string, params map[string]herald.Value) (*herald.Response, error)
	UnprepareFunc    func(ctx context.Context, name string) bool
	PublishAsyncFunc func(ctx context.Context, sessionID string, msgs []herald.Publication) ([]herald.Published, func(context.Context) error, error)
	PositionFunc     func() (seq, tick uint64)

	OpenFunc        func(ctx context.Context, req broker.StreamRequest) (broker.Stream, error)
	FrameBudgetFunc func(done <-chan struct{}) (func(), bool)

	SettleFunc      func(ctx context.Context, items []broker.Settle) ([]broker.SettleResult, uint64, uint64)
	SettleAsyncFunc func(ctx context.Context, items []broker.Settle, done func([]broker.SettleResult, uint64, uint64))

	PushFunc        func(ctx context.Context, queueID string, item json.RawMessage, priority int64) (broker.PushResult, error)
	PopFunc         func(ctx context.Context, queueID string, o broker.PopOptions) (broker.PopResult, error)
	AcknowledgeFunc func(ctx context.Context, queueID, lockID string) (broker.AckResult, error)
	ReleaseFunc     func(ctx context.Context, queueID, lockID string) (int, error)

	CreateQueueFunc        func(ctx context.Context, c broker.QueueConfig) (broker.QueueConfig, error)
	DeleteQueueFunc        func(ctx context.Context, name string) (int, error)
	EnqueueFunc            func(ctx context.Context, queue string, m broker.QueueMessage) (herald.NodeID, error)
	ConsumeQueueFunc       func(ctx context.Context, queue string) (broker.Subscription, error)
	AckMessageFunc         func(ctx context.Context, queue string, id herald.NodeID) error
	NackMessageFunc        func(ctx context.Context, queue string, id herald.NodeID, o broker.QueueNack) error
	ExtendMessageFunc      func(ctx context.Context, queue string, id herald.NodeID, by time.Duration) (time.Time, error)
	RedriveDeadLettersFunc func(ctx context.Context, queue string) (int, error)

	StatusFunc func(ctx context.Context) (broker.Status, error)
}

var _ broker.Broker = (*Broker)(nil)

func absent(what string) error {
	return herald.Errorf(herald.CodeNotImplemented, "the fake broker has no %s", what)
}

func (b *Broker) OpenSession(ctx context.Context) (string, error) {
	if b.OpenSessionFunc == nil {
		return "", absent("OpenSession")
	}
	return b.OpenSessionFunc(ctx)
}

func (b *Broker) CloseSession(ctx context.Context, id string) error {
	if b.CloseSessionFunc == nil {
		return absent("CloseSession")
	}
	return b.CloseSessionFunc(ctx, id)
}

func (b *Broker) Exec(ctx context.Context, sessionID, query string, params map[string]herald.Value) (*herald.Response, error) {
	if b.ExecFunc == nil {
		return nil, absent("Exec")
	}
	return b.ExecFunc(ctx, sessionID, query, params)
}

func (b *Broker) Prepare(ctx context.Context, query string) (broker.Prepared, error) {
	if b.PrepareFunc == nil {
		return broker.Prepared{}, absent("Prepare")
	}
	return b.PrepareFunc(ctx, query)
}

func (b *Broker) ExecPrepared(ctx context.Context, sessionID, name string, params map[string]herald.Value) (*herald.Response, error) {
	if b.ExecPreparedFunc == nil {
		return nil, absent("ExecPrepared")
	}
	return b.ExecPreparedFunc(ctx, sessionID, name, params)
}

func (b *Broker) Unprepare(ctx context.Context, name string) bool {
	return b.UnprepareFunc != nil && b.UnprepareFunc(ctx, name)
}

func (b *Broker) PublishAsync(ctx context.Context, sessionID string, msgs []herald.Publication) ([]herald.Published, func(context.Context) error, error) {
	if b.PublishAsyncFunc == nil {
		return nil, nil, absent("PublishAsync")
	}
	return b.PublishAsyncFunc(ctx, sessionID, msgs)
}

func (b *Broker) Position() (uint64, uint64) {
	if b.PositionFunc == nil {
		return 0, 0
	}
	return b.PositionFunc()
}

func (b *Broker) Open(ctx context.Context, req broker.StreamRequest) (broker.Stream, error) {
	if b.OpenFunc == nil {
		return nil, absent("Open")
	}
	return b.OpenFunc(ctx, req)
}

func (b *Broker) FrameBudget(done <-chan struct{}) (func(), bool) {
	if b.FrameBudgetFunc == nil {
		return func() {}, true
	}
	return b.FrameBudgetFunc(done)
}

func (b *Broker) Settle(ctx context.Context, items []broker.Settle) ([]broker.SettleResult, uint64, uint64) {
	if b.SettleFunc == nil {
		out := make([]broker.SettleResult, len(items))
		for i := range out {
			out[i].Err = absent("Settle")
		}
		return out, 0, 0
	}
	return b.SettleFunc(ctx, items)
}

func (b *Broker) SettleAsync(ctx context.Context, items []broker.Settle, done func([]broker.SettleResult, uint64, uint64)) {
	if b.SettleAsyncFunc != nil {
		b.SettleAsyncFunc(ctx, items, done)
		return
	}
	done(b.Settle(ctx, items))
}

func (b *Broker) Status(ctx context.Context) (broker.Status, error) {
	if b.StatusFunc == nil {
		return broker.Status{}, absent("Status")
	}
	return b.StatusFunc(ctx)
}
