package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/memstore"
	"github.com/herald-mq/herald/store/pebblestore"
	"github.com/herald-mq/herald/store/storetest"
)

// pebbleOn opens the pebble store "db" on fs.
func pebbleOn(t testing.TB, fs vfs.FS) *pebblestore.Store {
	t.Helper()
	st, err := pebblestore.Open("db", pebblestore.Options{FS: fs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func openEngine(t *testing.T, b store.Backend, cfg engine.Config) *engine.Engine {
	t.Helper()
	cfg.Backend = b
	cfg.Logger = quiet
	if cfg.Clock == nil {
		cfg.Clock = clock.NewManual(time.Unix(1700000000, 0))
	}
	e, err := engine.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

func exec(t *testing.T, e *engine.Engine, q string) *engine.Response {
	t.Helper()
	r, err := e.Exec(context.Background(), "", q, nil)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return r
}

// waitFor polls cond without sleeping, failing the test after a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// TestGroupCommit holds the first commit in the store, queues more writers behind it,
// and checks they all go to the store in one call (one sync) and are acknowledged only
// after it.
func TestGroupCommit(t *testing.T) {
	g := &storetest.Gated{Backend: memstore.New(), Entered: make(chan int, 16)}
	release := g.Hold()
	e := openEngine(t, g, engine.Config{})

	const writers = 8
	errs := make(chan error, writers+1)
	go func() { _, err := e.Exec(context.Background(), "", `SPAWN #first: Job {}`, nil); errs <- err }()
	if n := <-g.Entered; n != 1 {
		t.Fatalf("first commit carried %d batches, want 1", n)
	}
	for i := 0; i < writers; i++ {
		go func(i int) {
			_, err := e.Exec(context.Background(), "", fmt.Sprintf(`SPAWN #w%d: Job {}`, i), nil)
			errs <- err
		}(i)
	}
	// All writers have applied in memory and queued once seq reaches 1+writers.
	waitFor(t, "writers to queue", func() bool { seq, _ := e.Position(); return seq == 1+writers })
	select {
	case err := <-errs:
		t.Fatalf("a writer was acknowledged before its batch was synced (err=%v)", err)
	default:
	}
	release()
	if n := <-g.Entered; n != writers {
		t.Fatalf("second commit carried %d batches, want all %d queued writers", n, writers)
	}
	for i := 0; i < writers+1; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	groups, txns := e.Syncs()
	if groups != 2 || txns != writers+1 {
		t.Fatalf("groups=%d txns=%d, want 2 and %d", groups, txns, writers+1)
	}
	r := exec(t, e, `MATCH j: Job RETURN COUNT(j)`)
	if got := r.Results[0].Rows[0][0].AsInt(); got != writers+1 {
		t.Fatalf("count = %d", got)
	}
}

// TestStorageFailure: a failed sync fails its writers and every later call, and the
// engine reports not ready.
func TestStorageFailure(t *testing.T) {
	g := &storetest.Gated{Backend: memstore.New()}
	e := openEngine(t, g, engine.Config{})
	exec(t, e, `SPAWN #ok: Job {}`)
	g.Fail(errors.New("disk on fire"))
	_, err := e.Exec(context.Background(), "", `SPAWN #lost: Job {}`, nil)
	if herald.CodeOf(err) != herald.CodeStorage {
		t.Fatalf("err = %v, want STORAGE_FAILED", err)
	}
	if e.Ready() {
		t.Fatal("engine still ready after a storage failure")
	}
	for _, q := range []string{`SPAWN #more: Job {}`, `MATCH j: Job RETURN COUNT(j)`} {
		if _, err := e.Exec(context.Background(), "", q, nil); herald.CodeOf(err) != herald.CodeStorage {
			t.Fatalf("%s: err = %v, want STORAGE_FAILED", q, err)
		}
	}
}

// TestRetention: the change log keeps at least the configured number of change sets and
// reading before the horizon answers CHANGES_COMPACTED, never a silent gap.
func TestRetention(t *testing.T) {
	e := openEngine(t, memstore.New(), engine.Config{Retention: 10})
	for i := 0; i < 300; i++ {
		exec(t, e, fmt.Sprintf(`SPAWN #n%d: N {}`, i))
	}
	seq, _ := e.Position()
	cs, err := e.Changes(context.Background(), seq-10, 0)
	if err != nil || len(cs) != 10 || cs[0].Seq != seq-9 {
		t.Fatalf("recent changes: %d sets, err %v", len(cs), err)
	}
	_, err = e.Changes(context.Background(), 0, 0)
	if herald.CodeOf(err) != herald.CodeCompacted {
		t.Fatalf("reading from 0: err = %v, want CHANGES_COMPACTED", err)
	}
}

// TestIntervalTicks: with --tick=interval the injected clock drives the logical clock.
func TestIntervalTicks(t *testing.T) {
	clk := clock.NewManual(time.Unix(1700000000, 0))
	e := openEngine(t, memstore.New(), engine.Config{Clock: clk, TickMode: engine.TickInterval, TickInterval: 100 * time.Millisecond})
	exec(t, e, `SPAWN #a: N {}`)
	if _, tick := e.Position(); tick != 0 {
		t.Fatalf("tick = %d after a commit in interval mode, want 0", tick)
	}
	for want := uint64(1); want <= 3; want++ {
		waitFor(t, "the tick timer to be armed", func() bool { return clk.Pending() == 1 })
		clk.Advance(100 * time.Millisecond)
		waitFor(t, "the tick", func() bool { _, tick := e.Position(); return tick == want })
	}
}

// TestSessionExpiry: an idle session is dropped with its open transaction.
func TestSessionExpiry(t *testing.T) {
	clk := clock.NewManual(time.Unix(1700000000, 0))
	e := openEngine(t, memstore.New(), engine.Config{Clock: clk, SessionIdle: time.Minute})
	sid, err := e.OpenSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Exec(context.Background(), sid, `BEGIN SPAWN #a: N {}`, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	if _, err := e.Exec(context.Background(), sid, `COMMIT`, nil); herald.CodeOf(err) != herald.CodeNoSession {
		t.Fatalf("err = %v, want SESSION_NOT_FOUND", err)
	}
	r := exec(t, e, `MATCH n: N RETURN COUNT(n)`)
	if r.Results[0].Rows[0][0].AsInt() != 0 {
		t.Fatal("the expired session's transaction was committed")
	}
	if err := e.CloseSession(context.Background(), sid); herald.CodeOf(err) != herald.CodeNoSession {
		t.Fatalf("closing an expired session: %v", err)
	}
}

// TestConcurrentUse runs writers, readers and explicit transactions at once (for -race)
// and checks the final count.
func TestConcurrentUse(t *testing.T) {
	e := openEngine(t, memstore.New(), engine.Config{})
	exec(t, e, `node C { n: Int [required] }`)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := 0; w < 4; w++ {
		wg.Add(3)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if _, err := e.Exec(context.Background(), "", fmt.Sprintf(`SPAWN #c%d_%d: C { n = %d }`, w, i, i), nil); err != nil {
					errs <- err
				}
			}
		}(w)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if _, err := e.Exec(context.Background(), "", `MATCH c: C WHERE c.n = 3 RETURN COUNT(c)`, nil); err != nil {
					errs <- err
				}
			}
		}()
		go func(w int) {
			defer wg.Done()
			sid, _ := e.OpenSession(context.Background())
			for i := 0; i < 10; i++ {
				q := fmt.Sprintf(`BEGIN SPAWN #t%d_%d: C { n = 1 } LINK pair(#t%d_%d, #t%d_%d) COMMIT`, w, i, w, i, w, i)
				if _, err := e.Exec(context.Background(), sid, q, nil); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	r := exec(t, e, `MATCH c: C RETURN COUNT(c)`)
	if got := r.Results[0].Rows[0][0].AsInt(); got != 4*25+4*10 {
		t.Fatalf("count = %d", got)
	}
}

// TestCrashRecovery runs writers against pebble on a crashable in-memory filesystem,
// drops everything not synced at an arbitrary point, and checks after reopening that
// every acknowledged transaction is there whole and no transaction is there in part.
func TestCrashRecovery(t *testing.T) {
	fs := vfs.NewStrictMem()
	open := func() *engine.Engine {
		e, err := engine.Open(context.Background(), engine.Config{Backend: pebbleOn(t, fs), Logger: quiet, Clock: clock.NewManual(time.Unix(1700000000, 0))})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	acked := map[string]bool{}
	var lastSeq uint64
	for round := 0; round < 4; round++ {
		e := open()
		start, _ := e.Position()
		var mu sync.Mutex
		crashed := false
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 30; i++ {
					id := fmt.Sprintf("r%dw%di%d", round, w, i)
					// Two nodes and an edge in one transaction: all or nothing.
					q := fmt.Sprintf(`BEGIN SPAWN #%s: Msg { round = %d } SPAWN #%s_b: Msg {} LINK pair(#%s, #%s_b) COMMIT`, id, round, id, id, id)
					r, err := e.Exec(context.Background(), "", q, nil)
					if err != nil {
						return // the crash below races the writers
					}
					mu.Lock()
					if crashed {
						// Acknowledged by a sync the crash throws away: not a promise.
						mu.Unlock()
						return
					}
					acked[id] = true
					if r.Seq > lastSeq {
						lastSeq = r.Seq
					}
					mu.Unlock()
				}
			}(w)
		}
		// Crash while writers run: from here on nothing reaches the synced state.
		waitFor(t, "some commits", func() bool { seq, _ := e.Position(); return seq >= start+40 })
		mu.Lock()
		crashed = true
		mu.Unlock()
		fs.SetIgnoreSyncs(true)
		wg.Wait()
		_ = e.Close(context.Background())
		fs.ResetToSyncedState()
		fs.SetIgnoreSyncs(false)

		e = open()
		r := exec(t, e, `MATCH a: Msg, pair(a, b) RETURN a.id`)
		seen := map[string]bool{}
		for _, row := range r.Results[0].Rows {
			seen[row[0].AsString()] = true
		}
		mu.Lock()
		for id := range acked {
			if !seen[id] {
				t.Fatalf("round %d: acknowledged transaction %s lost", round, id)
			}
		}
		mu.Unlock()
		whole := exec(t, e, `MATCH m: Msg RETURN COUNT(m)`).Results[0].Rows[0][0].AsInt()
		if whole != int64(2*len(seen)) {
			t.Fatalf("round %d: %d Msg nodes for %d pairs: a transaction is partly visible", round, whole, len(seen))
		}
		if seq, _ := e.Position(); seq < lastSeq {
			t.Fatalf("round %d: seq %d after restart is behind the last acknowledged %d", round, seq, lastSeq)
		}
		_ = e.Close(context.Background())
	}
}

// TestCommitTimeIsMeasured: herald_commit_sync_seconds counts each group commit once,
// with the time from the start of its write to the end of its sync on the engine's
// clock: a commit held 5 ms by its store lands in the bucket above 3.2 ms.
func TestCommitTimeIsMeasured(t *testing.T) {
	clk := clock.NewManual(time.Unix(1700000000, 0))
	g := &storetest.Gated{Backend: memstore.New(), Entered: make(chan int, 4)}
	e := openEngine(t, g, engine.Config{Clock: clk})
	exec(t, e, `SPAWN #a: Job {}`)
	<-g.Entered
	before := commitTime(t, e)

	release := g.Hold()
	done := make(chan error, 1)
	go func() {
		_, err := e.Exec(context.Background(), "", `SPAWN #b: Job {}`, nil)
		done <- err
	}()
	<-g.Entered // the group is in the store's hands
	clk.Advance(5 * time.Millisecond)
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	after := commitTime(t, e)
	if after.Count != before.Count+1 {
		t.Fatalf("%d group commits counted, want %d", after.Count, before.Count+1)
	}
	for i, b := range after.Bounds {
		want := before.Counts[i]
		if b == 0.0064 {
			want++
		}
		if after.Counts[i] != want {
			t.Fatalf("bucket %v holds %d, want %d (%v)", b, after.Counts[i], want, after.Counts)
		}
	}
	if d := after.Sum - before.Sum; d < 0.005 || d > 0.0051 {
		t.Fatalf("the sum grew by %v s, want 0.005", d)
	}
}

func commitTime(t *testing.T, e *engine.Engine) *herald.Histogram {
	t.Helper()
	for _, m := range e.Metrics() {
		if m.Name == "herald_commit_sync_seconds" && m.Histogram != nil {
			return m.Histogram
		}
	}
	t.Fatal("no herald_commit_sync_seconds among the engine's metrics")
	return nil
}
