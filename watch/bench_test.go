package watch_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
	"github.com/herald-mq/herald/watch"
)

// openBench starts an engine on the in-memory backend (storage is not what is measured)
// and a watch service with n standing watches made by stmt(i).
func openBench(b *testing.B, n int, stmt func(i int) string) (*engine.Engine, *watch.Service, []herald.Stream) {
	eng, err := engine.Open(context.Background(), engine.Config{Backend: memstore.New(), Logger: quiet, Clock: clock.Real()})
	if err != nil {
		b.Fatal(err)
	}
	svc := watch.New(watch.Config{Engine: eng, Logger: quiet, MaxWatches: n + 10})
	if err := svc.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	streams := make([]herald.Stream, n)
	for i := range streams {
		if streams[i], err = svc.Open(context.Background(), "", stmt(i), nil, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		_ = svc.Stop(context.Background())
		_ = eng.Close(context.Background())
	})
	return eng, svc, streams
}

// BenchmarkDispatchNonMatching measures commit cost (SPAWN of a Task) with 10, 1,000 and
// 10,000 standing watches that the commits do not match: watches on another type, and
// watches on Task that wait for another owner (served by the index by attribute value).
// The dispatch index keeps the cost flat as the watches grow: dispatch-ns/commit is the
// time the watch service spends per commit deciding which streams it wakes; ns/op is
// the whole commit, which also pays for the memory of the idle streams (garbage
// collection).
func BenchmarkDispatchNonMatching(b *testing.B) {
	kinds := map[string]func(i int) string{
		"other-type": func(i int) string { return fmt.Sprintf(`WATCH o: Other%d [initial: none, buffer: 16] RETURN o`, i%50) },
		"other-value": func(i int) string {
			return fmt.Sprintf(`WATCH t: Task WHERE t.owner = "u%d" [initial: none, buffer: 16] RETURN t`, i)
		},
	}
	for _, kind := range []string{"other-type", "other-value"} {
		for _, n := range []int{10, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/watches=%d", kind, n), func(b *testing.B) {
				eng, svc, _ := openBench(b, n, kinds[kind])
				before := svc.Stats()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := eng.Exec(context.Background(), "", `SPAWN t: Task { owner = "nobody" }`, nil); err != nil {
						b.Fatal(err)
					}
				}
				svc.Flush()
				after := svc.Stats()
				if c := after.Commits - before.Commits; c > 0 {
					b.ReportMetric(float64(after.DispatchTime-before.DispatchTime)/float64(c), "dispatch-ns/commit")
				}
			})
		}
	}
}

// BenchmarkFanOut measures the cost of one commit that 1,000 watches all match: each
// receives an added event. ns/op is per commit; divide by 1,000 for the cost per event.
// dispatch-ns/commit is the part of it spent deciding which streams the commit wakes.
func BenchmarkFanOut(b *testing.B) {
	const n = 1000
	eng, svc, streams := openBench(b, n, func(int) string { return `WATCH t: Task [initial: none, buffer: 100000] RETURN t.n` })
	before := svc.Stats()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := eng.Exec(context.Background(), "", `SPAWN t: Task { n = 1 }`, nil); err != nil {
			b.Fatal(err)
		}
		svc.Flush()
		for _, st := range streams {
			<-st.Events()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
	after := svc.Stats()
	if c := after.Commits - before.Commits; c > 0 {
		b.ReportMetric(float64(after.DispatchTime-before.DispatchTime)/float64(c), "dispatch-ns/commit")
	}
}

// BenchmarkIdleWatchHeap opens 10,000 identical watch-mode watches that have nothing to
// send, waits until every one has parked, and reports the live heap each holds: the
// watch service's and the engine's share of an idle watch (its stream, its _Watch node
// in the graph). The in-memory backend adds its copy of each _Watch record and
// change-log entry (about 1 KB), which a server keeps on disk; a server adds the RPC
// layer's share and the connections' buffers and goroutines. Run with -benchtime 1x:
// every iteration opens and closes the 10,000 watches.
func BenchmarkIdleWatchHeap(b *testing.B) {
	const n = 10000
	live := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	eng, err := engine.Open(context.Background(), engine.Config{Backend: memstore.New(), Logger: quiet, Clock: clock.Real()})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close(context.Background())
	svc := watch.New(watch.Config{Engine: eng, Logger: quiet, MaxWatches: n + 10})
	if err := svc.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer svc.Stop(context.Background())
	var perWatch, goroutines float64
	for b.Loop() {
		base, g0 := live(), runtime.NumGoroutine()
		streams := make([]herald.Stream, n)
		for i := range streams {
			if streams[i], err = svc.Open(context.Background(), "", `WATCH t: Task [initial: none] RETURN t`, nil, 0); err != nil {
				b.Fatal(err)
			}
		}
		for svc.Stats().Parked < n {
			time.Sleep(time.Millisecond)
		}
		perWatch = float64(live()-base) / n
		goroutines = float64(runtime.NumGoroutine()-g0) / n
		for _, st := range streams {
			st.Close()
		}
		for svc.Stats().Streams > 0 {
			time.Sleep(time.Millisecond)
		}
	}
	b.ReportMetric(perWatch, "heap-B/watch")
	b.ReportMetric(goroutines, "goroutines/watch")
}
