package brokertest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

func (b *Broker) Push(ctx context.Context, queueID string, item json.RawMessage, priority int64) (broker.PushResult, error) {
	if b.PushFunc == nil {
		return broker.PushResult{}, absent("Push")
	}
	return b.PushFunc(ctx, queueID, item, priority)
}

func (b *Broker) Pop(ctx context.Context, queueID string, o broker.PopOptions) (broker.PopResult, error) {
	if b.PopFunc == nil {
		return broker.PopResult{}, absent("Pop")
	}
	return b.PopFunc(ctx, queueID, o)
}

func (b *Broker) Acknowledge(ctx context.Context, queueID, lockID string) (broker.AckResult, error) {
	if b.AcknowledgeFunc == nil {
		return broker.AckResult{}, absent("Acknowledge")
	}
	return b.AcknowledgeFunc(ctx, queueID, lockID)
}

func (b *Broker) Release(ctx context.Context, queueID, lockID string) (int, error) {
	if b.ReleaseFunc == nil {
		return 0, absent("Release")
	}
	return b.ReleaseFunc(ctx, queueID, lockID)
}

func (b *Broker) CreateQueue(ctx context.Context, c broker.QueueConfig) (broker.QueueConfig, error) {
	if b.CreateQueueFunc == nil {
		return broker.QueueConfig{}, absent("CreateQueue")
	}
	return b.CreateQueueFunc(ctx, c)
}

func (b *Broker) DeleteQueue(ctx context.Context, name string) (int, error) {
	if b.DeleteQueueFunc == nil {
		return 0, absent("DeleteQueue")
	}
	return b.DeleteQueueFunc(ctx, name)
}

func (b *Broker) Enqueue(ctx context.Context, queue string, m broker.QueueMessage) (herald.NodeID, error) {
	if b.EnqueueFunc == nil {
		return "", absent("Enqueue")
	}
	return b.EnqueueFunc(ctx, queue, m)
}

func (b *Broker) ConsumeQueue(ctx context.Context, queue string) (broker.Subscription, error) {
	if b.ConsumeQueueFunc == nil {
		return nil, absent("ConsumeQueue")
	}
	return b.ConsumeQueueFunc(ctx, queue)
}

func (b *Broker) AckMessage(ctx context.Context, queue string, id herald.NodeID) error {
	if b.AckMessageFunc == nil {
		return absent("AckMessage")
	}
	return b.AckMessageFunc(ctx, queue, id)
}

func (b *Broker) NackMessage(ctx context.Context, queue string, id herald.NodeID, o broker.QueueNack) error {
	if b.NackMessageFunc == nil {
		return absent("NackMessage")
	}
	return b.NackMessageFunc(ctx, queue, id, o)
}

func (b *Broker) ExtendMessage(ctx context.Context, queue string, id herald.NodeID, by time.Duration) (time.Time, error) {
	if b.ExtendMessageFunc == nil {
		return time.Time{}, absent("ExtendMessage")
	}
	return b.ExtendMessageFunc(ctx, queue, id, by)
}

func (b *Broker) RedriveDeadLetters(ctx context.Context, queue string) (int, error) {
	if b.RedriveDeadLettersFunc == nil {
		return 0, absent("RedriveDeadLetters")
	}
	return b.RedriveDeadLettersFunc(ctx, queue)
}
