package pgstore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/pgstore"
)

// workload writes batches whose contents follow from their seq, so that a check needs
// only the position to know the whole stored state. Batch s writes nodes n<s>-0 to
// n<s>-<s%3>, each with a body, sets the counter to s, and from s = 11 on deletes
// n<s-10>-0, letting its body go.
type workload struct{ seq uint64 }

const deleteLag = 10

func nodeID(seq uint64, k int) string { return fmt.Sprintf("n%d-%d", seq, k) }

func (w *workload) next(n int) []*store.Batch {
	group := make([]*store.Batch, n)
	for i := range group {
		w.seq++
		s := w.seq
		var ns []*herald.Node
		for k := 0; k <= int(s%3); k++ {
			ns = append(ns, node(nodeID(s, k), s))
		}
		counter := &herald.Node{ID: "counter", Type: "Counter", Attrs: herald.AttrsOf(map[string]herald.Value{"seq": herald.Int(int64(s))})}
		b := put(s, append(ns, counter)...)
		if s > deleteLag {
			b.Changes.Changes = append(b.Changes.Changes, herald.Change{Kind: herald.NodeChange, NodeBefore: node(nodeID(s-deleteLag, 0), s-deleteLag)})
		}
		group[i] = b
	}
	return group
}

// checkState checks that the store at schema holds exactly what the batches up to its
// position wrote, that the position is at least acked, and that its log runs from its
// horizon to its position without a gap. It returns the position.
func checkState(t *testing.T, schema string, acked uint64) store.Meta {
	t.Helper()
	return checkStateAt(t, testDSN(t), schema, acked)
}

// checkStateAt is checkState on the server at dsn.
func checkStateAt(t *testing.T, dsn, schema string, acked uint64) store.Meta {
	t.Helper()
	ctx := context.Background()
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{Schema: schema, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := s.Meta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Seq < acked {
		t.Fatalf("the store is at seq %d, but seq %d was acknowledged", m.Seq, acked)
	}
	cs, err := s.Changes(ctx, m.Horizon, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for seq := m.Horizon + 1; seq <= m.Seq; seq++ {
		want = append(want, seq)
	}
	got := make([]uint64, len(cs))
	for i, c := range cs {
		got[i] = c.Seq
	}
	if !slices.Equal(got, want) {
		t.Fatalf("change log %v, want %d to %d", got, m.Horizon+1, m.Seq)
	}
	nodes := map[herald.NodeID]*herald.Node{}
	err = s.Load(ctx, func(r store.Record) error {
		if r.Node == nil {
			return fmt.Errorf("unexpected record %+v", r)
		}
		nodes[r.Node.ID] = r.Node
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkNodes(t, s, nodes, m.Seq)
	return m
}

// checkNodes compares the loaded nodes with those batches 1 to last leave, and reads
// their bodies.
func checkNodes(t *testing.T, s *pgstore.Store, nodes map[herald.NodeID]*herald.Node, last uint64) {
	t.Helper()
	if c := nodes["counter"]; last > 0 && (c == nil || c.Attrs.Get("seq").AsInt() != int64(last)) {
		t.Fatalf("counter = %v, want seq %d", c, last)
	}
	var ids []herald.NodeID
	var seqs []uint64
	for seq := uint64(1); seq <= last; seq++ {
		for k := 0; k <= int(seq%3); k++ {
			id := herald.NodeID(nodeID(seq, k))
			n := nodes[id]
			if k == 0 && seq+deleteLag <= last {
				if n != nil {
					t.Fatalf("node %s, deleted by batch %d, is there", id, seq+deleteLag)
				}
				continue
			}
			if n == nil || n.Attrs.Get("seq").AsInt() != int64(seq) || n.Body == nil || n.Body.Seq != seq {
				t.Fatalf("node %s of batch %d = %+v", id, seq, n)
			}
			ids, seqs = append(ids, id), append(seqs, seq)
		}
	}
	if len(nodes) != len(ids)+min(1, int(last)) {
		for id, n := range nodes {
			if n.Attrs.Get("seq").AsInt() > int64(last) {
				t.Fatalf("node %s of batch %d, after the stored position %d, is visible", id, n.Attrs.Get("seq").AsInt(), last)
			}
		}
		t.Fatalf("%d nodes stored, want %d", len(nodes), len(ids)+1)
	}
	bodies, err := s.LoadBodies(ids, seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range bodies {
		if want := node(string(ids[i]), seqs[i]); !bytes.Contains(b, []byte(want.ID)) {
			t.Fatalf("body of %s = %q", ids[i], b)
		}
	}
}

const childEnv = "HERALD_PGSTORE_CRASH_SCHEMA"

// TestCrashChild is the process TestCrash kills: it commits groups from the stored
// position on, up to three in flight (CommitAsync), and prints "ack <seq>" once each
// group is durable, until it is killed.
func TestCrashChild(t *testing.T) {
	schema := os.Getenv(childEnv)
	if schema == "" {
		t.Skip("run by TestCrash")
	}
	ctx := context.Background()
	s := mustOpen(t, schema, pgstore.Options{})
	m, err := s.Meta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := &workload{seq: m.Seq}
	rng := rand.New(rand.NewPCG(m.Seq, 1))
	type inflight struct {
		last uint64
		wait func() error
	}
	var q []inflight
	for {
		group := w.next(1 + rng.IntN(8))
		errs, wait, err := s.CommitAsync(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				t.Fatal(e)
			}
		}
		q = append(q, inflight{w.seq, wait})
		if len(q) == 3 {
			if err := q[0].wait(); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("ack %d\n", q[0].last)
			q = q[1:]
		}
	}
}

// TestCrash kills a committing process (SIGKILL) between its commits and their answers,
// several times, and checks after each kill that every acknowledged batch is stored
// whole, that nothing of a batch after the stored position is visible, and that the log
// has no gap. Between kills it truncates the log, which removes bodies of deleted nodes.
func TestCrash(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	schema := newSchema(t)
	mustOpen(t, schema, pgstore.Options{}).Close()
	var acked uint64
	for round := range 4 {
		acked = crashRound(t, schema, 10+round*20, acked)
		m := checkState(t, schema, acked)
		t.Logf("round %d: acknowledged %d, stored %d", round, acked, m.Seq)
		if m.Seq > 5 {
			s := mustOpen(t, schema, pgstore.Options{})
			if err := s.Truncate(context.Background(), m.Seq-5); err != nil {
				t.Fatal(err)
			}
			gone := m.Seq - 5 - deleteLag // deleted by a truncated batch
			if _, err := s.LoadBody(herald.NodeID(nodeID(gone, 0)), gone); gone >= 1 && !errors.Is(err, store.ErrNoBody) {
				t.Fatalf("body of %s after truncation = %v, want ErrNoBody", nodeID(gone, 0), err)
			}
			_ = s.Close()
		}
	}
}

// crashRound runs the child until it has acknowledged acks groups, kills it, and
// returns the last seq it acknowledged.
func crashRound(t *testing.T, schema string, acks int, acked uint64) uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+schema, "HERALD_TEST_PG_DSN="+testDSN(t), "PGAPPNAME="+childApp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := 0
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		seq, ok := strings.CutPrefix(sc.Text(), "ack ")
		if !ok {
			lines = append(lines, sc.Text())
			continue
		}
		if acked, err = strconv.ParseUint(seq, 10, 64); err != nil {
			t.Fatal(err)
		}
		if n++; n == acks {
			_ = cmd.Process.Kill() // the acknowledgements already written are read on
		}
	}
	err = cmd.Wait()
	if n < acks {
		t.Fatalf("the child stopped after %d acknowledgements: %v\n%s\n%s", n, err, strings.Join(lines, "\n"), stderr.Bytes())
	}
	waitBackends(t, childApp)
	return acked
}

const childApp = "herald_crash_child"

// waitBackends waits until no server process serves a connection named app: a killed
// client's transaction that reached the server whole still commits after it died.
func waitBackends(t *testing.T, app string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			t.Fatalf("waiting for the killed child's connections to end: %v", err)
		}
		if n == 0 {
			return
		}
		<-tick.C
	}
}

// TestServerRestart restarts the PostgreSQL server (one of the test's own, see
// privateCluster) while a store commits with two groups in flight, once cleanly and
// once as a crash: commits fail with errors (none hangs, none is acknowledged unless
// stored) and succeed again once the server is back.
func TestServerRestart(t *testing.T) {
	for _, mode := range []string{"fast", "immediate"} {
		t.Run(mode, func(t *testing.T) {
			dsn, restart := privateCluster(t)
			const schema = "herald_restart"
			s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{Schema: schema, Logger: quiet, Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			r := &restarter{t: t, s: s, w: &workload{}, restarted: make(chan error, 1)}
			for r.okAfter < 30 {
				r.step()
				if r.ok >= 30 && !r.started {
					r.started = true
					go func() { r.restarted <- restart(mode) }()
				}
			}
			r.drain()
			t.Logf("%d commits acknowledged, %d failed during the restart", r.ok, r.failed)
			m := checkStateAt(t, dsn, schema, r.acked)
			if m.Seq != r.acked {
				t.Fatalf("stored seq %d, last acknowledged %d", m.Seq, r.acked)
			}
		})
	}
}

// restarter commits for TestServerRestart, two groups in flight.
type restarter struct {
	t                   *testing.T
	s                   *pgstore.Store
	w                   *workload
	inflight            []restartCall
	acked               uint64
	ok, failed, okAfter int
	rewind, started     bool
	restarted           chan error // nil once the restart is done
}

type restartCall struct {
	last  uint64
	start time.Time
	wait  func() error
}

// step starts a group (after going back to the stored position if a commit failed)
// and, with two in flight, waits for the older one.
func (r *restarter) step() {
	ctx := context.Background()
	if r.rewind {
		r.drain()
		// A failed commit may or may not have been stored: go on from the position.
		m, err := r.s.Meta(ctx)
		if err != nil {
			<-time.After(100 * time.Millisecond)
			return
		}
		r.w, r.rewind = &workload{seq: m.Seq}, false
	}
	start := time.Now()
	group := r.w.next(1 + r.ok%5)
	errs, wait, err := r.s.CommitAsync(ctx, group)
	if err != nil {
		r.fail(err)
		return
	}
	for _, e := range errs {
		if e != nil {
			r.t.Fatal(e)
		}
	}
	if r.inflight = append(r.inflight, restartCall{r.w.seq, start, wait}); len(r.inflight) == 2 {
		r.finish()
	}
}

// finish waits for the oldest commit in flight.
func (r *restarter) finish() {
	c := r.inflight[0]
	r.inflight = r.inflight[1:]
	err := c.wait()
	if d := time.Since(c.start); d > 30*time.Second {
		r.t.Fatalf("a commit took %v", d)
	}
	if err != nil {
		r.fail(err)
		return
	}
	r.acked, r.ok = c.last, r.ok+1
	select {
	case err := <-r.restarted:
		if err != nil {
			r.t.Fatalf("restarting the server: %v", err)
		}
		r.restarted = nil
	default:
	}
	if r.restarted == nil {
		r.okAfter++
	}
}

func (r *restarter) drain() {
	for len(r.inflight) > 0 {
		r.finish()
	}
}

func (r *restarter) fail(err error) {
	if r.failed++; r.failed == 1 {
		r.t.Logf("first failure, after %d commits: %v", r.ok, err)
	}
	r.rewind = true
}
