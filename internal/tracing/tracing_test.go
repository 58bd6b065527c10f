package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceparentRoundTrip: the traceparent written for a span reads back as that
// span's context, remote; malformed ones are ignored.
func TestTraceparentRoundTrip(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("t").Start(context.Background(), "s")
	defer span.End()
	s := Traceparent(ctx)
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if s != want {
		t.Fatalf("Traceparent = %q, want %q", s, want)
	}
	sc := trace.SpanContextFromContext(Remote(context.Background(), s))
	if !sc.IsRemote() || sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() || !sc.IsSampled() {
		t.Fatalf("Remote(%q) = %+v", s, sc)
	}
	if got := Traceparent(context.Background()); got != "" {
		t.Fatalf("Traceparent outside a span = %q", got)
	}
	for _, bad := range []string{
		"", "x", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0",
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
		"00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
	} {
		if sc := trace.SpanContextFromContext(Remote(context.Background(), bad)); sc.IsValid() {
			t.Errorf("Remote(%q) took %+v", bad, sc)
		}
	}
	if sc := trace.SpanContextFromContext(Remote(context.Background(), "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-later")); !sc.IsValid() || sc.IsSampled() {
		t.Errorf("a later version's traceparent: %+v", sc)
	}
}

// TestFromMatch: the trace context of a delivery, from the node or from a projection.
func TestFromMatch(t *testing.T) {
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	cases := []struct {
		match       map[string]any
		tp, typ, id string
	}{
		{map[string]any{"id": "a", "_type": "Job", "_trace": tp}, tp, "Job", "a"},
		{map[string]any{"n": int64(1), "_trace": tp}, tp, "", ""},
		{map[string]any{"job": map[string]any{"id": "b", "_type": "Job", "_trace": tp}}, tp, "Job", "b"},
		{map[string]any{"id": "c", "_type": "Job"}, "", "Job", "c"},
		{map[string]any{"_trace": int64(3)}, "", "", ""},
	}
	for _, c := range cases {
		gtp, typ, id := FromMatch(c.match)
		if gtp != c.tp || typ != c.typ || id != c.id {
			t.Errorf("FromMatch(%v) = %q %q %q, want %q %q %q", c.match, gtp, typ, id, c.tp, c.typ, c.id)
		}
	}
}
