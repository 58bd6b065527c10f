package namedqueue

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
)

// fill enqueues n messages per fairness key in batches, interleaving the keys so that no
// key is ahead in arrival order.
func fill(tb testing.TB, q *Service, queue string, counts map[string]int) {
	tb.Helper()
	const batch = 5000
	left := map[string]int{}
	total := 0
	for k, n := range counts {
		left[k] = n
		total += n
	}
	keys := slices.Sorted(maps.Keys(counts))
	msgs := make([]broker.QueueMessage, 0, batch)
	flush := func() {
		if _, err := q.EnqueueBatch(context.Background(), queue, msgs); err != nil {
			tb.Fatal(err)
		}
		msgs = msgs[:0]
	}
	for total > 0 {
		for _, k := range keys {
			if left[k] == 0 {
				continue
			}
			left[k]--
			total--
			msgs = append(msgs, broker.QueueMessage{Payload: []byte("m"), FairnessKey: k})
			if len(msgs) == batch {
				flush()
			}
		}
	}
	if len(msgs) > 0 {
		flush()
	}
}

// drain consumes n messages from sub in delivery order, acknowledging them as it goes
// (several acknowledgements in flight, so that they share commits), and returns their
// fairness keys in the order they were leased.
func drain(tb testing.TB, q *Service, sub broker.Subscription, queue string, n int) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acks := make(chan broker.Delivered, 256)
	var wg sync.WaitGroup
	var errOnce sync.Once
	var ackErr error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range acks {
				if err := q.AckMessage(ctx, queue, d.ID); err != nil {
					errOnce.Do(func() { ackErr = err })
				}
			}
		}()
	}
	order := make([]string, 0, n)
	for len(order) < n {
		d, err := sub.Next(ctx)
		if err != nil {
			tb.Fatalf("after %d deliveries: %v", len(order), err)
		}
		if d.Attempt != 1 {
			tb.Fatalf("message %s delivered again (attempt %d)", d.ID, d.Attempt)
		}
		order = append(order, d.FairnessKey)
		acks <- d
	}
	close(acks)
	wg.Wait()
	if ackErr != nil {
		tb.Fatal(ackErr)
	}
	return order
}

func count(keys []string) map[string]int {
	c := map[string]int{}
	for _, k := range keys {
		c[k]++
	}
	return c
}

// checkShares fails unless each key's share of got is within 1% (relative) of its
// weight's share.
func checkShares(t *testing.T, what string, got map[string]int, weights map[string]int64) {
	t.Helper()
	var total, wsum float64
	for k := range weights {
		total += float64(got[k])
		wsum += float64(weights[k])
	}
	for k, w := range weights {
		want := float64(w) / wsum
		share := float64(got[k]) / total
		if math.Abs(share-want) > 0.01*want {
			t.Errorf("%s: key %s has %.4f of the deliveries (%d of %.0f), want %.4f ± 1%%", what, k, share, got[k], total, want)
		}
	}
}

// With keys of weights 1, 2 and 3 all backlogged, the deliveries over 60,000 messages
// split 1:2:3 (within 1%). Then key a runs out; its share goes to b and c, which split
// the deliveries 2:3.
func TestRPCFairnessWeightedShares(t *testing.T) {
	e := newEnv(t)
	weights := map[string]int64{"a": 1, "b": 2, "c": 3}
	e.create(broker.QueueConfig{Name: "fair", Weights: weights, VisibilityTimeout: time.Hour})
	// a is backlogged for the first 60,000 deliveries (it gets 10,000 of them) and runs
	// out 500 rounds later; b and c stay backlogged for the 10,000 after that.
	fill(t, e.q, "fair", map[string]int{"a": 10_500, "b": 26_000, "c": 39_000})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := e.q.ConsumeQueue(ctx, "fair")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const backlogged, idle = 60_000, 10_000
	// 63,000 deliveries take a's last message; 10,000 more measure the idle phase.
	order := drain(t, e.q, sub, "fair", 63_000+idle)

	first := count(order[:backlogged])
	t.Logf("first %d deliveries: %v", backlogged, first)
	checkShares(t, "all keys backlogged", first, weights)

	lastA := -1
	for i, k := range order {
		if k == "a" {
			lastA = i
		}
	}
	if got := count(order)["a"]; got != 10_500 {
		t.Fatalf("key a delivered %d times, want all its 10,500 messages", got)
	}
	if len(order)-lastA-1 < idle {
		t.Fatalf("a's last message came at delivery %d; too late to measure the idle phase", lastA+1)
	}
	after := count(order[lastA+1 : lastA+1+idle])
	t.Logf("%d deliveries after a ran out: %v", idle, after)
	if after["a"] != 0 {
		t.Fatalf("a delivered after running out: %v", after)
	}
	checkShares(t, "a idle", after, map[string]int64{"b": 2, "c": 3})
}

// BenchmarkRPCConsumeAck measures consume + ack of queue messages in process (memstore),
// with and without fairness, to show what deficit round robin across keys costs. Each op
// is one message leased and acknowledged; the messages are spread over 16 fairness keys
// with weights 1–4. Publishing is outside the timing.
func BenchmarkRPCConsumeAck(b *testing.B) {
	for _, fair := range []bool{false, true} {
		b.Run(fmt.Sprintf("fairness=%v", fair), func(b *testing.B) {
			eng, err := engine.Open(context.Background(), engine.Config{Backend: memstore.New(), Clock: clock.Real(), Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close(context.Background())
			del := delivery.New(delivery.Config{Engine: eng, Logger: quiet})
			if err := del.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer del.Stop(context.Background())
			q := New(eng, del)
			weights := map[string]int64{}
			counts := map[string]int{}
			for k := range 16 {
				key := fmt.Sprintf("k%02d", k)
				weights[key] = int64(1 + k%4)
				counts[key] = (b.N + 15) / 16
			}
			if _, err := q.CreateQueue(context.Background(), broker.QueueConfig{Name: "bench", Weights: weights, VisibilityTimeout: time.Hour}); err != nil {
				b.Fatal(err)
			}
			fill(b, q, "bench", counts)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sub, err := q.consume(ctx, "bench", fair)
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			b.ResetTimer()
			drain(b, q, sub, "bench", b.N)
			b.StopTimer()
		})
	}
}
