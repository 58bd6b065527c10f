package e2e

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// TestStatementTimeoutOverHTTP: a 10,000 × 10,000 join on a server started with
// --statement-timeout 2s ends with 422 E4012, and writes sent while it runs complete.
func TestStatementTimeoutOverHTTP(t *testing.T) {
	s := startServer(t, t.TempDir(), "--statement-timeout", "2s", "--max-rows-scanned", "0")
	u := s.URL()
	var b strings.Builder
	for range 10_000 {
		b.WriteString("SPAWN a: JoinA {} SPAWN b: JoinB {} ")
	}
	mustQuery(t, u, b.String())

	var writes atomic.Int64
	stop := make(chan struct{})
	writer := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				writer <- nil
				return
			default:
			}
			r, err := query(u, `SPAWN w: JoinW {}`, nil)
			if err == nil && r.Status != 200 {
				err = fmt.Errorf("status %d: %+v", r.Status, r.Error)
			}
			if err != nil {
				writer <- err
				return
			}
			writes.Add(1)
		}
	}()
	r, err := query(u, `MATCH a: JoinA, b: JoinB RETURN COUNT(*)`, nil)
	during := writes.Load()
	close(stop)
	if werr := <-writer; werr != nil {
		t.Fatalf("a write beside the join failed: %v", werr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 422 || r.Error == nil || r.Error.Code != "E4012" {
		t.Fatalf("the join answered %d %+v, want 422 E4012", r.Status, r.Error)
	}
	if during == 0 {
		t.Fatal("no write completed while the join ran")
	}
	t.Logf("%d writes completed while the join ran", during)
}
