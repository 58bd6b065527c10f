package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
	"github.com/herald-mq/herald/store/pebblestore"
)

// BenchmarkSpawnCommit measures auto-commit SPAWN throughput on pebble on the real disk
// with sync on. Each op is one acknowledged (durable) transaction. commits/sync shows
// group commit at work: with many writers, many transactions share one sync.
func BenchmarkSpawnCommit(b *testing.B) {
	for _, writers := range []int{1, 4, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			st, err := pebblestore.Open(b.TempDir(), pebblestore.Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			e, err := engine.Open(context.Background(), engine.Config{Backend: st, Logger: quiet, Clock: clock.Real()})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close(context.Background())
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						if _, err := e.Exec(context.Background(), "", fmt.Sprintf(`SPAWN j: Job { n = %d, status = "pending" }`, i), nil); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			groups, txns := e.Syncs()
			if groups > 0 {
				b.ReportMetric(float64(txns)/float64(groups), "commits/sync")
			}
		})
	}
}

// loadJobs bulk-loads n Job nodes with a unique `key` attribute through transactions of
// 5,000 SPAWNs each.
func loadJobs(b *testing.B, e *engine.Engine, n int) {
	const chunk = 5000
	for base := 0; base < n; base += chunk {
		var q strings.Builder
		q.WriteString("BEGIN\n")
		for i := base; i < base+chunk && i < n; i++ {
			fmt.Fprintf(&q, "SPAWN j: Job { key = %d, bucket = %d }\n", i, i%100)
		}
		q.WriteString("COMMIT\n")
		if _, err := e.Exec(context.Background(), "", q.String(), nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSelectiveMatch runs a MATCH with an equality condition on an attribute at
// 10³ and 10⁶ nodes. The equality index keeps the cost flat; scanned/op (candidate
// bindings examined) stays at 1 whatever the graph size. The scan variant, a range
// condition the index cannot serve, shows what a full scan would cost.
func BenchmarkSelectiveMatch(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		e, err := engine.Open(context.Background(), engine.Config{Backend: memstore.New(), Logger: quiet, Clock: clock.Real()})
		if err != nil {
			b.Fatal(err)
		}
		loadJobs(b, e, n)
		for _, c := range []struct{ name, q string }{
			{"indexed", `MATCH j: Job WHERE j.key = 777 RETURN j.bucket`},
			{"scan", `MATCH j: Job WHERE j.key >= 777 AND j.key <= 777 RETURN j.bucket`},
		} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, c.name), func(b *testing.B) {
				if c.name == "scan" && n > 100_000 && testing.Short() {
					b.Skip("full scan of 10⁶ nodes skipped in -short")
				}
				var scanned int
				for i := 0; i < b.N; i++ {
					r, err := e.Exec(context.Background(), "", c.q, nil)
					if err != nil {
						b.Fatal(err)
					}
					if len(r.Results[0].Rows) != 1 {
						b.Fatalf("rows = %d", len(r.Results[0].Rows))
					}
					scanned = r.Results[0].Stats.RowsScanned
				}
				b.ReportMetric(float64(scanned), "scanned/op")
			})
		}
		e.Close(context.Background())
	}
}
