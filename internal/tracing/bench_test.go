package tracing

import (
	"context"
	"testing"
)

func BenchmarkStartPublishUnset(b *testing.B) {
	tr := Tracer(nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		span, tp := StartPublish(ctx, tr, "Job")
		EndPublish(span, "x", 1, nil)
		_ = tp
	}
}

func BenchmarkStartProcessUnset(b *testing.B) {
	tr := Tracer(nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := StartProcess(ctx, tr, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "Job", "id", "d1", 1)
		span.End()
	}
}
