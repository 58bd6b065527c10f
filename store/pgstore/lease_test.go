package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/pgstore"
)

// expire ends the lease now, on the database's clock, as time passing would.
func expire(t *testing.T, schema string) {
	t.Helper()
	admin(t, testDSN(t), `UPDATE `+schema+`.leader SET expires_at = now() - interval '1 second'`)
}

func wantLease(t *testing.T, s *pgstore.Store, term uint64, holder, address string, held bool) {
	t.Helper()
	l, err := s.Leader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.Term != term || l.Holder != holder || l.Address != address || l.Held != held {
		t.Fatalf("Leader = %+v, want term %d holder %q address %q held %v", l, term, holder, address, held)
	}
}

func wantFenced(t *testing.T, s *pgstore.Store, seq uint64) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Commit(ctx, []*store.Batch{put(seq, node("fenced", seq))}); !errors.Is(err, pgstore.ErrFenced) {
		t.Fatalf("Commit of a deposed leader = %v, want ErrFenced", err)
	}
	if _, _, err := s.CommitAsync(ctx, []*store.Batch{put(seq, node("fenced", seq))}); !errors.Is(err, pgstore.ErrFenced) {
		t.Fatalf("CommitAsync of a deposed leader = %v, want ErrFenced", err)
	}
	if err := s.Truncate(ctx, seq); !errors.Is(err, pgstore.ErrFenced) {
		t.Fatalf("Truncate of a deposed leader = %v, want ErrFenced", err)
	}
	if n, err := s.GetNode(ctx, "fenced"); err != nil || n != nil {
		t.Fatalf("a fenced commit wrote its node: %v, %v", n, err)
	}
}

// TestFencing deposes a leader whose lease expired and checks that it can no longer
// commit, while the new leader can; then that a released lease fences its holder too,
// and that an unfenced store may not commit once the lease has been used.
func TestFencing(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	a, b := mustOpen(t, schema, pgstore.Options{}), mustOpen(t, schema, pgstore.Options{})
	defer a.Close()
	defer b.Close()
	wantLease(t, a, 0, "", "", false)

	term, ok, err := a.Acquire(ctx, "a", "10.0.0.1:4222", time.Minute)
	if err != nil || !ok || term != 1 || a.Term() != 1 {
		t.Fatalf("Acquire = %d, %v, %v", term, ok, err)
	}
	if _, ok, err := b.Acquire(ctx, "b", "10.0.0.2:4222", time.Minute); err != nil || ok {
		t.Fatalf("Acquire of a held lease = %v, %v", ok, err)
	}
	wantLease(t, b, 1, "a", "10.0.0.1:4222", true)
	commit(t, a, put(1, node("a1", 1)))

	expire(t, schema)
	wantLease(t, b, 1, "a", "10.0.0.1:4222", false)
	if term, ok, err := b.Acquire(ctx, "b", "10.0.0.2:4222", time.Minute); err != nil || !ok || term != 2 {
		t.Fatalf("Acquire of an expired lease = %d, %v, %v", term, ok, err)
	}
	wantFenced(t, a, 2)
	if ok, err := a.Renew(ctx, 1, time.Minute); err != nil || ok {
		t.Fatalf("Renew of a lost term = %v, %v", ok, err)
	}
	if m, _ := b.Meta(ctx); m.Seq != 1 {
		t.Fatalf("Meta after fenced commits = %+v", m)
	}
	commit(t, b, put(2, node("b2", 2)))
	if ok, err := b.Renew(ctx, 2, time.Hour); err != nil || !ok {
		t.Fatalf("Renew = %v, %v", ok, err)
	}
	if l, _ := b.Leader(ctx); time.Until(l.Expires) < 59*time.Minute {
		t.Fatalf("renewed for an hour, the lease expires at %v", l.Expires)
	}

	// A released lease fences its holder, and is free at once.
	if err := b.Release(ctx, 2); err != nil {
		t.Fatal(err)
	}
	wantLease(t, a, 2, "", "", false)
	wantFenced(t, b, 3)

	// Once the lease has been taken, a store without a term may not commit.
	c := mustOpen(t, schema, pgstore.Options{})
	defer c.Close()
	wantFenced(t, c, 3)

	// Acquiring always starts a new term, even for the same holder.
	if term, ok, _ := a.Acquire(ctx, "a", "10.0.0.1:4222", time.Minute); !ok || term != 3 {
		t.Fatalf("Acquire = %d, %v", term, ok)
	}
	if term, ok, _ := a.Acquire(ctx, "a", "10.0.0.1:4222", time.Minute); !ok || term != 4 {
		t.Fatalf("Acquire again = %d, %v", term, ok)
	}
	old := mustOpen(t, schema, pgstore.Options{Term: 3})
	defer old.Close()
	wantFenced(t, old, 3)
	commit(t, a, put(3, node("a3", 3)))
	cs, err := c.Changes(ctx, 0, 0)
	if err != nil || len(cs) != 3 || cs[2].Seq != 3 {
		t.Fatalf("Changes = %v, %v", cs, err)
	}
}

func TestLeaseArguments(t *testing.T) {
	s := mustOpen(t, newSchema(t), pgstore.Options{})
	defer s.Close()
	ctx := context.Background()
	if _, _, err := s.Acquire(ctx, "", "x", time.Second); err == nil {
		t.Error("Acquire without a holder succeeded")
	}
	if _, _, err := s.Acquire(ctx, "a", "x", 0); err == nil {
		t.Error("Acquire without a ttl succeeded")
	}
	if _, err := s.Renew(ctx, 1, -time.Second); err == nil {
		t.Error("Renew with a negative ttl succeeded")
	}
	_ = s.Close()
	if _, _, err := s.Acquire(ctx, "a", "x", time.Second); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Acquire after Close = %v", err)
	}
	if _, err := s.Leader(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Leader after Close = %v", err)
	}
}

// Nodes report themselves with Heartbeat; Nodes lists the latest report of each.
func TestHeartbeats(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	s := mustOpen(t, schema, pgstore.Options{})
	defer s.Close()
	for _, n := range []pgstore.Node{
		{Name: "b", Address: "http://b", Role: "follower", Seq: 3, Behind: 1500 * time.Millisecond},
		{Name: "a", Address: "http://a", Role: "leader", Seq: 4},
		{Name: "b", Address: "http://b", Role: "follower", Seq: 4},
	} {
		if err := s.Heartbeat(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	nodes, err := s.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].Name != "a" || nodes[0].Role != "leader" || nodes[1].Seq != 4 || nodes[1].Behind != 0 || nodes[1].Age < 0 || nodes[1].Age > time.Minute {
		t.Fatalf("nodes %+v", nodes)
	}
}

// A schema of version 1 (before the cluster_nodes table) is upgraded when a store opens it.
func TestUpgradeFromVersion1(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	s := mustOpen(t, schema, pgstore.Options{})
	s.Close()
	admin(t, testDSN(t), `DROP TABLE `+schema+`.cluster_nodes`)
	admin(t, testDSN(t), `UPDATE `+schema+`.schema_version SET version = 1`)
	s = mustOpen(t, schema, pgstore.Options{})
	defer s.Close()
	if err := s.Heartbeat(ctx, pgstore.Node{Name: "a", Role: "leader"}); err != nil {
		t.Fatalf("after the upgrade: %v", err)
	}
}
