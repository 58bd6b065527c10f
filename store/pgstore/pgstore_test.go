package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/pgstore"
	"github.com/herald-mq/herald/store/storetest"
)

// defaultDSN is the server the tests use unless HERALD_TEST_PG_DSN names another.
const defaultDSN = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

var (
	quiet   = slog.New(slog.NewTextHandler(io.Discard, nil))
	pgOnce  sync.Once
	pgDSN   string
	pgReach error
)

// testDSN returns the test server's DSN. A refused connection on a machine with
// pg_ctlcluster starts the local cluster first; the test skips only where PostgreSQL is
// not installed (and no server is named), and fails where it is but cannot be reached.
func testDSN(t testing.TB) string {
	t.Helper()
	pgOnce.Do(func() {
		pgDSN = os.Getenv("HERALD_TEST_PG_DSN")
		if pgDSN == "" {
			pgDSN = defaultDSN
		}
		pgReach = ping(pgDSN)
		if errors.Is(pgReach, syscall.ECONNREFUSED) {
			if ctl, err := exec.LookPath("pg_ctlcluster"); err == nil {
				if out, err := exec.Command(ctl, "--skip-systemctl-redirect", pgVersion(), "main", "start").CombinedOutput(); err != nil {
					pgReach = fmt.Errorf("%w; starting it with pg_ctlcluster: %v: %s", pgReach, err, out)
				} else {
					pgReach = ping(pgDSN)
				}
			}
		}
	})
	if pgReach != nil {
		if _, err := exec.LookPath("pg_ctlcluster"); err != nil && os.Getenv("HERALD_TEST_PG_DSN") == "" {
			t.Skipf("PostgreSQL is not installed here (no pg_ctlcluster) and not reachable at %s; set HERALD_TEST_PG_DSN to use a server elsewhere. Skipping the PostgreSQL store's tests: %v", redact(pgDSN), pgReach)
		}
		t.Fatalf("PostgreSQL is installed but not reachable at %s: %v", redact(pgDSN), pgReach)
	}
	return pgDSN
}

// pgVersion is the newest PostgreSQL cluster version configured here ("15" if none is).
func pgVersion() string {
	entries, _ := os.ReadDir("/etc/postgresql")
	v := "15"
	for _, e := range entries {
		if e.IsDir() && e.Name() > v {
			v = e.Name()
		}
	}
	return v
}

func ping(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.Ping(ctx)
}

// redact hides a password in a DSN for messages.
func redact(dsn string) string {
	if i, j := strings.Index(dsn, "://"), strings.LastIndex(dsn, "@"); i >= 0 && j > i {
		if k := strings.Index(dsn[i+3:j], ":"); k >= 0 {
			return dsn[:i+3+k] + ":***" + dsn[j:]
		}
	}
	return dsn
}

// newSchema names a schema for one test and drops it when the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	dsn := testDSN(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "herald_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { admin(t, dsn, `DROP SCHEMA IF EXISTS `+name+` CASCADE`) })
	return name
}

// admin runs sql on a connection of its own.
func admin(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", redact(dsn), err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func mustOpen(t testing.TB, schema string, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	opts.Schema, opts.Logger = schema, quiet
	s, err := pgstore.Open(context.Background(), testDSN(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	testDSN(t)
	schemas := map[store.Backend]string{}
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Backend {
			schema := newSchema(t)
			s := mustOpen(t, schema, pgstore.Options{})
			schemas[s] = schema
			return s
		},
		Reopen: func(t *testing.T, b store.Backend) store.Backend {
			schema := schemas[b]
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			s := mustOpen(t, schema, pgstore.Options{})
			schemas[s] = schema
			return s
		},
	})
}

// node returns a node of one batch, with a body of about 300 bytes written at seq.
func node(id string, seq uint64) *herald.Node {
	n := &herald.Node{ID: herald.NodeID(id), Type: "Item", Created: seq, Ver: seq,
		Attrs: herald.AttrsOf(map[string]herald.Value{"seq": herald.Int(int64(seq))})}
	big := herald.AttrsOf(map[string]herald.Value{"body": herald.String(strings.Repeat("b", 290) + id)})
	n.Body = herald.NewBody(seq, big, big.AppendBinary(nil), nil)
	return n
}

func put(seq uint64, ns ...*herald.Node) *store.Batch {
	cs := &herald.ChangeSet{Seq: seq, Tick: seq * 10, Time: time.Unix(int64(seq), 0), Actor: "test"}
	for _, n := range ns {
		cs.Changes = append(cs.Changes, herald.Change{Kind: herald.NodeChange, NodeAfter: n})
	}
	return &store.Batch{Changes: cs}
}

func commit(t testing.TB, s store.Backend, batches ...*store.Batch) {
	t.Helper()
	errs, err := s.Commit(context.Background(), batches)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("batch %d: %v", i, e)
		}
	}
}

func TestOpenValidatesSchemaName(t *testing.T) {
	dsn := testDSN(t)
	for _, bad := range []string{"Upper", "with-dash", "x;drop", strings.Repeat("a", 41)} {
		if s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{Schema: bad}); err == nil {
			_ = s.Close()
			t.Errorf("Open accepted the schema name %q", bad)
		}
	}
}

// TestOpenIsIdempotent opens one schema from several stores at once: the schema is
// created once, and every store sees the others' commits.
func TestOpenIsIdempotent(t *testing.T) {
	schema := newSchema(t)
	stores := make([]*pgstore.Store, 4)
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Go(func() {
			stores[i], errs[i] = pgstore.Open(context.Background(), testDSN(t), pgstore.Options{Schema: schema, Logger: quiet})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	commit(t, stores[0], put(1, node("a", 1)))
	if n, err := stores[3].GetNode(context.Background(), "a"); err != nil || n == nil {
		t.Fatalf("another store's GetNode = %v, %v", n, err)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	schema := newSchema(t)
	mustOpen(t, schema, pgstore.Options{}).Close()
	admin(t, testDSN(t), `UPDATE `+schema+`.schema_version SET version = 99`)
	if s, err := pgstore.Open(context.Background(), testDSN(t), pgstore.Options{Schema: schema, Logger: quiet}); err == nil {
		_ = s.Close()
		t.Fatal("Open accepted a schema of a newer version")
	} else if !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("Open: %v", err)
	}
}

// TestAnotherWriter commits through two unfenced stores in turn: each one's mirror of
// the position is stale after the other's commit, which the store notices inside the
// transaction and answers by checking the batches again under lock.
func TestAnotherWriter(t *testing.T) {
	schema := newSchema(t)
	a, b := mustOpen(t, schema, pgstore.Options{}), mustOpen(t, schema, pgstore.Options{})
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	commit(t, a, put(1, node("a1", 1)))
	commit(t, b, put(2, node("b2", 2)))
	errs, err := a.Commit(ctx, []*store.Batch{put(2, node("late", 2)), put(3, node("a3", 3))})
	if err != nil || !errors.Is(errs[0], store.ErrOutOfOrder) || errs[1] != nil {
		t.Fatalf("Commit after another writer = %v, %v", errs, err)
	}
	commit(t, b, put(4, node("b4", 4)))
	if m, _ := a.Meta(ctx); m.Seq != 4 {
		t.Fatalf("Meta = %+v", m)
	}
	cs, err := b.Changes(ctx, 0, 0)
	if err != nil || len(cs) != 4 {
		t.Fatalf("Changes = %d, %v", len(cs), err)
	}
	if n, _ := a.GetNode(ctx, "late"); n != nil {
		t.Fatal("the out-of-order batch was written")
	}
}

// TestAsyncOverlap starts each group before the one before it has committed, each one
// rewriting what the last wrote: an update, a deletion (of a node and of an auxiliary
// record), a re-creation. Whatever the server's timing, the outcome is that of the
// groups applied in order.
func TestAsyncOverlap(t *testing.T) {
	s := mustOpen(t, newSchema(t), pgstore.Options{})
	defer s.Close()
	ctx := context.Background()
	aux := func(b *store.Batch, v string) *store.Batch {
		op := store.AuxOp{Key: []byte("lease"), Once: true}
		if v != "" {
			op.Value = []byte(v)
		}
		b.Aux = append(b.Aux, op)
		return b
	}
	x1, x4 := node("x", 1), node("x", 4)
	x2 := x1.Clone()
	x2.Ver, x2.Attrs = 2, x2.Attrs.With("seq", herald.Int(2))
	change := func(seq uint64, before, after *herald.Node) *store.Batch {
		b := put(seq)
		b.Changes.Changes = []herald.Change{{Kind: herald.NodeChange, NodeBefore: before, NodeAfter: after}}
		return b
	}
	for round, groups := range [][]*store.Batch{
		{aux(put(1, x1), "1"), aux(change(2, x1, x2), "2"), aux(change(3, x2, nil), ""), aux(put(4, x4), "4")},
		{put(5, node("y", 5), node("z", 5)), change(6, node("y", 5), nil), change(7, node("z", 5), nil)},
	} {
		var waits []func() error
		for _, g := range groups {
			errs, wait, err := s.CommitAsync(ctx, []*store.Batch{g})
			if err != nil || errs[0] != nil {
				t.Fatalf("round %d: CommitAsync(%d) = %v, %v", round, g.Changes.Seq, errs, err)
			}
			waits = append(waits, wait)
		}
		for i, wait := range waits {
			if err := wait(); err != nil {
				t.Fatalf("round %d: wait %d: %v", round, i, err)
			}
		}
	}
	if n, err := s.GetNode(ctx, "x"); err != nil || n == nil || n.Attrs.Get("seq").AsInt() != 4 {
		t.Fatalf("x = %+v, %v", n, err)
	}
	for _, id := range []herald.NodeID{"y", "z"} {
		if n, err := s.GetNode(ctx, id); err != nil || n != nil {
			t.Fatalf("%s, deleted, = %+v, %v", id, n, err)
		}
	}
	var recs []string
	if err := s.LoadAux(ctx, func(k, v []byte) error { recs = append(recs, string(k)+"="+string(v)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(recs) != "[lease=4]" {
		t.Fatalf("auxiliary records %v", recs)
	}
	if m, _ := s.Meta(ctx); m.Seq != 7 {
		t.Fatalf("Meta = %+v", m)
	}
}

// TestSeqRange commits at the largest seq a bigint holds and refuses the next one.
func TestSeqRange(t *testing.T) {
	s := mustOpen(t, newSchema(t), pgstore.Options{})
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Commit(ctx, []*store.Batch{put(math.MaxInt64+1, node("x", 1))}); err == nil {
		t.Fatal("Commit accepted a seq beyond bigint")
	}
	commit(t, s, put(math.MaxInt64, node("x", 1)))
	if cs, err := s.Changes(ctx, math.MaxInt64-1, 0); err != nil || len(cs) != 1 {
		t.Fatalf("Changes = %v, %v", cs, err)
	}
	if cs, err := s.Changes(ctx, math.MaxUint64, 0); err != nil || len(cs) != 0 {
		t.Fatalf("Changes after the last seq = %v, %v", cs, err)
	}
	if err := s.Truncate(ctx, math.MaxUint64); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Meta(ctx); m.Horizon != math.MaxInt64 {
		t.Fatalf("Meta = %+v", m)
	}
}

// TestLargeGroups commits calls of thousands of batches, two at a time.
func TestLargeGroups(t *testing.T) {
	s := mustOpen(t, newSchema(t), pgstore.Options{})
	defer s.Close()
	ctx := context.Background()
	w := &workload{}
	var waits []func() error
	for range 3 {
		errs, wait, err := s.CommitAsync(ctx, w.next(3000))
		if err != nil || errs[0] != nil {
			t.Fatalf("CommitAsync = %v, %v", errs[0], err)
		}
		if waits = append(waits, wait); len(waits) == 2 {
			if err := waits[0](); err != nil {
				t.Fatal(err)
			}
			waits = waits[1:]
		}
	}
	if err := waits[0](); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	checkState(t, s.Schema(), w.seq)
}
