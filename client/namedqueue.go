package client

import (
	"context"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/broker"
)

// The queue RPC (the herald.v1.Queues service, docs/queues.md): named queues declared
// up front with a visibility timeout, an attempt limit, a dead-letter queue and
// weighted fairness keys; messages of bytes and headers with a fairness key, a
// priority and a delay; consumed by lease and settled by message id. The values are
// the server's seam's own.
type (
	// QueueConfig is a named queue's configuration.
	QueueConfig = broker.QueueConfig
	// QueueMessage is a message to enqueue.
	QueueMessage = broker.QueueMessage
	// QueueDelivery is a leased message of a named queue.
	QueueDelivery = broker.Delivered
	// QueueNack modifies a Nack.
	QueueNack = broker.QueueNack
)

// NamedQueue is one queue of the queue RPC. Get one with Client.NamedQueue; it is safe
// for concurrent use. (Client.Queue is the queue REST API's, whose queues are others.)
type NamedQueue struct {
	c    *Client
	name string
}

// NamedQueue returns the queue of the queue RPC named name. Nothing is sent: Create
// declares it.
func (c *Client) NamedQueue(name string) *NamedQueue { return &NamedQueue{c: c, name: name} }

// Name returns the queue's name.
func (q *NamedQueue) Name() string { return q.name }

// call checks the client and the name, and bounds ctx by the request timeout.
func (q *NamedQueue) call(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if q.c.isClosed() {
		return nil, nil, ErrClosed
	}
	if !broker.ValidQueueName(q.name) {
		return nil, nil, invalid("queue name %q: want 1 to %d of A-Z a-z 0-9 - _ . ~ :", q.name, broker.MaxQueueName)
	}
	ctx, cancel := q.c.bound(ctx)
	return ctx, cancel, nil
}

// Create declares the queue with cfg (cfg.Name is ignored: the queue's name is
// used). A taken name answers E2004 (herald.CodeDuplicateID), a dead-letter queue that
// does not exist E2005.
func (q *NamedQueue) Create(ctx context.Context, cfg QueueConfig) (QueueConfig, error) {
	ctx, cancel, err := q.call(ctx)
	if err != nil {
		return QueueConfig{}, err
	}
	defer cancel()
	req := &heraldv1.CreateQueueRequest{Name: q.name, MaxAttempts: int32(cfg.MaxAttempts),
		DeadLetterQueue: cfg.DeadLetterQueue, FairnessWeights: cfg.Weights}
	if cfg.VisibilityTimeout != 0 {
		req.VisibilityTimeout = durationpb.New(cfg.VisibilityTimeout)
	}
	resp, err := unaryCall(ctx, q.c.tr, func(ep *endpoint) (*connect.Response[heraldv1.CreateQueueResponse], error) {
		return ep.queues.CreateQueue(ctx, connect.NewRequest(req))
	})
	if err != nil {
		return QueueConfig{}, fromConnect(err)
	}
	w := resp.Msg.GetQueue()
	return QueueConfig{Name: w.GetName(), VisibilityTimeout: w.GetVisibilityTimeout().AsDuration(),
		MaxAttempts: int(w.GetMaxAttempts()), DeadLetterQueue: w.GetDeadLetterQueue(),
		Weights: w.GetFairnessWeights(), CreatedAt: w.GetCreatedAt().AsTime()}, nil
}

// Delete removes the queue and every message in it, leased or not; it returns how
// many messages went. An unknown queue answers E2005.
func (q *NamedQueue) Delete(ctx context.Context) (int, error) {
	ctx, cancel, err := q.call(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	resp, err := unaryCall(ctx, q.c.tr, func(ep *endpoint) (*connect.Response[heraldv1.DeleteQueueResponse], error) {
		return ep.queues.DeleteQueue(ctx, connect.NewRequest(&heraldv1.DeleteQueueRequest{Name: q.name}))
	})
	if err != nil {
		return 0, fromConnect(err)
	}
	return int(resp.Msg.GetMessagesDeleted()), nil
}

// Enqueue adds m to the queue and returns its message id.
func (q *NamedQueue) Enqueue(ctx context.Context, m QueueMessage) (string, error) {
	ctx, cancel, err := q.call(ctx)
	if err != nil {
		return "", err
	}
	defer cancel()
	req := &heraldv1.EnqueueRequest{Queue: q.name, Payload: m.Payload, Headers: m.Headers,
		FairnessKey: m.FairnessKey, Priority: m.Priority}
	if m.Delay != 0 {
		req.Delay = durationpb.New(m.Delay)
	}
	resp, err := unaryCall(ctx, q.c.tr, func(ep *endpoint) (*connect.Response[heraldv1.EnqueueResponse], error) {
		return ep.queues.Enqueue(ctx, connect.NewRequest(req))
	})
	if err != nil {
		return "", fromConnect(err)
	}
	return resp.Msg.GetMessageId(), nil
}

// Ack settles a leased message: it is deleted. An id that is unknown, not leased or
// already settled answers E8004 (herald.CodeInvalidDeliveryID) and changes nothing.
func (q *NamedQueue) Ack(ctx context.Context, messageID string) error {
	ctx, cancel, err := q.call(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	_, err = unaryCall(ctx, q.c.tr, func(ep *endpoint) (*connect.Response[heraldv1.QueueAckResponse], error) {
		return ep.queues.Ack(ctx, connect.NewRequest(&heraldv1.QueueAckRequest{Queue: q.name, MessageId: messageID}))
	})
	return fromConnect(err)
}

// Nack returns a leased message to the queue for another attempt (after o.Delay), or
// dead-letters it (o.DeadLetter, or when it has used the queue's attempts).
func (q *NamedQueue) Nack(ctx context.Context, messageID string, o QueueNack) error {
	ctx, cancel, err := q.call(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	req := &heraldv1.QueueNackRequest{Queue: q.name, MessageId: messageID, DeadLetter: o.DeadLetter}
	if o.Delay != 0 {
		req.Delay = durationpb.New(o.Delay)
	}
	_, err = unaryCall(ctx, q.c.tr, func(ep *endpoint) (*connect.Response[heraldv1.QueueNackResponse], error) {
		return ep.queues.Nack(ctx, connect.NewRequest(req))
	})
	return fromConnect(err)
}

// Extend pushes a leased message's deadline to by from now (0: the queue's visibility
// timeout) and returns the new deadline.
func (q *NamedQueue) Extend(ctx context.Context, messageID string, by time.Duration) (time.Time, error) {
	ctx, cancel, err := q.call(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer cancel()
	req := &heraldv1.QueueExtendRequest{Queue: q.name, MessageId: messageID}
	if by != 0 {
		req.By = durationpb.New(by)
	}
	resp, err := unaryCall(ctx, q.c.tr, func(ep *endpoint) (*connect.Response[heraldv1.QueueExtendResponse], error) {
		return ep.queues.Extend(ctx, connect.NewRequest(req))
	})
	if err != nil {
		return time.Time{}, fromConnect(err)
	}
	return resp.Msg.GetDeadline().AsTime(), nil
}

// RedriveDeadLetters puts the queue's dead-lettered messages back in it; it returns
// how many.
func (q *NamedQueue) RedriveDeadLetters(ctx context.Context) (int, error) {
	ctx, cancel, err := q.call(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	resp, err := unaryCall(ctx, q.c.tr, func(ep *endpoint) (*connect.Response[heraldv1.RedriveDeadLettersResponse], error) {
		return ep.queues.RedriveDeadLetters(ctx, connect.NewRequest(&heraldv1.RedriveDeadLettersRequest{Queue: q.name}))
	})
	if err != nil {
		return 0, fromConnect(err)
	}
	return int(resp.Msg.GetRedriven()), nil
}

// QueueConsumer is one consumer of a named queue: a stream of leased messages, which
// it settles by id (NamedQueue.Ack, Nack, Extend). Close it when done; its unsettled
// messages go back to the queue at once.
type QueueConsumer struct {
	call   *connect.ServerStreamForClient[heraldv1.QueueMessage]
	cancel context.CancelFunc
	msgs   chan QueueDelivery
	stop   chan struct{} // closed by Close
	done   chan struct{} // closed when the reader has returned
	once   sync.Once
	err    error // why the stream ended, once done is closed
}

// Consume opens a consumer of the queue. ctx bounds the stream's life; Close ends it
// sooner, and frees it either way.
func (q *NamedQueue) Consume(ctx context.Context) (*QueueConsumer, error) {
	if q.c.isClosed() {
		return nil, ErrClosed
	}
	if !broker.ValidQueueName(q.name) {
		return nil, invalid("queue name %q: want 1 to %d of A-Z a-z 0-9 - _ . ~ :", q.name, broker.MaxQueueName)
	}
	ctx, cancel := context.WithCancel(ctx)
	call, err := q.c.tr.ep().queues.ConsumeQueue(ctx, connect.NewRequest(&heraldv1.ConsumeQueueRequest{Queue: q.name}))
	if err != nil {
		cancel()
		return nil, fromConnect(err)
	}
	qc := &QueueConsumer{call: call, cancel: cancel, msgs: make(chan QueueDelivery), stop: make(chan struct{}), done: make(chan struct{})}
	go qc.read(ctx)
	return qc, nil
}

// read hands the stream's messages to Next until the stream ends.
func (qc *QueueConsumer) read(ctx context.Context) {
	defer close(qc.done)
	defer func() {
		qc.err = fromConnect(qc.call.Err())
		if qc.err == nil {
			qc.err = io.EOF
		}
	}()
	for qc.call.Receive() {
		w := qc.call.Msg()
		d := QueueDelivery{ID: herald.NodeID(w.GetMessageId()), Queue: w.GetQueue(), Payload: w.GetPayload(),
			Headers: w.GetHeaders(), FairnessKey: w.GetFairnessKey(), Priority: w.GetPriority(), Weight: w.GetWeight(),
			Attempt: int(w.GetAttemptCount()), Releases: int(w.GetReleaseCount()),
			Deadline: w.GetDeadline().AsTime(), EnqueuedAt: w.GetEnqueuedAt().AsTime()}
		select {
		case qc.msgs <- d:
		case <-qc.stop:
			return
		case <-ctx.Done(): // the stream's context: the message goes back to the queue
			return
		}
	}
}

// Next waits for the next leased message. It returns io.EOF once the server ended the
// stream, the stream's error if it broke, and ctx's error if ctx ends first.
func (qc *QueueConsumer) Next(ctx context.Context) (QueueDelivery, error) {
	select {
	case d := <-qc.msgs:
		return d, nil
	case <-qc.done:
		return QueueDelivery{}, qc.err
	case <-ctx.Done():
		return QueueDelivery{}, ctx.Err()
	}
}

// Close ends the stream and waits for its reader; the server returns the unsettled
// messages to the queue. It is idempotent.
func (qc *QueueConsumer) Close() error {
	qc.once.Do(func() {
		close(qc.stop)
		qc.cancel()
		<-qc.done
		_ = qc.call.Close()
	})
	<-qc.done
	return nil
}
