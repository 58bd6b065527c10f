package client

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestSettlementsAreCoalesced: settlements made while earlier ones are on their way go
// out together, a few requests for a hundred messages, and each caller gets its own
// answer.
func TestSettlementsAreCoalesced(t *testing.T) {
	f := newFakeServer(t)
	f.gate = make(chan struct{})
	const n = 100
	var entered sync.WaitGroup
	entered.Add(n)
	errs := make(chan error, n)
	_, st, done := subscription(t, f, func(ctx context.Context, m *Message) error {
		entered.Done()
		errs <- m.Ack(ctx)
		return nil
	}, WithPolicy(Manual), WithConcurrency(n))
	for i := range n {
		st.consumed(fmt.Sprintf("d%d", i), i, 1)
	}
	entered.Wait()
	f.mu.Lock()
	close(f.gate)
	f.mu.Unlock()
	for range n {
		if err := recv(t, errs); err != nil {
			t.Fatal(err)
		}
		recv(t, done)
	}
	f.mu.Lock()
	batches := append([]int(nil), f.batches...)
	f.mu.Unlock()
	total := 0
	for _, b := range batches {
		total += b
	}
	if total != n || len(batches) >= 20 {
		t.Fatalf("%d settlements in %d requests %v; want all %d in a few", total, len(batches), batches, n)
	}
	if stmts := f.drainStmts(); len(stmts) != n {
		t.Fatalf("%d settlements recorded, want %d", len(stmts), n)
	}
}

// TestSettleFallsBackToStatements: against a server without POST /v1/settle the client
// settles with ACK / NACK / EXTEND statements, with the same outcomes.
func TestSettleFallsBackToStatements(t *testing.T) {
	f := newFakeServer(t)
	f.noSettle = true
	_, st, done := subscription(t, f, func(ctx context.Context, m *Message) error {
		if err := m.Extend(ctx, 30*time.Second); err != nil {
			return err
		}
		return m.NackAfter(ctx, time.Minute)
	}, WithPolicy(Manual))
	st.consumed("d1", 1, 1)
	recv(t, done)
	got := f.drainStmts()
	want := []string{`EXTEND "d1" [by: 30s]`, `NACK "d1" [delay: 60s]`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statements %q, want %q", got, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.batches) != 0 {
		t.Fatalf("settle requests %v against a server without the endpoint", f.batches)
	}
}
