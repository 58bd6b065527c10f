package server

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/herald-mq/herald/client"
)

// spanNamed returns the ended span called name, waiting for it a while.
func spanNamed(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, s := range exp.GetSpans() {
			if s.Name == name {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %q", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTraceSurvivesARestart: the trace context is stored with the message, so a consumer
// that takes it after the server restarted (here with another client, on a server
// with no tracer of its own) still handles it in the publisher's trace; and the first
// server's commit span is the publish span's child.
func TestTraceSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(ctx)

	s1 := New(Config{DataDir: dir, Listen: "127.0.0.1:0", Logger: quietLogger(), TracerProvider: tp})
	if err := s1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c1, err := client.Dial(ctx, "http://"+s1.Addr(), client.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	pctx, root := tp.Tracer("test").Start(ctx, "request")
	if _, err := c1.Publish(pctx, "Later", map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	root.End()
	_ = c1.Close()
	if err := s1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	pub := spanNamed(t, exp, "publish Later")
	if commit := spanNamed(t, exp, "commit Later"); commit.Parent.SpanID() != pub.SpanContext.SpanID() {
		t.Fatalf("the commit span's parent is %s, want the publish span %s", commit.Parent.SpanID(), pub.SpanContext.SpanID())
	}

	s2 := New(Config{DataDir: dir, Listen: "127.0.0.1:0", Logger: quietLogger()})
	start(t, s2)
	c2, err := client.Dial(ctx, "http://"+s2.Addr(), client.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	handled := make(chan trace.SpanContext, 1)
	sub, err := c2.Subscribe(ctx, `WATCH m: Later [mode: consume] RETURN m`, func(ctx context.Context, m *client.Message) error {
		handled <- trace.SpanContextFromContext(ctx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close(ctx)
	select {
	case sc := <-handled:
		if sc.TraceID() != pub.SpanContext.TraceID() {
			t.Fatalf("after a restart the handler runs in trace %s, want the publisher's %s", sc.TraceID(), pub.SpanContext.TraceID())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the message was not delivered after the restart")
	}
	if proc := spanNamed(t, exp, "process Later"); proc.Parent.SpanID() != pub.SpanContext.SpanID() {
		t.Fatalf("the process span's parent is %s, want the publish span %s", proc.Parent.SpanID(), pub.SpanContext.SpanID())
	}
}
