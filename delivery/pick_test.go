package delivery_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
)

// gatedBodies is a store whose body reads wait at a gate, as reads that miss every
// cache wait on the disk: reading tells entered, and waits until open is closed.
type gatedBodies struct {
	*memstore.Store
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedBodies) wait() {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.open
}

func (g *gatedBodies) LoadBody(id herald.NodeID, seq uint64) ([]byte, error) {
	g.wait()
	return g.Store.LoadBody(id, seq)
}

func (g *gatedBodies) LoadBodies(ids []herald.NodeID, seqs []uint64) ([][]byte, error) {
	g.wait()
	return g.Store.LoadBodies(ids, seqs)
}

// within reports an error unless fn returns within a generous bound (a hang, not a
// timing, is what it catches); the test goes on, to end the hang.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("%s waits for a body read", what)
	}
}

// TestBodyReadHoldsNoLock: a round that must read a message's body from the store
// reads it with no lock held. While the read waits, a commit goes through and the
// consume engine answers; once it is done the message is delivered with its body.
func TestBodyReadHoldsNoLock(t *testing.T) {
	ctx := context.Background()
	store := &gatedBodies{Store: memstore.New(), entered: make(chan struct{}, 1), open: make(chan struct{})}
	eng, err := engine.Open(ctx, engine.Config{Backend: store, Logger: quiet, BodyCache: -1, Clock: clock.NewManual(time.Unix(1700000000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	svc := delivery.New(delivery.Config{Engine: eng, Logger: quiet})
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var st delivery.Stream
	defer func() {
		// The gate opens first: a round that waits at it may hold what the rest needs.
		select {
		case <-store.open:
		default:
			close(store.open)
		}
		if st != nil {
			st.Close()
		}
		_ = svc.Stop(ctx)
		_ = eng.Close(ctx)
	}()

	long := strings.Repeat("x", 400) // kept in the message's body, out of memory once durable
	if _, err := eng.Exec(ctx, "", `SPAWN #m: Msg { body = $b }`, map[string]herald.Value{"b": herald.String(long)}); err != nil {
		t.Fatal(err)
	}
	_ = eng.View(func(tx *graph.Tx, _, _ uint64) error {
		if _, held := tx.Node("m").Body.Data(); held {
			t.Fatal("the message's body is still in memory: the test would read nothing")
		}
		return nil
	})
	st, err = svc.Consume(ctx, "", `WATCH m: Msg [mode: consume] RETURN m.body AS body`, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-store.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the round did not read the body")
	}
	within(t, "a commit", func() {
		if _, err := eng.Exec(ctx, "", `SPAWN #other: Other {}`, nil); err != nil {
			t.Error(err)
		}
	})
	within(t, "the consume engine", func() { svc.LeaseOf("m") })
	if t.Failed() {
		return
	}
	close(store.open)
	select {
	case ev := <-st.Events():
		if ev.Type != delivery.EventConsumed || ev.Match.MapGet("body").AsString() != long {
			t.Fatalf("got %+v, want the message with its body", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the message was not delivered once its body was read")
	}
}

// TestChangedWhileReadIsDecidedAgain: a message that changes while its body is read is
// not leased as it was picked: it is decided again, here not to match any more, and
// leased once it matches again.
func TestChangedWhileReadIsDecidedAgain(t *testing.T) {
	ctx := context.Background()
	store := &gatedBodies{Store: memstore.New(), entered: make(chan struct{}, 1), open: make(chan struct{})}
	eng, err := engine.Open(ctx, engine.Config{Backend: store, Logger: quiet, BodyCache: -1, Clock: clock.NewManual(time.Unix(1700000000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	svc := delivery.New(delivery.Config{Engine: eng, Logger: quiet})
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var st delivery.Stream
	defer func() {
		select {
		case <-store.open:
		default:
			close(store.open)
		}
		if st != nil {
			st.Close()
		}
		_ = svc.Stop(ctx)
		_ = eng.Close(ctx)
	}()
	long := strings.Repeat("y", 400)
	exec := func(q string, params map[string]herald.Value) {
		t.Helper()
		if _, err := eng.Exec(ctx, "", q, params); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`SPAWN #m: Msg { body = $b, ok = true }`, map[string]herald.Value{"b": herald.String(long)})
	st, err = svc.Consume(ctx, "", `WATCH m: Msg WHERE m.ok = true [mode: consume] RETURN m.body AS body`, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-store.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the round did not read the body")
	}
	within(t, "a commit", func() { exec(`SET #m.ok = false`, nil) })
	if t.Failed() {
		return
	}
	close(store.open)
	svc.Flush()
	select {
	case ev := <-st.Events():
		t.Fatalf("a message that no longer matches was delivered: %+v", ev)
	default:
	}
	exec(`SET #m.ok = true`, nil)
	svc.Flush()
	select {
	case ev := <-st.Events():
		if ev.Type != delivery.EventConsumed || ev.Match.MapGet("body").AsString() != long {
			t.Fatalf("got %+v, want the message with its body", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the message was not delivered once it matched again")
	}
}

// TestHeldBackPickIsNobodyElses: a message picked by one group while its body is read
// is not picked by another group meanwhile: two groups of the same type, and exactly one
// of them gets it.
func TestHeldBackPickIsNobodyElses(t *testing.T) {
	ctx := context.Background()
	store := &gatedBodies{Store: memstore.New(), entered: make(chan struct{}, 1), open: make(chan struct{})}
	eng, err := engine.Open(ctx, engine.Config{Backend: store, Logger: quiet, BodyCache: -1, Clock: clock.NewManual(time.Unix(1700000000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	svc := delivery.New(delivery.Config{Engine: eng, Logger: quiet})
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var streams []delivery.Stream
	defer func() {
		select {
		case <-store.open:
		default:
			close(store.open)
		}
		for _, st := range streams {
			st.Close()
		}
		_ = svc.Stop(ctx)
		_ = eng.Close(ctx)
	}()
	long := map[string]herald.Value{"b": herald.String(strings.Repeat("z", 400))}
	consume := func(q string) delivery.Stream {
		t.Helper()
		st, err := svc.Consume(ctx, "", q, nil)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
		return st
	}
	if _, err := eng.Exec(ctx, "", `SPAWN #old: Old { body = $b }`, long); err != nil {
		t.Fatal(err)
	}
	consume(`WATCH o: Old [mode: consume] RETURN o.body AS body`)
	select {
	case <-store.entered: // a round waits at the gate for #old's body
	case <-time.After(10 * time.Second):
		t.Fatal("the round did not read the body")
	}
	a := consume(`WATCH m: Msg [mode: consume, group: "a"] RETURN m.body AS body`)
	b := consume(`WATCH m: Msg [mode: consume, group: "b"] RETURN m.body AS body`)
	if _, err := eng.Exec(ctx, "", `SPAWN #m: Msg { body = $b }`, long); err != nil {
		t.Fatal(err)
	}
	close(store.open)
	svc.Flush()
	got := 0
	for _, st := range []delivery.Stream{a, b} {
		select {
		case ev := <-st.Events():
			if ev.Type == delivery.EventConsumed {
				got++
			}
		default:
		}
	}
	if got != 1 {
		t.Fatalf("#m was leased %d times; want once, to one of the two groups", got)
	}
}
