package engine_test

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald/engine"
)

// TestOpenLoadsEverything: an engine opened on a store loads every type, node and edge
// it holds, in several of the loader's batches, with each node's version; and the
// collector's target it raises while loading is back as it was after Open.
func TestOpenLoadsEverything(t *testing.T) {
	fs := vfs.NewMem()
	e, err := engine.Open(context.Background(), engine.Config{Backend: pebbleOn(t, fs), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	exec(t, e, `node Msg { n: Int }`)
	exec(t, e, `edge next(from: Msg, to: Msg)`)
	const n = 1500 // about three batches
	for lo := 0; lo < n; lo += 100 {
		var q strings.Builder
		q.WriteString("BEGIN ")
		for i := lo; i < lo+100; i++ {
			fmt.Fprintf(&q, "SPAWN #m%d: Msg { n = %d } ", i, i)
			if i > lo {
				fmt.Fprintf(&q, "LINK next(#m%d, #m%d) ", i-1, i)
			}
		}
		q.WriteString("COMMIT")
		exec(t, e, q.String())
	}
	want, _ := e.Position()
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	prev := debug.SetGCPercent(77)
	defer debug.SetGCPercent(prev)
	e2, err := engine.Open(context.Background(), engine.Config{Backend: pebbleOn(t, fs), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close(context.Background())
	if got := debug.SetGCPercent(77); got != 77 {
		t.Errorf("the collector's target after Open is %d, want 77 as before", got)
	}
	if got, _ := e2.Position(); got != want {
		t.Errorf("position %d after reopening, want %d", got, want)
	}
	r := exec(t, e2, `MATCH m: Msg RETURN COUNT(m), SUM(m.n)`)
	if c, s := r.Results[0].Rows[0][0].AsInt(), r.Results[0].Rows[0][1].AsInt(); c != n || s != n*(n-1)/2 {
		t.Errorf("COUNT %d, SUM %d; want %d and %d", c, s, n, n*(n-1)/2)
	}
	r = exec(t, e2, `MATCH a: Msg, b: Msg, next(a, b) RETURN COUNT(a)`)
	if c := r.Results[0].Rows[0][0].AsInt(); c != n-n/100 {
		t.Errorf("%d next edges, want %d", c, n-n/100)
	}
	r = exec(t, e2, `MATCH m: Msg WHERE m.n = 1499 RETURN m.n`)
	if len(r.Results[0].Rows) != 1 {
		t.Errorf("the last node: %v", r.Results[0].Rows)
	}
}
