package watermill_test

import (
	"context"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/herald-mq/herald/client/watermill"
	"github.com/herald-mq/herald/heraldtest"
)

// TestTraceThroughWatermill: a Watermill message published with a span in its context
// arrives with a context in the same trace: the client's consumer span, the child of
// the publish's.
func TestTraceThroughWatermill(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	srv := heraldtest.NewServer(t, heraldtest.WithTracerProvider(tp))
	pub, sub := newPubSub(t, srv, watermill.Config{ConsumerGroup: "traced"})
	msgs, err := sub.Subscribe(context.Background(), "traced")
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := tp.Tracer("test").Start(context.Background(), "request")
	msg := message.NewMessage("t-1", []byte("hello"))
	msg.SetContext(ctx)
	if err := pub.Publish("traced", msg); err != nil {
		t.Fatal(err)
	}
	root.End()
	got := receive(t, msgs)
	sc := trace.SpanContextFromContext(got.Context())
	got.Ack()
	if sc.TraceID() != root.SpanContext().TraceID() {
		t.Fatalf("the received message's context is in trace %s, want the publisher's %s", sc.TraceID(), root.SpanContext().TraceID())
	}
	var publish trace.SpanContext
	for _, s := range exp.GetSpans() {
		if s.Name == "publish "+watermill.MessageType {
			publish = s.SpanContext
		}
	}
	if !publish.IsValid() {
		t.Fatal("no publish span")
	}
	if sc.SpanID() == publish.SpanID() || sc.SpanID() == root.SpanContext().SpanID() {
		t.Fatalf("the received message's span %s is not the consumer's own", sc.SpanID())
	}
}
