package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
)

// spawnPairs writes n nodes of types LA and LB each.
func spawnPairs(t *testing.T, e *engine.Engine, n int) {
	t.Helper()
	var b strings.Builder
	for range n {
		b.WriteString("SPAWN a: LA {} SPAWN b: LB {} ")
	}
	exec(t, e, b.String())
}

// TestRowsScannedLimit: a join that examines more bindings than the limit stops with
// E4012 at the statement; one within it runs; a query after it is answered.
func TestRowsScannedLimit(t *testing.T) {
	e := openEngine(t, memstore.New(), engine.Config{MaxRowsScanned: 50_000})
	spawnPairs(t, e, 300) // the join is 90,000 bindings and more
	_, err := e.Exec(context.Background(), "", "MATCH x: LA RETURN COUNT(x)\nMATCH a: LA, b: LB RETURN COUNT(*)", nil)
	var he *herald.Error
	if herald.CodeOf(err) != herald.CodeStatementLimit || !asError(err, &he) || he.Line != 2 {
		t.Fatalf("err = %v, want E4012 at line 2", err)
	}
	if r := exec(t, e, `MATCH a: LA RETURN COUNT(a)`); r.Results[0].Rows[0][0].AsInt() != 300 {
		t.Fatalf("after the stopped statement: %v", r.Results[0].Rows)
	}
}

// TestStatementTimeout: a statement still scanning when its time is up stops with
// E4012; the clock is the engine's, moved here by the test while the join runs.
func TestStatementTimeout(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	e := openEngine(t, memstore.New(), engine.Config{Clock: clk, StatementTimeout: 2 * time.Second, MaxRowsScanned: -1})
	spawnPairs(t, e, 2000) // 4,000,000 bindings: far more than the test lets run
	done := make(chan error, 1)
	go func() {
		_, err := e.Exec(context.Background(), "", `MATCH a: LA, b: LB RETURN COUNT(*)`, nil)
		done <- err
	}()
	for {
		select {
		case err := <-done:
			if herald.CodeOf(err) != herald.CodeStatementLimit {
				t.Fatalf("err = %v, want E4012", err)
			}
			// Writes go on meanwhile and after.
			exec(t, e, `SPAWN c: LA {}`)
			return
		default:
			clk.Advance(time.Second)
			time.Sleep(time.Millisecond)
		}
	}
}

func asError(err error, target **herald.Error) bool {
	he, ok := err.(*herald.Error)
	if ok {
		*target = he
	}
	return ok
}

// TestPrincipalLimits: a principal's own limit applies where it is lower than the
// server's, and only to that principal.
func TestPrincipalLimits(t *testing.T) {
	e := openEngine(t, memstore.New(), engine.Config{MaxRowsScanned: 10_000_000})
	spawnPairs(t, e, 300)
	tight := herald.WithPrincipal(context.Background(), &herald.Principal{Name: "tight", Grants: []string{"admin"}, MaxRowsScanned: 50_000})
	loose := herald.WithPrincipal(context.Background(), &herald.Principal{Name: "loose", Grants: []string{"admin"}})
	const join = `MATCH a: LA, b: LB RETURN COUNT(*)`
	if _, err := e.Exec(tight, "", join, nil); herald.CodeOf(err) != herald.CodeStatementLimit {
		t.Fatalf("the tight principal: err = %v, want E4012", err)
	}
	if _, err := e.Exec(loose, "", join, nil); err != nil {
		t.Fatalf("a principal without limits of its own: %v", err)
	}
}
