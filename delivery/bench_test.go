package delivery_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/pebblestore"
)

// BenchmarkConsumeAck measures the consume path in process on Pebble on the real disk
// with sync on: b.N messages are published (8 concurrent publishers), then 4 consumers
// of one group take and ACK them all, each from ackers goroutines. Each op is one message
// published and acknowledged.
const ackers = 64

func BenchmarkConsumeAck(b *testing.B) {
	st, err := pebblestore.Open(b.TempDir(), pebblestore.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	eng, err := engine.Open(context.Background(), engine.Config{Backend: st, Logger: quiet, Clock: clock.Real()})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close(context.Background())
	svc := delivery.New(delivery.Config{Engine: eng, Logger: quiet})
	if err := svc.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer svc.Stop(context.Background())
	ctx := context.Background()
	body := herald.String(string(make([]byte, 256)))

	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := (b.N + 7) / 8
	for p := 0; p < 8; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := p * per; i < (p+1)*per && i < b.N; i++ {
				if _, err := eng.Exec(ctx, "", `SPAWN m: BenchMsg { body = $b }`, map[string]herald.Value{"b": body}); err != nil {
					b.Error(err)
					return
				}
			}
		}(p)
	}
	wg.Wait()
	published := time.Since(start)
	var acked sync.WaitGroup
	acked.Add(b.N)
	for c := 0; c < 4; c++ {
		st, err := svc.Consume(ctx, "", `WATCH m: BenchMsg [mode: consume, group: "bench", buffer: 256] RETURN m.id`, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		// Each consumer acknowledges from ackers goroutines, so that ACKs overlap and
		// share syncs as they do behind a client with concurrent handlers.
		ids := make(chan string, 256)
		for range ackers {
			go func() {
				for id := range ids {
					if err := svc.Ack(ctx, id); err != nil {
						b.Error(err)
					}
					acked.Done()
				}
			}()
		}
		go func() {
			defer close(ids)
			for ev := range st.Events() {
				if ev.Type == delivery.EventConsumed {
					ids <- ev.DeliveryID
				}
			}
		}()
	}
	acked.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/published.Seconds(), "publish/s")
	b.ReportMetric(float64(b.N)/(time.Since(start)-published).Seconds(), "consume+ack/s")
	groups, txns := eng.Syncs()
	b.ReportMetric(float64(txns)/float64(groups), "commits/sync")
	_ = fmt.Sprint
}
