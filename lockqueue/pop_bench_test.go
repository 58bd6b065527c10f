package lockqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
)

// BenchmarkPopAtDepth measures what the queue REST pop costs (Service.Pop, which
// POST /queue/{id}/pop calls) with 10 and with 100,000 items queued: each op pushes one
// item and pops one, so the depth stays put. The two figures should match: a pop takes
// the head of the queue's ready index and does not scan the queue.
func BenchmarkPopAtDepth(b *testing.B) {
	for _, depth := range []int{10, 100_000} {
		for _, ack := range []bool{false, true} {
			b.Run(fmt.Sprintf("depth=%d/require_ack=%v", depth, ack), func(b *testing.B) {
				benchPop(b, depth, ack)
			})
		}
	}
}

func benchPop(b *testing.B, depth int, ack bool) {
	ctx := context.Background()
	eng, err := engine.Open(ctx, engine.Config{Backend: memstore.New(), Clock: clock.Real(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close(ctx)
	del := delivery.New(delivery.Config{Engine: eng, Logger: quiet})
	if err := del.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer del.Stop(ctx)
	q := New(eng, del)
	for done := 0; done < depth; {
		var s strings.Builder
		for i := 0; i < 1000 && done < depth; i, done = i+1, done+1 {
			fmt.Fprintf(&s, `SPAWN i%d: QueueItem { queue = "bench", item = "{\"n\":%d}", priority = %d, pushed_at = now() } `, i, done, done%3)
		}
		if _, err := eng.Exec(ctx, "", s.String(), nil); err != nil {
			b.Fatal(err)
		}
	}
	// The first pop sets up the queue's consume group: keep it out of the timing.
	if _, err := q.Push(ctx, "bench", json.RawMessage(`{"warm":1}`), 0); err != nil {
		b.Fatal(err)
	}
	if _, err := q.Pop(ctx, "bench", broker.PopOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := q.Push(ctx, "bench", json.RawMessage(`{"n":-1}`), 1); err != nil {
			b.Fatal(err)
		}
		res, err := q.Pop(ctx, "bench", broker.PopOptions{RequireAck: ack})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Items) != 1 {
			b.Fatalf("pop %d took %d items", i, len(res.Items))
		}
		if ack {
			if _, err := q.Acknowledge(ctx, "bench", res.LockID); err != nil {
				b.Fatal(err)
			}
		}
	}
}
