package rpcapi

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
	"github.com/herald-mq/herald/broker"
)

// queueService implements heraldv1connect.QueuesHandler: each RPC translates onto the
// seam's named queues (broker.NamedQueues). Errors map through the same table as the
// Herald service's.
type queueService struct{ s *Service }

var _ heraldv1connect.QueuesHandler = queueService{}

// QueuesHandler returns the path prefix and HTTP handler of the herald.v1.Queues service,
// to mount next to Handler's.
func (s *Service) QueuesHandler(opts ...connect.HandlerOption) (string, http.Handler) {
	opts = append([]connect.HandlerOption{connect.WithInterceptors(observer{s}, grants{}), withBoundedGzip(s.maxBody)}, opts...)
	if s.maxBody > 0 && s.maxBody <= math.MaxInt32 {
		opts = append([]connect.HandlerOption{connect.WithReadMaxBytes(int(s.maxBody))}, opts...)
	}
	return heraldv1connect.NewQueuesHandler(queueService{s}, opts...)
}

// optDuration converts an optional protobuf duration (unset: 0).
func optDuration(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	return duration(field, d)
}

func toProtoQueue(c broker.QueueConfig) *heraldv1.Queue {
	out := &heraldv1.Queue{
		Name:              c.Name,
		VisibilityTimeout: durationpb.New(c.VisibilityTimeout),
		MaxAttempts:       int32(min(c.MaxAttempts, math.MaxInt32)),
		DeadLetterQueue:   c.DeadLetterQueue,
		FairnessWeights:   c.Weights,
	}
	if !c.CreatedAt.IsZero() {
		out.CreatedAt = timestamppb.New(c.CreatedAt)
	}
	return out
}

// CreateQueue declares a queue.
func (q queueService) CreateQueue(ctx context.Context, req *connect.Request[heraldv1.CreateQueueRequest]) (*connect.Response[heraldv1.CreateQueueResponse], error) {
	m := req.Msg
	vt, err := optDuration("visibility_timeout", m.GetVisibilityTimeout())
	if err != nil {
		return nil, toConnect(err)
	}
	if m.GetMaxAttempts() < 0 {
		return nil, toConnect(herald.Errorf(herald.CodeMalformedRequest, "max_attempts must not be negative"))
	}
	c, err := q.s.b.CreateQueue(ctx, broker.QueueConfig{
		Name:              m.GetName(),
		VisibilityTimeout: vt,
		MaxAttempts:       int(m.GetMaxAttempts()),
		DeadLetterQueue:   m.GetDeadLetterQueue(),
		Weights:           m.GetFairnessWeights(),
	})
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.CreateQueueResponse{Queue: toProtoQueue(c)}), nil
}

// DeleteQueue removes a queue with its messages.
func (q queueService) DeleteQueue(ctx context.Context, req *connect.Request[heraldv1.DeleteQueueRequest]) (*connect.Response[heraldv1.DeleteQueueResponse], error) {
	n, err := q.s.b.DeleteQueue(ctx, req.Msg.GetName())
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.DeleteQueueResponse{MessagesDeleted: int64(n)}), nil
}

// Enqueue adds a message.
func (q queueService) Enqueue(ctx context.Context, req *connect.Request[heraldv1.EnqueueRequest]) (*connect.Response[heraldv1.EnqueueResponse], error) {
	m := req.Msg
	delay, err := optDuration("delay", m.GetDelay())
	if err != nil {
		return nil, toConnect(err)
	}
	id, err := q.s.b.Enqueue(ctx, m.GetQueue(), broker.QueueMessage{
		Payload:     m.GetPayload(),
		Headers:     m.GetHeaders(),
		FairnessKey: m.GetFairnessKey(),
		Priority:    m.GetPriority(),
		Delay:       delay,
	})
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.EnqueueResponse{MessageId: string(id)}), nil
}

func toProtoMessage(d broker.Delivered) *heraldv1.QueueMessage {
	out := &heraldv1.QueueMessage{
		MessageId:    string(d.ID),
		Queue:        d.Queue,
		Payload:      d.Payload,
		Headers:      d.Headers,
		FairnessKey:  d.FairnessKey,
		Priority:     d.Priority,
		AttemptCount: int64(d.Attempt),
		ReleaseCount: int64(d.Releases),
		Weight:       d.Weight,
	}
	if !d.Deadline.IsZero() {
		out.Deadline = timestamppb.New(d.Deadline)
	}
	if !d.EnqueuedAt.IsZero() {
		out.EnqueuedAt = timestamppb.New(d.EnqueuedAt)
	}
	return out
}

// ConsumeQueue streams a queue's leased messages until the caller ends the call or the
// server shuts down; ending it returns the unsettled messages to the queue at once.
func (q queueService) ConsumeQueue(ctx context.Context, req *connect.Request[heraldv1.ConsumeQueueRequest], out *connect.ServerStream[heraldv1.QueueMessage]) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopAfter := context.AfterFunc(q.s.streams, cancel)
	defer stopAfter()

	sub, err := q.s.b.ConsumeQueue(ctx, req.Msg.GetQueue())
	if err != nil {
		return toConnect(err)
	}
	defer sub.Close()
	// Send the headers now, so the caller knows the consumer is registered.
	if err := out.Send(nil); err != nil {
		return err
	}
	for {
		d, err := sub.Next(ctx)
		switch {
		case err == nil:
			if err := out.Send(toProtoMessage(d)); err != nil {
				return err
			}
		case errors.Is(err, io.EOF):
			if q.s.streams.Err() != nil {
				return toConnect(herald.Errorf(herald.CodeShuttingDown, "the server is stopping"))
			}
			return nil
		case ctx.Err() != nil:
			if q.s.streams.Err() != nil {
				return toConnect(herald.Errorf(herald.CodeShuttingDown, "the server is stopping"))
			}
			return ctx.Err()
		default:
			return toConnect(err)
		}
	}
}

// Ack settles a leased message as done.
func (q queueService) Ack(ctx context.Context, req *connect.Request[heraldv1.QueueAckRequest]) (*connect.Response[heraldv1.QueueAckResponse], error) {
	if err := q.s.b.AckMessage(ctx, req.Msg.GetQueue(), herald.NodeID(req.Msg.GetMessageId())); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.QueueAckResponse{}), nil
}

// Nack returns a leased message to its queue, or dead-letters it.
func (q queueService) Nack(ctx context.Context, req *connect.Request[heraldv1.QueueNackRequest]) (*connect.Response[heraldv1.QueueNackResponse], error) {
	delay, err := optDuration("delay", req.Msg.GetDelay())
	if err != nil {
		return nil, toConnect(err)
	}
	o := broker.QueueNack{Delay: delay, DeadLetter: req.Msg.GetDeadLetter()}
	if err := q.s.b.NackMessage(ctx, req.Msg.GetQueue(), herald.NodeID(req.Msg.GetMessageId()), o); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.QueueNackResponse{}), nil
}

// Extend pushes a leased message's deadline out.
func (q queueService) Extend(ctx context.Context, req *connect.Request[heraldv1.QueueExtendRequest]) (*connect.Response[heraldv1.QueueExtendResponse], error) {
	by, err := optDuration("by", req.Msg.GetBy())
	if err != nil {
		return nil, toConnect(err)
	}
	deadline, err := q.s.b.ExtendMessage(ctx, req.Msg.GetQueue(), herald.NodeID(req.Msg.GetMessageId()), by)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.QueueExtendResponse{Deadline: timestamppb.New(deadline)}), nil
}

// RedriveDeadLetters puts a queue's dead letters back into it.
func (q queueService) RedriveDeadLetters(ctx context.Context, req *connect.Request[heraldv1.RedriveDeadLettersRequest]) (*connect.Response[heraldv1.RedriveDeadLettersResponse], error) {
	n, err := q.s.b.RedriveDeadLetters(ctx, req.Msg.GetQueue())
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.RedriveDeadLettersResponse{Redriven: int64(n)}), nil
}
