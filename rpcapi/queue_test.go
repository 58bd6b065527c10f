package rpcapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
	"github.com/herald-mq/herald/broker/brokertest"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/namedqueue"
	"github.com/herald-mq/herald/store/memstore"
)

// queueEpoch is where the manual clock of serveQueues starts.
var queueEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// serveQueues starts both services on a real engine (memstore) with the consume engine
// and the queue service behind them, all on a manual clock that starts at queueEpoch;
// grpc selects the gRPC protocol over HTTP/2.
func serveQueues(t *testing.T, grpc bool) (heraldv1connect.QueuesClient, *Service, *clock.Manual) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	clk := clock.NewManual(queueEpoch)
	eng, err := engine.Open(context.Background(), engine.Config{Backend: memstore.New(), Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	del := delivery.New(delivery.Config{Engine: eng, Logger: quiet})
	if err := del.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	nq := namedqueue.New(eng, del)
	b := &brokertest.Broker{
		CreateQueueFunc: nq.CreateQueue, DeleteQueueFunc: nq.DeleteQueue, EnqueueFunc: nq.Enqueue,
		ConsumeQueueFunc: nq.ConsumeQueue, AckMessageFunc: nq.AckMessage, NackMessageFunc: nq.NackMessage,
		ExtendMessageFunc: nq.ExtendMessage, RedriveDeadLettersFunc: nq.RedriveDeadLetters,
	}
	svc := New(b, Options{Logger: quiet})
	mux := http.NewServeMux()
	mux.Handle(svc.Handler())
	mux.Handle(svc.QueuesHandler())
	srv := httptest.NewUnstartedServer(mux)
	var opts []connect.ClientOption
	if grpc {
		srv.EnableHTTP2 = true
		srv.StartTLS()
		opts = append(opts, connect.WithGRPC())
	} else {
		srv.Start()
	}
	t.Cleanup(func() {
		svc.CloseStreams()
		srv.Close()
		_ = del.Stop(context.Background())
		_ = eng.Close(context.Background())
	})
	return heraldv1connect.NewQueuesClient(srv.Client(), srv.URL, opts...), svc, clk
}

func wantRPCError(t *testing.T, err error, code connect.Code, hcode herald.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v (%s)", code, hcode)
	}
	if connect.CodeOf(err) != code {
		t.Fatalf("err = %v, want %v", err, code)
	}
	if he := heraldError(t, err); he.Code != hcode {
		t.Fatalf("herald code %s, want %s", he.Code, hcode)
	}
}

func receive(t *testing.T, st *connect.ServerStreamForClient[heraldv1.QueueMessage]) *heraldv1.QueueMessage {
	t.Helper()
	if !st.Receive() {
		t.Fatalf("stream ended: %v", st.Err())
	}
	return st.Msg()
}

func TestQueueRPCLifecycle(t *testing.T) {
	for _, grpc := range []bool{false, true} {
		name := "connect"
		if grpc {
			name = "grpc"
		}
		t.Run(name, func(t *testing.T) { queueLifecycle(t, grpc) })
	}
}

func queueLifecycle(t *testing.T, grpc bool) {
	c, _, clk := serveQueues(t, grpc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	cr, err := c.CreateQueue(ctx, connect.NewRequest(&heraldv1.CreateQueueRequest{
		Name: "jobs", VisibilityTimeout: durationpb.New(time.Minute), MaxAttempts: 5,
		FairnessWeights: map[string]int64{"gold": 3},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if q := cr.Msg.GetQueue(); q.GetName() != "jobs" || q.GetVisibilityTimeout().AsDuration() != time.Minute || q.GetMaxAttempts() != 5 || q.GetFairnessWeights()["gold"] != 3 || q.GetCreatedAt() == nil {
		t.Fatalf("created %v", q)
	}
	_, err = c.CreateQueue(ctx, connect.NewRequest(&heraldv1.CreateQueueRequest{Name: "jobs"}))
	wantRPCError(t, err, connect.CodeAlreadyExists, herald.CodeDuplicateID)

	er, err := c.Enqueue(ctx, connect.NewRequest(&heraldv1.EnqueueRequest{
		Queue: "jobs", Payload: []byte{0, 1, 2, 255}, Headers: map[string]string{"trace": "t1"},
		FairnessKey: "gold", Priority: 1,
	}))
	if err != nil {
		t.Fatal(err)
	}
	id := er.Msg.GetMessageId()

	st, err := c.ConsumeQueue(ctx, connect.NewRequest(&heraldv1.ConsumeQueueRequest{Queue: "jobs"}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := receive(t, st)
	if m.GetMessageId() != id || m.GetQueue() != "jobs" || string(m.GetPayload()) != "\x00\x01\x02\xff" || m.GetHeaders()["trace"] != "t1" ||
		m.GetFairnessKey() != "gold" || m.GetPriority() != 1 || m.GetAttemptCount() != 1 || m.GetWeight() != 3 ||
		m.GetDeadline() == nil || m.GetEnqueuedAt() == nil {
		t.Fatalf("delivered %v", m)
	}
	if at := m.GetEnqueuedAt().AsTime(); !at.Equal(queueEpoch) {
		t.Fatalf("enqueued at %v, want %v", at, queueEpoch)
	}
	if dl := m.GetDeadline().AsTime(); !dl.Equal(queueEpoch.Add(time.Minute)) {
		t.Fatalf("deadline %v, want the visibility timeout after %v", dl, queueEpoch)
	}

	clk.Advance(10 * time.Second)
	ext, err := c.Extend(ctx, connect.NewRequest(&heraldv1.QueueExtendRequest{Queue: "jobs", MessageId: id, By: durationpb.New(2 * time.Minute)}))
	if err != nil {
		t.Fatalf("extend: %v", err)
	}
	if dl, want := ext.Msg.GetDeadline().AsTime(), clk.Now().Add(2*time.Minute); !dl.Equal(want) {
		t.Fatalf("extended deadline %v, want %v", dl, want)
	}

	// Nack: the message comes back on the stream with its attempt count up.
	if _, err := c.Nack(ctx, connect.NewRequest(&heraldv1.QueueNackRequest{Queue: "jobs", MessageId: id})); err != nil {
		t.Fatal(err)
	}
	m = receive(t, st)
	if m.GetMessageId() != id || m.GetAttemptCount() != 2 {
		t.Fatalf("after nack: %v", m)
	}
	if _, err := c.Ack(ctx, connect.NewRequest(&heraldv1.QueueAckRequest{Queue: "jobs", MessageId: id})); err != nil {
		t.Fatal(err)
	}
	// Idempotent: the repeated ack is not_found, as are unknown ids and queues.
	_, err = c.Ack(ctx, connect.NewRequest(&heraldv1.QueueAckRequest{Queue: "jobs", MessageId: id}))
	wantRPCError(t, err, connect.CodeNotFound, herald.CodeInvalidDeliveryID)
	_, err = c.Nack(ctx, connect.NewRequest(&heraldv1.QueueNackRequest{Queue: "jobs", MessageId: "unknown"}))
	wantRPCError(t, err, connect.CodeNotFound, herald.CodeInvalidDeliveryID)
	_, err = c.Extend(ctx, connect.NewRequest(&heraldv1.QueueExtendRequest{Queue: "jobs", MessageId: id}))
	wantRPCError(t, err, connect.CodeNotFound, herald.CodeInvalidDeliveryID)
	_, err = c.Enqueue(ctx, connect.NewRequest(&heraldv1.EnqueueRequest{Queue: "nope"}))
	wantRPCError(t, err, connect.CodeNotFound, herald.CodeNodeNotFound)
	_, err = c.Enqueue(ctx, connect.NewRequest(&heraldv1.EnqueueRequest{Queue: "jobs", Priority: -1}))
	wantRPCError(t, err, connect.CodeInvalidArgument, herald.CodeMalformedRequest)
	_, err = c.CreateQueue(ctx, connect.NewRequest(&heraldv1.CreateQueueRequest{Name: "x", VisibilityTimeout: durationpb.New(-time.Second)}))
	wantRPCError(t, err, connect.CodeInvalidArgument, herald.CodeMalformedRequest)

	// Dead-letter at once, then redrive: the message is back on the stream at attempt 1.
	er, err = c.Enqueue(ctx, connect.NewRequest(&heraldv1.EnqueueRequest{Queue: "jobs", Payload: []byte("poison")}))
	if err != nil {
		t.Fatal(err)
	}
	if m = receive(t, st); m.GetMessageId() != er.Msg.GetMessageId() {
		t.Fatalf("got %v", m)
	}
	if _, err := c.Nack(ctx, connect.NewRequest(&heraldv1.QueueNackRequest{Queue: "jobs", MessageId: m.GetMessageId(), DeadLetter: true})); err != nil {
		t.Fatal(err)
	}
	rr, err := c.RedriveDeadLetters(ctx, connect.NewRequest(&heraldv1.RedriveDeadLettersRequest{Queue: "jobs"}))
	if err != nil || rr.Msg.GetRedriven() != 1 {
		t.Fatalf("redrive: %v %v", rr, err)
	}
	if m = receive(t, st); m.GetMessageId() != er.Msg.GetMessageId() || m.GetAttemptCount() != 1 || string(m.GetPayload()) != "poison" {
		t.Fatalf("redriven: %v", m)
	}

	// Delayed delivery: nothing is leased until the clock has passed the delay, so the
	// lease's deadline counts from then.
	er, err = c.Enqueue(ctx, connect.NewRequest(&heraldv1.EnqueueRequest{Queue: "jobs", Payload: []byte("later"), Delay: durationpb.New(30 * time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	enqueued := clk.Now()
	clk.Advance(30 * time.Second)
	m = receive(t, st)
	if m.GetMessageId() != er.Msg.GetMessageId() || !m.GetEnqueuedAt().AsTime().Equal(enqueued) {
		t.Fatalf("delayed: %v", m)
	}
	if dl, want := m.GetDeadline().AsTime(), enqueued.Add(30*time.Second+time.Minute); !dl.Equal(want) {
		t.Fatalf("delayed message leased with deadline %v, want %v (leased when the delay ended)", dl, want)
	}

	dr, err := c.DeleteQueue(ctx, connect.NewRequest(&heraldv1.DeleteQueueRequest{Name: "jobs"}))
	if err != nil || dr.Msg.GetMessagesDeleted() != 2 {
		t.Fatalf("delete: %v %v; want the 2 leased messages deleted", dr, err)
	}
	_, err = c.DeleteQueue(ctx, connect.NewRequest(&heraldv1.DeleteQueueRequest{Name: "jobs"}))
	wantRPCError(t, err, connect.CodeNotFound, herald.CodeNodeNotFound)
	st2, err := c.ConsumeQueue(ctx, connect.NewRequest(&heraldv1.ConsumeQueueRequest{Queue: "jobs"}))
	if err == nil {
		if st2.Receive() {
			t.Fatal("a deleted queue streamed a message")
		}
		err = st2.Err()
	}
	wantRPCError(t, err, connect.CodeNotFound, herald.CodeNodeNotFound)
}

// Ending the call returns the unsettled messages at once; CloseStreams ends streams.
func TestQueueRPCStreamEnd(t *testing.T) {
	c, svc, _ := serveQueues(t, false)
	ctx := context.Background()
	if _, err := c.CreateQueue(ctx, connect.NewRequest(&heraldv1.CreateQueueRequest{Name: "q"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, connect.NewRequest(&heraldv1.EnqueueRequest{Queue: "q", Payload: []byte("a")})); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	first, err := c.ConsumeQueue(cctx, connect.NewRequest(&heraldv1.ConsumeQueueRequest{Queue: "q"}))
	if err != nil {
		t.Fatal(err)
	}
	if m := receive(t, first); m.GetAttemptCount() != 1 {
		t.Fatalf("%v", m)
	}
	first.Close()

	second, err := c.ConsumeQueue(cctx, connect.NewRequest(&heraldv1.ConsumeQueueRequest{Queue: "q"}))
	if err != nil {
		t.Fatal(err)
	}
	if m := receive(t, second); m.GetAttemptCount() != 1 || m.GetReleaseCount() != 1 { // a release is not an attempt
		t.Fatalf("after the first consumer left: %v; want attempt 1, release 1", m)
	}
	svc.CloseStreams()
	if second.Receive() {
		t.Fatal("a message after CloseStreams")
	}
	wantRPCError(t, second.Err(), connect.CodeUnavailable, herald.CodeShuttingDown)
}

func TestQueueRPCWithoutQueues(t *testing.T) {
	svc := New(&brokertest.Broker{}, Options{})
	mux := http.NewServeMux()
	mux.Handle(svc.QueuesHandler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := heraldv1connect.NewQueuesClient(srv.Client(), srv.URL)
	_, err := c.Enqueue(context.Background(), connect.NewRequest(&heraldv1.EnqueueRequest{Queue: "q"}))
	wantRPCError(t, err, connect.CodeUnimplemented, herald.CodeNotImplemented)
}
