package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// newRecorder returns a tracer provider that keeps every ended span in memory.
func newRecorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// waitSpans waits until the exporter holds a span of each name, and returns them by name.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, names ...string) map[string]tracetest.SpanStub {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := map[string]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			got[s.Name] = s
		}
		missing := ""
		for _, n := range names {
			if _, ok := got[n]; !ok {
				missing = n
			}
		}
		if missing == "" {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %q among %d: %v", missing, len(got), keys(got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func keys(m map[string]tracetest.SpanStub) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTracePublishToHandler: a publish made within a trace and the handler that
// consumes the message are one trace — the client's producer span, the server's
// commit, lease and settle spans and the consumer's span, whose context the handler
// gets, all children of the first — and the settlement is an event of the consumer
// span.
func TestTracePublishToHandler(t *testing.T) {
	tp, exp := newRecorder(t)
	s := heraldtest.NewServer(t, heraldtest.WithTracerProvider(tp))
	c := s.Client()
	ctx, root := tp.Tracer("test").Start(context.Background(), "request")
	id, err := c.Publish(ctx, "TJob", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	root.End()

	handled := make(chan trace.SpanContext, 1)
	sub, err := c.Subscribe(context.Background(), `WATCH j: TJob [mode: consume] RETURN j`, func(ctx context.Context, m *client.Message) error {
		handled <- trace.SpanContextFromContext(ctx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close(context.Background())
	var inHandler trace.SpanContext
	select {
	case inHandler = <-handled:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not run")
	}
	s.RequireAcked("TJob", id)

	spans := waitSpans(t, exp, "request", "publish TJob", "commit TJob", "lease TJob", "settle ack", "process TJob")
	traceID := spans["request"].SpanContext.TraceID()
	for name, sp := range spans {
		if sp.SpanContext.TraceID() != traceID {
			t.Errorf("span %q is in trace %s, want %s (one trace)", name, sp.SpanContext.TraceID(), traceID)
		}
	}
	pub, commit, proc := spans["publish TJob"], spans["commit TJob"], spans["process TJob"]
	if pub.Parent.SpanID() != spans["request"].SpanContext.SpanID() || pub.SpanKind != trace.SpanKindProducer {
		t.Errorf("publish span: parent %s kind %v, want the caller's span, producer", pub.Parent.SpanID(), pub.SpanKind)
	}
	if commit.Parent.SpanID() != pub.SpanContext.SpanID() || !commit.Parent.IsRemote() || commit.SpanKind != trace.SpanKindServer {
		t.Errorf("commit span: parent %s (remote %v) kind %v, want the publish span, remote, server", commit.Parent.SpanID(), commit.Parent.IsRemote(), commit.SpanKind)
	}
	for _, name := range []string{"lease TJob", "settle ack"} {
		if sp := spans[name]; sp.Parent.SpanID() != pub.SpanContext.SpanID() || sp.SpanKind != trace.SpanKindServer || sp.Status.Code != 0 /* unset */ {
			t.Errorf("%s span: parent %s kind %v status %v, want the publish span, server, no error", name, sp.Parent.SpanID(), sp.SpanKind, sp.Status)
		}
	}
	if proc.Parent.SpanID() != pub.SpanContext.SpanID() || !proc.Parent.IsRemote() || proc.SpanKind != trace.SpanKindConsumer {
		t.Errorf("process span: parent %s (remote %v) kind %v, want the publish span, remote, consumer", proc.Parent.SpanID(), proc.Parent.IsRemote(), proc.SpanKind)
	}
	if inHandler.SpanID() != proc.SpanContext.SpanID() {
		t.Errorf("the handler's context has span %s, want the process span %s", inHandler.SpanID(), proc.SpanContext.SpanID())
	}
	if len(proc.Events) == 0 || proc.Events[0].Name != "ack" {
		t.Errorf("process span events %v, want the ack", proc.Events)
	}
	attr := map[string]string{}
	for _, kv := range pub.Attributes {
		attr[string(kv.Key)] = kv.Value.Emit()
	}
	if attr["messaging.message.id"] != id || attr["messaging.destination.name"] != "TJob" {
		t.Errorf("publish span attributes %v, want the message id %s and its type", attr, id)
	}
}

// TestTraceNackAndProjection: a handler's error marks its span failed with the NACK as
// an event, the redelivery's span is a child of the same publish, and a projection
// joins the trace by returning the attribute _trace.
func TestTraceNackAndProjection(t *testing.T) {
	tp, exp := newRecorder(t)
	s := heraldtest.NewServer(t)
	c, err := client.Dial(context.Background(), s.URL(), client.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, root := tp.Tracer("test").Start(context.Background(), "request")
	fut := c.PublishAsync("TNack", map[string]any{"n": 2}, client.WithContext(ctx))
	id, err := fut.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	root.End()

	attempts := make(chan int, 2)
	sub, err := c.Subscribe(context.Background(), `WATCH j: TNack [mode: consume, backoff: fixed(10ms)] RETURN j.n AS n, j._trace AS _trace`, func(ctx context.Context, m *client.Message) error {
		attempts <- m.Attempt
		if m.Attempt == 1 {
			return herald.NackAfter(errors.New("not yet"), time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close(context.Background())
	for range 2 {
		select {
		case <-attempts:
		case <-time.After(10 * time.Second):
			t.Fatal("the message was not delivered twice")
		}
	}
	s.RequireAcked("TNack", id)
	pub := waitSpans(t, exp, "publish TNack")["publish TNack"]
	var procs []tracetest.SpanStub
	deadline := time.Now().Add(10 * time.Second)
	for len(procs) < 2 {
		procs = procs[:0]
		for _, sp := range exp.GetSpans() {
			if sp.Name == "process" { // a projection does not say the message's type
				procs = append(procs, sp)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d process spans, want 2", len(procs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	events := map[string]bool{}
	for _, p := range procs {
		if p.Parent.SpanID() != pub.SpanContext.SpanID() || p.SpanContext.TraceID() != pub.SpanContext.TraceID() {
			t.Errorf("a process span's parent is %s, want the publish span %s", p.Parent.SpanID(), pub.SpanContext.SpanID())
		}
		for _, e := range p.Events {
			events[e.Name] = true
		}
	}
	if !events["nack"] || !events["ack"] {
		t.Errorf("events %v, want a nack and an ack", events)
	}
}

// TestTraceDeclaredType: a message of a declared type takes the trace context too, though
// the declaration does not name _trace.
func TestTraceDeclaredType(t *testing.T) {
	tp, exp := newRecorder(t)
	s := heraldtest.NewServer(t, heraldtest.WithTracerProvider(tp))
	s.Exec(`node TDecl { n: Int }`, nil)
	c := s.Client()
	ctx, root := tp.Tracer("test").Start(context.Background(), "request")
	defer root.End()
	id, err := c.Publish(ctx, "TDecl", map[string]any{"n": 3})
	if err != nil {
		t.Fatalf("publish of a declared type within a trace: %v", err)
	}
	resp := s.Exec(`MATCH m: TDecl WHERE m = #`+id+` RETURN m._trace AS tp`, nil)
	pub := waitSpans(t, exp, "publish TDecl")["publish TDecl"]
	want := "00-" + pub.SpanContext.TraceID().String() + "-" + pub.SpanContext.SpanID().String() + "-01"
	if got := resp.Last().Rows[0][0]; got != want {
		t.Fatalf("the stored trace context is %v, want %s", got, want)
	}
}

// TestNoTraceNoAttribute: a publish outside any trace stores no trace context, and a
// client without a provider of its own (OpenTelemetry's global one, unset) still passes
// on the trace its caller is in.
func TestNoTraceNoAttribute(t *testing.T) {
	s := heraldtest.NewServer(t)
	c := s.Client()
	id, err := c.Publish(context.Background(), "TNone", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Exec(`MATCH m: TNone WHERE m = #`+id+` RETURN m._trace`, nil).Last().Rows[0][0]; got != nil {
		t.Fatalf("a publish outside a trace stored %v", got)
	}
	tp, _ := newRecorder(t)
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	id, err = c.Publish(ctx, "TNone", map[string]any{"n": 2})
	if err != nil {
		t.Fatal(err)
	}
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if got := s.Exec(`MATCH m: TNone WHERE m = #`+id+` RETURN m._trace`, nil).Last().Rows[0][0]; got != want {
		t.Fatalf("a publish within the caller's trace stored %v, want %s", got, want)
	}
}
