// Package storetest is the conformance suite every store.Backend must pass.
// A backend's tests call Run with a Harness that opens (and, for durable backends,
// reopens) an instance; the suite checks the semantics documented on store.Backend.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store"
)

// Harness tells the suite how to get a backend.
type Harness struct {
	// Open returns a new, empty backend. The suite closes it.
	Open func(t *testing.T) store.Backend
	// Reopen closes b and opens the same data again. Nil for backends that are not
	// durable; the durability subtests are then skipped.
	Reopen func(t *testing.T, b store.Backend) store.Backend
}

// Run runs the conformance suite against the backend h opens.
func Run(t *testing.T, h Harness) {
	s := &suite{h: h}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"EmptyMeta", s.testEmpty},
		{"CommitLoad", s.testCommitLoad},
		{"UpdateDelete", s.testUpdateDelete},
		{"Copies", s.testCopies},
		{"Order", s.testOrder},
		{"Preconditions", s.testPreconditions},
		{"PreconditionsWithinCall", s.testPreconditionsWithinCall},
		{"Malformed", s.testMalformed},
		{"Changes", s.testChanges},
		{"Truncate", s.testTruncate},
		{"GetNode", s.testGetNode},
		{"LoadStops", s.testLoadStops},
		{"Reopen", s.testReopen},
		{"Bodies", s.testBodies},
		{"LoadBodies", s.testLoadBodies},
		{"Aux", s.testAux},
		{"ConcurrentReaders", s.testConcurrentReaders},
		{"Closed", s.testClosed},
	} {
		t.Run(tc.name, tc.fn)
	}
}

type suite struct{ h Harness }

var ctx = context.Background()

func (s *suite) open(t *testing.T) store.Backend {
	t.Helper()
	b := s.h.Open(t)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func (s *suite) reopen(t *testing.T, b store.Backend) store.Backend {
	t.Helper()
	b = s.h.Reopen(t, b)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// Builders for change sets.

var epoch = time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)

func node(id, typ string, kv ...any) *herald.Node {
	return &herald.Node{ID: herald.NodeID(id), Type: typ, Attrs: attrs(kv)}
}

func edge(typ string, endpoints []herald.NodeID, kv ...any) *herald.Edge {
	return &herald.Edge{Type: typ, Endpoints: endpoints, Attrs: attrs(kv)}
}

func ids(s ...string) []herald.NodeID {
	out := make([]herald.NodeID, len(s))
	for i, x := range s {
		out[i] = herald.NodeID(x)
	}
	return out
}

func attrs(kv []any) herald.Attrs {
	a := herald.Attrs(nil)
	for i := 0; i < len(kv); i += 2 {
		a = a.With(kv[i].(string), kv[i+1].(herald.Value))
	}
	return a
}

func putNode(n *herald.Node) herald.Change {
	return herald.Change{Kind: herald.NodeChange, NodeAfter: n}
}
func delNode(n *herald.Node) herald.Change {
	return herald.Change{Kind: herald.NodeChange, NodeBefore: n}
}
func putEdge(e *herald.Edge) herald.Change {
	return herald.Change{Kind: herald.EdgeChange, EdgeAfter: e}
}
func delEdge(e *herald.Edge) herald.Change {
	return herald.Change{Kind: herald.EdgeChange, EdgeBefore: e}
}
func putType(d *herald.TypeDecl) herald.Change {
	return herald.Change{Kind: herald.TypeChange, TypeAfter: d}
}
func delType(d *herald.TypeDecl) herald.Change {
	return herald.Change{Kind: herald.TypeChange, TypeBefore: d}
}

func batch(seq uint64, changes ...herald.Change) *store.Batch {
	return &store.Batch{Changes: &herald.ChangeSet{
		Seq: seq, Tick: seq * 10, Time: epoch.Add(time.Duration(seq) * time.Second),
		Actor: herald.NodeID(fmt.Sprintf("actor%d", seq)), Changes: changes,
	}}
}

func expect(b *store.Batch, ps ...store.Precondition) *store.Batch {
	b.Expect = ps
	return b
}

func commit(t *testing.T, b store.Backend, batches ...*store.Batch) []error {
	t.Helper()
	errs, err := b.Commit(ctx, batches)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if len(errs) != len(batches) {
		t.Fatalf("Commit returned %d errors for %d batches", len(errs), len(batches))
	}
	return errs
}

func mustCommit(t *testing.T, b store.Backend, batches ...*store.Batch) {
	t.Helper()
	for i, err := range commit(t, b, batches...) {
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
}

func wantErrs(t *testing.T, got []error, want ...error) {
	t.Helper()
	for i := range want {
		if !errors.Is(got[i], want[i]) || (want[i] == nil && got[i] != nil) {
			t.Fatalf("batch errors = %v, want %v", got, want)
		}
	}
}

func meta(t *testing.T, b store.Backend) store.Meta {
	t.Helper()
	m, err := b.Meta(ctx)
	if err != nil {
		t.Fatalf("Meta: %v", err)
	}
	return m
}

// snapshot is the result of Load, keyed by encoding so that comparison is exact.
type snapshot struct {
	types, nodes, edges map[string]string
}

func load(t *testing.T, b store.Backend) snapshot {
	t.Helper()
	s := snapshot{map[string]string{}, map[string]string{}, map[string]string{}}
	phase := 0
	err := b.Load(ctx, func(r store.Record) error {
		set, p := 0, 0
		if r.Type != nil {
			set, p = set+1, 0
			s.types[r.Type.Name] = string(store.AppendTypeDecl(nil, r.Type))
		}
		if r.Node != nil {
			set, p = set+1, 1
			s.nodes[string(r.Node.ID)] = string(store.AppendNode(nil, r.Node))
		}
		if r.Edge != nil {
			set, p = set+1, 2
			s.edges[string(r.Edge.Key())] = string(store.AppendEdge(nil, r.Edge))
		}
		if set != 1 {
			return fmt.Errorf("record %+v does not have exactly one field set", r)
		}
		if p < phase {
			return fmt.Errorf("record %+v after a later kind: want types, then nodes, then edges", r)
		}
		phase = p
		return nil
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s
}

func (s snapshot) equal(o snapshot) bool {
	eq := func(a, b map[string]string) bool {
		if len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if w, ok := b[k]; !ok || w != v {
				return false
			}
		}
		return true
	}
	return eq(s.types, o.types) && eq(s.nodes, o.nodes) && eq(s.edges, o.edges)
}

func (s snapshot) String() string {
	return fmt.Sprintf("%d types %v, %d nodes %v, %d edges", len(s.types), keys(s.types), len(s.nodes), keys(s.nodes), len(s.edges))
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func (s snapshot) hasNode(n *herald.Node) bool {
	return s.nodes[string(n.ID)] == string(store.AppendNode(nil, n))
}

func (s snapshot) hasEdge(e *herald.Edge) bool {
	return s.edges[string(e.Key())] == string(store.AppendEdge(nil, e))
}

func (s snapshot) hasType(d *herald.TypeDecl) bool {
	return s.types[d.Name] == string(store.AppendTypeDecl(nil, d))
}

func changes(t *testing.T, b store.Backend, after uint64, limit int) []*herald.ChangeSet {
	t.Helper()
	cs, err := b.Changes(ctx, after, limit)
	if err != nil {
		t.Fatalf("Changes(%d, %d): %v", after, limit, err)
	}
	return cs
}

func seqs(cs []*herald.ChangeSet) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = c.Seq
	}
	return out
}

func wantSeqs(t *testing.T, cs []*herald.ChangeSet, want ...uint64) {
	t.Helper()
	got := seqs(cs)
	if fmt.Sprint(got) != fmt.Sprint(want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("change sets %v, want %v", got, want)
	}
}

func sameChangeSet(a, b *herald.ChangeSet) bool {
	return bytes.Equal(store.AppendChangeSet(nil, a), store.AppendChangeSet(nil, b))
}

// Fixtures.

func jobDecl() *herald.TypeDecl {
	def := herald.String("pending")
	return &herald.TypeDecl{Kind: herald.NodeDecl, Name: "Job", Attrs: []herald.AttrDecl{
		{Name: "status", Type: herald.KindString, Default: &def},
		{Name: "priority", Type: herald.KindInt, Required: true},
		{Name: "note", Type: herald.KindString, Optional: true},
		{Name: "any", Any: true},
	}}
}

func inboxDecl() *herald.TypeDecl {
	return &herald.TypeDecl{Kind: herald.EdgeDecl, Name: "inbox", Sealed: true, Endpoints: []herald.EndpointDecl{
		{Name: "recipient", Type: "Actor"}, {Name: "message", Type: ""},
	}}
}

// Subtests.

func (s *suite) testEmpty(t *testing.T) {
	b := s.open(t)
	if m := meta(t, b); m != (store.Meta{}) {
		t.Fatalf("Meta of an empty store = %+v", m)
	}
	if snap := load(t, b); !snap.equal(snapshot{}) {
		t.Fatalf("Load of an empty store: %v", snap)
	}
	wantSeqs(t, changes(t, b, 0, 0))
	if n, err := b.GetNode(ctx, "nope"); n != nil || err != nil {
		t.Fatalf("GetNode = %v, %v", n, err)
	}
}

func (s *suite) testCommitLoad(t *testing.T) {
	b := s.open(t)
	job, inbox := jobDecl(), inboxDecl()
	a := node("a", "Actor", "name", herald.String("ann"))
	m := node("m", "Job", "priority", herald.Int(3), "tags", herald.List(herald.String("x"), herald.Float(1.5)),
		"at", herald.Timestamp(epoch), "ttl", herald.Duration(time.Minute), "ok", herald.Bool(true))
	e := edge("inbox", ids("a", "m"), "read", herald.Bool(false))
	self := edge("likes", ids("a"))
	mustCommit(t, b,
		batch(1, putType(job), putType(inbox)),
		batch(2, putNode(a), putNode(m), putEdge(e), putEdge(self)),
	)
	if got := meta(t, b); got != (store.Meta{Seq: 2, Tick: 20}) {
		t.Fatalf("Meta = %+v", got)
	}
	snap := load(t, b)
	if len(snap.types) != 2 || len(snap.nodes) != 2 || len(snap.edges) != 2 {
		t.Fatalf("Load: %v", snap)
	}
	if !snap.hasType(job) || !snap.hasType(inbox) || !snap.hasNode(a) || !snap.hasNode(m) || !snap.hasEdge(e) || !snap.hasEdge(self) {
		t.Fatalf("Load returned other entities than committed: %v", snap)
	}
}

func (s *suite) testUpdateDelete(t *testing.T) {
	b := s.open(t)
	job := jobDecl()
	n1, n2 := node("n1", "Job", "priority", herald.Int(1)), node("n2", "Job")
	e := edge("next", ids("n1", "n2"), "w", herald.Int(1))
	mustCommit(t, b, batch(1, putType(job), putNode(n1), putNode(n2), putEdge(e)))

	n1b := node("n1", "Job", "priority", herald.Int(2), "status", herald.String("done"))
	e2 := edge("next", ids("n1", "n2"), "w", herald.Int(2))
	job2 := jobDecl()
	job2.Sealed = true
	mustCommit(t, b, batch(2,
		herald.Change{Kind: herald.NodeChange, NodeBefore: n1, NodeAfter: n1b},
		herald.Change{Kind: herald.EdgeChange, EdgeBefore: e, EdgeAfter: e2},
		herald.Change{Kind: herald.TypeChange, TypeBefore: job, TypeAfter: job2},
	))
	snap := load(t, b)
	if !snap.hasNode(n1b) || !snap.hasNode(n2) || !snap.hasEdge(e2) || !snap.hasType(job2) || len(snap.nodes) != 2 {
		t.Fatalf("after update: %v", snap)
	}

	// A nil after image deletes; a later change in the same set may create again.
	n3 := node("n3", "Job")
	mustCommit(t, b, batch(3, delEdge(e2), delNode(n2), delType(job2), putNode(n3), delNode(n3), putNode(n2)))
	snap = load(t, b)
	if len(snap.types) != 0 || len(snap.edges) != 0 || len(snap.nodes) != 2 || !snap.hasNode(n1b) || !snap.hasNode(n2) {
		t.Fatalf("after delete: %v", snap)
	}

	// An after image under another key replaces the before image's entity.
	moved := node("n9", "Job")
	mustCommit(t, b, batch(4, herald.Change{Kind: herald.NodeChange, NodeBefore: n2, NodeAfter: moved}))
	snap = load(t, b)
	if len(snap.nodes) != 2 || !snap.hasNode(moved) || !snap.hasNode(n1b) {
		t.Fatalf("after re-key: %v", snap)
	}

	// Deleting what does not exist is not an error.
	mustCommit(t, b, batch(5, delNode(node("ghost", "X")), delEdge(edge("none", ids("x")))))
	if got := meta(t, b).Seq; got != 5 {
		t.Fatalf("Meta.Seq = %d, want 5", got)
	}
}

func (s *suite) testCopies(t *testing.T) {
	b := s.open(t)
	n := node("n", "T", "x", herald.Int(1))
	bt := batch(1, putNode(n))
	mustCommit(t, b, bt)
	n.Attrs = n.Attrs.With("x", herald.Int(99))
	n.Type = "Changed"
	bt.Changes.Actor = "someone else"

	got, err := b.GetNode(ctx, "n")
	if err != nil || got == nil || got.Type != "T" || got.Attrs.Get("x").AsInt() != 1 {
		t.Fatalf("GetNode after caller mutation = %+v, %v", got, err)
	}
	got.Attrs = got.Attrs.With("x", herald.Int(7))
	if again, _ := b.GetNode(ctx, "n"); again.Attrs.Get("x").AsInt() != 1 {
		t.Fatal("GetNode returned stored state, not a copy")
	}
	cs := changes(t, b, 0, 0)
	if len(cs) != 1 || cs[0].Actor != "actor1" || cs[0].Changes[0].NodeAfter.Attrs.Get("x").AsInt() != 1 {
		t.Fatalf("Changes after caller mutation = %+v", cs)
	}
	cs[0].Changes[0].NodeAfter.Attrs = cs[0].Changes[0].NodeAfter.Attrs.With("x", herald.Int(5))
	if again := changes(t, b, 0, 0); again[0].Changes[0].NodeAfter.Attrs.Get("x").AsInt() != 1 {
		t.Fatal("Changes returned stored state, not a copy")
	}
	_ = b.Load(ctx, func(r store.Record) error {
		r.Node.Attrs = r.Node.Attrs.With("x", herald.Int(6))
		return nil
	})
	if again, _ := b.GetNode(ctx, "n"); again.Attrs.Get("x").AsInt() != 1 {
		t.Fatal("Load returned stored state, not a copy")
	}
}

func (s *suite) testOrder(t *testing.T) {
	b := s.open(t)
	x := func(i int) herald.Change { return putNode(node(fmt.Sprintf("n%d", i), "T")) }
	mustCommit(t, b, batch(5, x(5)))
	wantErrs(t, commit(t, b, batch(5, x(50)), batch(3, x(3)), batch(0, x(0))),
		store.ErrOutOfOrder, store.ErrOutOfOrder, store.ErrOutOfOrder)
	if m := meta(t, b); m.Seq != 5 || m.Tick != 50 {
		t.Fatalf("Meta after rejected batches = %+v", m)
	}
	// Within one call every batch must follow the previous applied one; gaps are fine.
	wantErrs(t, commit(t, b, batch(7, x(7)), batch(6, x(6)), batch(7, x(70)), batch(9, x(9))),
		nil, store.ErrOutOfOrder, store.ErrOutOfOrder, nil)
	if m := meta(t, b); m.Seq != 9 || m.Tick != 90 {
		t.Fatalf("Meta = %+v, want seq 9 tick 90", m)
	}
	snap := load(t, b)
	for _, id := range []string{"n5", "n7", "n9"} {
		if _, ok := snap.nodes[id]; !ok {
			t.Fatalf("node %s of an applied batch missing: %v", id, snap)
		}
	}
	for _, id := range []string{"n50", "n3", "n0", "n6", "n70"} {
		if _, ok := snap.nodes[id]; ok {
			t.Fatalf("node %s of a rejected batch present", id)
		}
	}
	wantSeqs(t, changes(t, b, 0, 0), 5, 7, 9)

	// An empty call and a call of only rejected batches change nothing.
	if errs, err := b.Commit(ctx, nil); err != nil || len(errs) != 0 {
		t.Fatalf("empty Commit = %v, %v", errs, err)
	}
	wantErrs(t, commit(t, b, batch(9, x(90))), store.ErrOutOfOrder)
	if m := meta(t, b); m.Seq != 9 {
		t.Fatalf("Meta = %+v", m)
	}
}

func (s *suite) testPreconditions(t *testing.T) {
	b := s.open(t)
	n := node("n", "Job", "status", herald.String("ready"), "v", herald.Int(1))
	e := edge("owns", ids("a", "n"), "w", herald.Float(0.5))
	mustCommit(t, b, batch(1, putNode(n), putEdge(e)))

	pre := func(p store.Precondition) bool {
		t.Helper()
		seq := meta(t, b).Seq + 1
		probe := node(fmt.Sprintf("probe%d", seq), "P")
		errs := commit(t, b, expect(batch(seq, putNode(probe)), p))
		if errs[0] != nil && !errors.Is(errs[0], store.ErrPrecondition) {
			t.Fatalf("precondition %+v: %v", p, errs[0])
		}
		got, err := b.GetNode(ctx, probe.ID)
		if err != nil {
			t.Fatal(err)
		}
		if (errs[0] == nil) != (got != nil) {
			t.Fatalf("precondition %+v: err %v but node present = %v", p, errs[0], got != nil)
		}
		return errs[0] == nil
	}
	for _, tc := range []struct {
		p    store.Precondition
		want bool
	}{
		{store.Precondition{Node: "n", Present: true}, true},
		{store.Precondition{Node: "n", Present: false}, false},
		{store.Precondition{Node: "x", Present: false}, true},
		{store.Precondition{Node: "x", Present: true}, false},
		{store.Precondition{Node: "n", Present: true, Attr: "status", Value: herald.String("ready")}, true},
		{store.Precondition{Node: "n", Present: true, Attr: "status", Value: herald.String("leased")}, false},
		{store.Precondition{Node: "n", Present: true, Attr: "v", Value: herald.Int(1)}, true},
		{store.Precondition{Node: "n", Present: true, Attr: "v", Value: herald.Float(1)}, false}, // same kind required
		{store.Precondition{Node: "n", Present: true, Attr: "missing", Value: herald.Null}, true},
		{store.Precondition{Node: "n", Present: true, Attr: "missing", Value: herald.Int(0)}, false},
		{store.Precondition{Node: "x", Present: true, Attr: "v", Value: herald.Null}, false},
		{store.Precondition{Edge: e.Key(), Present: true}, true},
		{store.Precondition{Edge: e.Key(), Present: false}, false},
		{store.Precondition{Edge: herald.MakeEdgeKey("owns", ids("n", "a")), Present: false}, true},
		{store.Precondition{Edge: e.Key(), Present: true, Attr: "w", Value: herald.Float(0.5)}, true},
		{store.Precondition{Edge: e.Key(), Present: true, Attr: "w", Value: herald.Float(0.25)}, false},
	} {
		if got := pre(tc.p); got != tc.want {
			t.Errorf("precondition %+v held = %v, want %v", tc.p, got, tc.want)
		}
	}

	// All preconditions of a batch must hold.
	seq := meta(t, b).Seq + 1
	wantErrs(t, commit(t, b, expect(batch(seq, putNode(node("both", "P"))),
		store.Precondition{Node: "n", Present: true},
		store.Precondition{Node: "x", Present: true},
	)), store.ErrPrecondition)

	// A failed batch leaves no trace: no state, no log entry, no position.
	before := meta(t, b)
	if got, _ := b.GetNode(ctx, "both"); got != nil {
		t.Fatal("node of a failed batch present")
	}
	if cs := changes(t, b, before.Seq-1, 0); len(cs) != 1 || cs[0].Seq != before.Seq {
		t.Fatalf("log after failed batch: %v", seqs(cs))
	}
	// The skipped seq is free for the next batch.
	mustCommit(t, b, batch(seq, putNode(node("reuse", "P"))))
}

func (s *suite) testPreconditionsWithinCall(t *testing.T) {
	b := s.open(t)
	mustCommit(t, b, batch(1, putNode(node("q", "Queue"))))
	n := node("m", "Msg", "state", herald.String("ready"))
	leased := node("m", "Msg", "state", herald.String("leased"))
	errs := commit(t, b,
		// 2 creates m if absent.
		expect(batch(2, putNode(n)), store.Precondition{Node: "m", Present: false}),
		// 3 sees m from batch 2 and leases it.
		expect(batch(3, herald.Change{Kind: herald.NodeChange, NodeBefore: n, NodeAfter: leased}),
			store.Precondition{Node: "m", Present: true, Attr: "state", Value: herald.String("ready")}),
		// 4 tries to lease it again and fails: it sees batch 3.
		expect(batch(4, putNode(node("dup", "X"))),
			store.Precondition{Node: "m", Present: true, Attr: "state", Value: herald.String("ready")}),
		// 5 does not depend on m and is applied although 4 failed.
		expect(batch(5, putNode(node("other", "X"))), store.Precondition{Node: "q", Present: true}),
		// 6 tries to create m again and fails.
		expect(batch(6, putNode(node("m", "Other"))), store.Precondition{Node: "m", Present: false}),
		// 7 deletes m, and 8 sees it gone.
		batch(7, delNode(leased)),
		expect(batch(8, putNode(node("gone", "X"))), store.Precondition{Node: "m", Present: false}),
	)
	wantErrs(t, errs, nil, nil, store.ErrPrecondition, nil, store.ErrPrecondition, nil, nil)
	if m := meta(t, b); m.Seq != 8 || m.Tick != 80 {
		t.Fatalf("Meta = %+v", m)
	}
	snap := load(t, b)
	if _, ok := snap.nodes["m"]; ok {
		t.Fatal("m present after batch 7 deleted it")
	}
	for _, id := range []string{"q", "other", "gone"} {
		if _, ok := snap.nodes[id]; !ok {
			t.Fatalf("node %s missing: %v", id, snap)
		}
	}
	if _, ok := snap.nodes["dup"]; ok {
		t.Fatal("node of failed batch 4 present")
	}
	wantSeqs(t, changes(t, b, 0, 0), 1, 2, 3, 5, 7, 8)

	// An edge precondition sees an edge created earlier in the call.
	e := edge("in", ids("q", "other"))
	wantErrs(t, commit(t, b,
		batch(9, putEdge(e)),
		expect(batch(10, putNode(node("after-edge", "X"))), store.Precondition{Edge: e.Key(), Present: true}),
		expect(batch(11, putEdge(e)), store.Precondition{Edge: e.Key(), Present: false}),
	), nil, nil, store.ErrPrecondition)
}

func (s *suite) testMalformed(t *testing.T) {
	b := s.open(t)
	for _, bad := range [][]*store.Batch{
		{batch(1, putNode(node("a", "T"))), {Changes: nil}},
		{batch(1, putNode(node("a", "T"))), nil},
		{batch(1, herald.Change{Kind: herald.NodeChange})},
		{batch(1, herald.Change{Kind: 0, NodeAfter: node("a", "T")})},
		{batch(1, herald.Change{Kind: herald.EdgeChange, NodeAfter: node("a", "T")})},
		{expect(batch(1, putNode(node("a", "T"))), store.Precondition{Present: true})},
		{expect(batch(1, putNode(node("a", "T"))), store.Precondition{Node: "a", Edge: "e"})},
	} {
		if _, err := b.Commit(ctx, bad); err == nil {
			t.Fatalf("malformed call %v accepted", bad)
		}
	}
	if m := meta(t, b); m != (store.Meta{}) {
		t.Fatalf("malformed calls changed Meta: %+v", m)
	}
	if n, _ := b.GetNode(ctx, "a"); n != nil {
		t.Fatal("malformed call applied a batch")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Commit(cancelled, []*store.Batch{batch(1, putNode(node("a", "T")))}); err == nil {
		t.Fatal("Commit with a cancelled context succeeded")
	}
	if n, _ := b.GetNode(ctx, "a"); n != nil {
		t.Fatal("Commit with a cancelled context applied its batch")
	}
}

func (s *suite) testChanges(t *testing.T) {
	b := s.open(t)
	var want []*herald.ChangeSet
	var seq uint64
	for call := 1; call <= 4; call++ {
		var batches []*store.Batch
		for range call {
			seq++
			n := node(fmt.Sprintf("n%d", seq), "T", "i", herald.Int(int64(seq)))
			bt := batch(seq, putNode(n))
			if seq > 1 {
				prev := node(fmt.Sprintf("n%d", seq-1), "T", "i", herald.Int(int64(seq-1)))
				bt.Changes.Changes = append(bt.Changes.Changes,
					herald.Change{Kind: herald.NodeChange, NodeBefore: prev, NodeAfter: node(string(prev.ID), "T", "i", herald.Int(0))})
			}
			batches = append(batches, bt)
			want = append(want, bt.Changes)
		}
		mustCommit(t, b, batches...)
	}
	all := changes(t, b, 0, 0)
	wantSeqs(t, all, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	for i := range all {
		if !sameChangeSet(all[i], want[i]) || !all[i].Time.Equal(want[i].Time) {
			t.Fatalf("change set %d = %+v, want %+v", i, all[i], want[i])
		}
	}
	wantSeqs(t, changes(t, b, 0, -1), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	// Paging.
	var paged []uint64
	for after := uint64(0); ; {
		page := changes(t, b, after, 3)
		if len(page) > 3 {
			t.Fatalf("page of %d with limit 3", len(page))
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, seqs(page)...)
		after = page[len(page)-1].Seq
	}
	if fmt.Sprint(paged) != fmt.Sprint(seqs(all)) {
		t.Fatalf("paged %v, want %v", paged, seqs(all))
	}
	wantSeqs(t, changes(t, b, 7, 2), 8, 9)
	wantSeqs(t, changes(t, b, 10, 5))
	wantSeqs(t, changes(t, b, 1000, 5))
	wantSeqs(t, changes(t, b, ^uint64(0), 0))
}

func (s *suite) testTruncate(t *testing.T) {
	b := s.open(t)
	for seq := uint64(1); seq <= 10; seq++ {
		mustCommit(t, b, batch(seq, putNode(node(fmt.Sprintf("n%d", seq), "T"))))
	}
	before := load(t, b)
	if err := b.Truncate(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if m := meta(t, b); m != (store.Meta{Seq: 10, Tick: 100, Horizon: 4}) {
		t.Fatalf("Meta = %+v", m)
	}
	for _, after := range []uint64{0, 3} {
		if _, err := b.Changes(ctx, after, 0); !errors.Is(err, store.ErrCompacted) {
			t.Fatalf("Changes(%d) = %v, want ErrCompacted", after, err)
		}
	}
	wantSeqs(t, changes(t, b, 4, 0), 5, 6, 7, 8, 9, 10)
	wantSeqs(t, changes(t, b, 6, 2), 7, 8)
	if after := load(t, b); !after.equal(before) {
		t.Fatal("Truncate changed the stored state")
	}

	// Idempotent, and never lowers the horizon.
	for _, upTo := range []uint64{4, 2, 0} {
		if err := b.Truncate(ctx, upTo); err != nil {
			t.Fatal(err)
		}
		if h := meta(t, b).Horizon; h != 4 {
			t.Fatalf("Truncate(%d): horizon %d, want 4", upTo, h)
		}
	}
	wantSeqs(t, changes(t, b, 4, 0), 5, 6, 7, 8, 9, 10)

	// Capped at the last committed seq: a caught-up reader keeps working.
	if err := b.Truncate(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	if m := meta(t, b); m.Horizon != 10 {
		t.Fatalf("Truncate past the end: Meta %+v, want horizon 10", m)
	}
	wantSeqs(t, changes(t, b, 10, 0))
	if _, err := b.Changes(ctx, 9, 0); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("Changes(9) = %v, want ErrCompacted", err)
	}
	mustCommit(t, b, batch(11, putNode(node("n11", "T"))))
	wantSeqs(t, changes(t, b, 10, 0), 11)
}

func (s *suite) testGetNode(t *testing.T) {
	b := s.open(t)
	n := node("g", "T", "s", herald.String("x"), "l", herald.List(herald.Int(1), herald.Null))
	mustCommit(t, b, batch(1, putNode(n), putEdge(edge("g", ids("g")))))
	got, err := b.GetNode(ctx, "g")
	if err != nil || got == nil || !bytes.Equal(store.AppendNode(nil, got), store.AppendNode(nil, n)) {
		t.Fatalf("GetNode = %+v, %v", got, err)
	}
	// Edges and types do not answer node lookups.
	mustCommit(t, b, batch(2, putType(&herald.TypeDecl{Kind: herald.NodeDecl, Name: "t"})))
	for _, id := range []herald.NodeID{"t", "", "G", "g\x00"} {
		if got, err := b.GetNode(ctx, id); got != nil || err != nil {
			t.Fatalf("GetNode(%q) = %v, %v", id, got, err)
		}
	}
	mustCommit(t, b, batch(3, delNode(n)))
	if got, err := b.GetNode(ctx, "g"); got != nil || err != nil {
		t.Fatalf("GetNode after delete = %v, %v", got, err)
	}
}

func (s *suite) testLoadStops(t *testing.T) {
	b := s.open(t)
	mustCommit(t, b, batch(1, putType(jobDecl()), putNode(node("a", "T")), putNode(node("b", "T"))))
	stop := errors.New("stop")
	calls := 0
	err := b.Load(ctx, func(store.Record) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 2 {
		t.Fatalf("Load = %v after %d calls, want the callback's error after 2", err, calls)
	}
}

func (s *suite) testReopen(t *testing.T) {
	if s.h.Reopen == nil {
		t.Skip("backend is not durable")
	}
	b := s.open(t)
	b = s.reopen(t, b)
	if m := meta(t, b); m != (store.Meta{}) {
		t.Fatalf("Meta of a reopened empty store = %+v", m)
	}
	e := edge("inbox", ids("a", "m"), "x", herald.Int(1))
	mustCommit(t, b,
		batch(1, putType(jobDecl()), putType(inboxDecl()), putNode(node("a", "Actor")), putNode(node("m", "Job", "priority", herald.Int(1)))),
		batch(2, putEdge(e)),
	)
	mustCommit(t, b, batch(4, putNode(node("z", "Job"))), batch(5, delNode(node("z", "Job"))))
	if err := b.Truncate(ctx, 2); err != nil {
		t.Fatal(err)
	}
	wantMeta, wantSnap, wantLog := meta(t, b), load(t, b), changes(t, b, 2, 0)

	b = s.reopen(t, b)
	if m := meta(t, b); m != wantMeta || m != (store.Meta{Seq: 5, Tick: 50, Horizon: 2}) {
		t.Fatalf("Meta after reopen = %+v, want %+v", m, wantMeta)
	}
	if snap := load(t, b); !snap.equal(wantSnap) {
		t.Fatalf("Load after reopen: %v, want %v", snap, wantSnap)
	}
	gotLog := changes(t, b, 2, 0)
	if len(gotLog) != len(wantLog) {
		t.Fatalf("Changes after reopen: %v, want %v", seqs(gotLog), seqs(wantLog))
	}
	for i := range gotLog {
		if !sameChangeSet(gotLog[i], wantLog[i]) {
			t.Fatalf("change set %d differs after reopen", gotLog[i].Seq)
		}
	}
	if _, err := b.Changes(ctx, 1, 0); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("Changes(1) after reopen = %v, want ErrCompacted", err)
	}
	wantErrs(t, commit(t, b, batch(5, putNode(node("late", "X"))), batch(6, putNode(node("new", "X")))),
		store.ErrOutOfOrder, nil)
	b = s.reopen(t, b)
	if got, _ := b.GetNode(ctx, "new"); got == nil {
		t.Fatal("node committed after the first reopen missing after the second")
	}
	if got, _ := b.GetNode(ctx, "late"); got != nil {
		t.Fatal("node of an out-of-order batch present after reopen")
	}
}

// testConcurrentReaders commits while readers load, page through the log and read
// nodes, and checks that every read is a consistent snapshot. Run it with -race.
func (s *suite) testConcurrentReaders(t *testing.T) {
	b := s.open(t)
	const commits = 60
	counter := func(i int) *herald.Node { return node("counter", "C", "n", herald.Int(int64(i))) }
	mustCommit(t, b, batch(1, putNode(counter(0))))

	done := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	reader := func(fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := fn(); err != nil {
					report(err)
					return
				}
			}
		}()
	}
	// Load: the counter always equals the number of item nodes.
	reader(func() error {
		items, n := 0, int64(-1)
		err := b.Load(ctx, func(r store.Record) error {
			if r.Node != nil && r.Node.Type == "Item" {
				items++
			}
			if r.Node != nil && r.Node.ID == "counter" {
				n = r.Node.Attrs.Get("n").AsInt()
			}
			return nil
		})
		if err != nil {
			return err
		}
		if int64(items) != n {
			return fmt.Errorf("Load saw %d items but counter %d", items, n)
		}
		return nil
	})
	// Changes: contiguous, ordered, never past Meta read afterwards.
	reader(func() error {
		cs, err := b.Changes(ctx, 0, 0)
		if err != nil {
			return err
		}
		m, err := b.Meta(ctx)
		if err != nil {
			return err
		}
		for i, c := range cs {
			if c.Seq != uint64(i+1) {
				return fmt.Errorf("Changes returned seq %d at index %d", c.Seq, i)
			}
		}
		if len(cs) > 0 && cs[len(cs)-1].Seq > m.Seq {
			return fmt.Errorf("Changes returned seq %d beyond Meta.Seq %d", cs[len(cs)-1].Seq, m.Seq)
		}
		return nil
	})
	// GetNode and Meta: monotonic.
	reader(func() error {
		last := int64(-1)
		var lastSeq uint64
		for range 20 {
			m, err := b.Meta(ctx)
			if err != nil {
				return err
			}
			if m.Seq < lastSeq {
				return fmt.Errorf("Meta.Seq went back from %d to %d", lastSeq, m.Seq)
			}
			lastSeq = m.Seq
			n, err := b.GetNode(ctx, "counter")
			if err != nil {
				return err
			}
			if v := n.Attrs.Get("n").AsInt(); v < last {
				return fmt.Errorf("counter went back from %d to %d", last, v)
			} else {
				last = v
			}
		}
		return nil
	})

	seq := uint64(1)
	for i := 1; i <= commits; {
		// Alternate single batches and groups.
		var group []*store.Batch
		for range 1 + i%3 {
			seq++
			group = append(group, batch(seq,
				putNode(node(fmt.Sprintf("item%d", i), "Item")),
				herald.Change{Kind: herald.NodeChange, NodeBefore: counter(i - 1), NodeAfter: counter(i)},
			))
			i++
		}
		mustCommit(t, b, group...)
	}
	close(done)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	if n, _ := b.GetNode(ctx, "counter"); n == nil || n.Attrs.Get("n").AsInt() < commits {
		t.Fatalf("counter = %v", n)
	}
}

func (s *suite) testClosed(t *testing.T) {
	b := s.open(t)
	mustCommit(t, b, batch(1, putNode(node("a", "T"))))
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	_, err := b.Meta(ctx)
	check("Meta", err)
	check("Load", b.Load(ctx, func(store.Record) error { return nil }))
	_, err = b.GetNode(ctx, "a")
	check("GetNode", err)
	_, err = b.Commit(ctx, []*store.Batch{batch(2, putNode(node("b", "T")))})
	check("Commit", err)
	_, err = b.Changes(ctx, 0, 0)
	check("Changes", err)
	check("Truncate", b.Truncate(ctx, 1))
}
