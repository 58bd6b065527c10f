package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/store/memstore"
)

// scanSignal is a context that tells when a statement has asked it whether to stop n
// times: the engine asks every few thousand bindings a pattern scans, so by then the
// statement is scanning.
type scanSignal struct {
	context.Context
	asks    atomic.Int64
	n       int64
	running chan struct{}
}

func (c *scanSignal) Err() error {
	if c.asks.Add(1) == c.n {
		close(c.running)
	}
	return c.Context.Err()
}

// TestWritesCompleteDuringLongJoin runs a join over 10⁴ × 10⁴ = 10⁸ bindings and, while
// it scans, commits writes and answers reads: none of them waits for the join, which
// reads a snapshot. The join is still running when they are all answered; it is then
// stopped by its client going away and ends with E4011.
func TestWritesCompleteDuringLongJoin(t *testing.T) {
	e := openEngine(t, memstore.New(), engine.Config{})
	exec(t, e, `NODE A { k: int } NODE B { k: int } NODE C { i: int }`)
	for _, typ := range []string{"A", "B"} {
		for batch := range 20 {
			var q strings.Builder
			for i := range 500 {
				fmt.Fprintf(&q, "SPAWN x%d: %s { k = %d } ", i, typ, batch*500+i)
			}
			exec(t, e, q.String())
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := &scanSignal{Context: ctx, n: 10, running: make(chan struct{})}
	joinDone := make(chan error, 1)
	go func() {
		_, err := e.Exec(sig, "", `MATCH a: A, b: B WHERE a.k + b.k < 0 RETURN COUNT(*) AS n`, nil)
		joinDone <- err
	}()
	select {
	case <-sig.running:
	case err := <-joinDone:
		t.Fatalf("the join ended before it was seen scanning: %v", err)
	}

	for i := range 20 {
		exec(t, e, fmt.Sprintf(`SPAWN c: C { i = %d }`, i))
	}
	exec(t, e, `MATCH a: A WHERE a.k = 7 SET a.k = -7`)
	r := exec(t, e, `MATCH c: C RETURN COUNT(c) AS n`)
	if got := r.Results[0].Rows[0][0]; !got.Equal(herald.Int(20)) {
		t.Fatalf("COUNT(c) = %v, want 20", got)
	}
	select {
	case err := <-joinDone:
		t.Fatalf("the join ended (%v) before the writes beside it were answered; it should still be scanning", err)
	default:
	}

	cancel()
	err := <-joinDone
	if herald.CodeOf(err) != herald.CodeCancelled {
		t.Fatalf("the abandoned join ended with %v, want %s", err, herald.CodeCancelled)
	}
}

// TestReadSeesItsSnapshot checks that a transaction reads the graph as of its BEGIN and
// that a write to something another commit changed since then conflicts.
func TestReadSeesItsSnapshot(t *testing.T) {
	e := openEngine(t, memstore.New(), engine.Config{})
	exec(t, e, `NODE T { v: int } SPAWN #t1: T { v = 1 }`)
	sess, err := e.OpenSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	run := func(q string) (*engine.Response, error) { return e.Exec(context.Background(), sess, q, nil) }
	if _, err := run(`BEGIN`); err != nil {
		t.Fatal(err)
	}
	exec(t, e, `MATCH t: T SET t.v = 2`)
	r, err := run(`MATCH t: T RETURN t.v AS v`)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Results[0].Rows[0][0]; !got.Equal(herald.Int(1)) {
		t.Fatalf("inside the transaction t.v = %v, want 1 (as of BEGIN)", got)
	}
	if _, err := run(`MATCH t: T SET t.v = t.v + 10`); err != nil {
		t.Fatal(err)
	}
	if _, err := run(`COMMIT`); herald.CodeOf(err) != herald.CodeTxConflict {
		t.Fatalf("COMMIT of a write to a node changed since BEGIN: %v, want %s", err, herald.CodeTxConflict)
	}
	r = exec(t, e, `MATCH t: T RETURN t.v AS v`)
	if got := r.Results[0].Rows[0][0]; !got.Equal(herald.Int(2)) {
		t.Fatalf("after the conflict t.v = %v, want 2", got)
	}
}
