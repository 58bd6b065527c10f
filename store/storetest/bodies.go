package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store"
)

// This file covers what the graph keeps out of its records: node bodies (the large
// values of user nodes, written once and kept while the change log can reach them) and
// auxiliary records (services' state outside the graph).

// withBody returns a node with the inline attributes kv and a body holding big, as the
// engine builds it at commit seq.
func withBody(id, typ string, seq uint64, big string, kv ...any) *herald.Node {
	n := node(id, typ, kv...)
	battrs := herald.AttrsOf(map[string]herald.Value{"big": herald.String(big)})
	n.Body = herald.NewBody(seq, battrs, battrs.AppendBinary(nil), nil)
	n.Created, n.Ver = seq, seq
	return n
}

func bigText(tag string) string { return tag + strings.Repeat("x", 300) }

// bodyOf reads a node's body back through the node (as the engine does).
func bodyOf(t *testing.T, n *herald.Node) string {
	t.Helper()
	v, err := n.Attr("big")
	if err != nil {
		t.Fatalf("reading the body of %s: %v", n.ID, err)
	}
	return v.AsString()
}

func wantNoBody(t *testing.T, b store.Backend, id herald.NodeID, seq uint64) {
	t.Helper()
	if _, err := b.LoadBody(id, seq); !errors.Is(err, store.ErrNoBody) {
		t.Fatalf("LoadBody(%s, %d) = %v, want ErrNoBody", id, seq, err)
	}
}

func wantBody(t *testing.T, b store.Backend, id herald.NodeID, seq uint64, want string) {
	t.Helper()
	data, err := b.LoadBody(id, seq)
	if err != nil {
		t.Fatalf("LoadBody(%s, %d): %v", id, seq, err)
	}
	a, rest, err := herald.DecodeAttrs(data)
	if err != nil || len(rest) > 0 || a.Get("big").AsString() != want {
		t.Fatalf("LoadBody(%s, %d) = %v %v, want big=%q…", id, seq, a, err, want[:8])
	}
}

func (s *suite) testBodies(t *testing.T) {
	b := s.open(t)
	n1 := withBody("m", "Msg", 1, bigText("one"), "k", herald.Int(1))
	mustCommit(t, b, batch(1, putNode(n1)))

	// The stored node carries a reference to its body, which it reads back itself.
	check := func(b store.Backend, wantBig string, wantSeq uint64) {
		t.Helper()
		var got *herald.Node
		err := b.Load(ctx, func(r store.Record) error {
			if r.Node != nil && r.Node.ID == "m" {
				got = r.Node
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got == nil || got.Body == nil || got.Body.Seq != wantSeq || fmt.Sprint(got.Body.Names) != "[big]" || got.Attrs.Get("big").Kind() != herald.KindNull {
			t.Fatalf("loaded node %+v, want a body written at %d holding big", got, wantSeq)
		}
		if _, held := got.Body.Data(); held {
			t.Fatal("a loaded body is in memory; it should be read when needed")
		}
		if v := bodyOf(t, got); v != wantBig {
			t.Fatalf("body of the loaded node = %q…", v[:8])
		}
		if g, err := b.GetNode(ctx, "m"); err != nil || g == nil || bodyOf(t, g) != wantBig {
			t.Fatalf("GetNode: %v %v", g, err)
		}
	}
	check(b, bigText("one"), 1)
	cs := changes(t, b, 0, 0)
	if after := cs[0].Changes[0].NodeAfter; after.Body == nil || bodyOf(t, after) != bigText("one") {
		t.Fatal("the change log's image does not read its body")
	}

	// A write that leaves the body alone keeps it (and writes no new one).
	n2 := n1.Clone()
	n2.Attrs, n2.Ver = n2.Attrs.With("k", herald.Int(2)), 2
	mustCommit(t, b, batch(2, herald.Change{Kind: herald.NodeChange, NodeBefore: n1, NodeAfter: n2}))
	check(b, bigText("one"), 1)
	wantNoBody(t, b, "m", 2)

	// A new body replaces the old one, which stays readable while the log reaches it.
	n3 := withBody("m", "Msg", 3, bigText("three"), "k", herald.Int(3))
	n3.Created = 1
	mustCommit(t, b, batch(3, herald.Change{Kind: herald.NodeChange, NodeBefore: n2, NodeAfter: n3}))
	check(b, bigText("three"), 3)
	wantBody(t, b, "m", 1, bigText("one"))
	mustCommit(t, b, batch(4, delNode(n3)))
	wantBody(t, b, "m", 3, bigText("three"))
	if old := changes(t, b, 2, 1)[0].Changes[0].NodeBefore; bodyOf(t, old) != bigText("one") {
		t.Fatal("the replaced body is not readable through the change log")
	}
	if s.h.Reopen != nil {
		b = s.reopen(t, b)
	}

	// Truncating the log past the commit that let a body go removes the body.
	if err := b.Truncate(ctx, 2); err != nil {
		t.Fatal(err)
	}
	wantBody(t, b, "m", 1, bigText("one"))
	if err := b.Truncate(ctx, 3); err != nil {
		t.Fatal(err)
	}
	wantNoBody(t, b, "m", 1)
	wantBody(t, b, "m", 3, bigText("three"))
	if err := b.Truncate(ctx, 4); err != nil {
		t.Fatal(err)
	}
	wantNoBody(t, b, "m", 3)

	// A body whose encoding is not in memory cannot be stored.
	lost := withBody("x", "Msg", 5, bigText("lost"))
	lost.Body.Release()
	if _, err := b.Commit(ctx, []*store.Batch{batch(5, putNode(lost))}); err == nil {
		t.Fatal("Commit stored a node whose new body is not in memory")
	}
}

// testLoadBodies reads many bodies at once, in any order, with missing ones nil; and
// herald.HoldBodies makes the bodies of loaded nodes resident through it.
func (s *suite) testLoadBodies(t *testing.T) {
	b := s.open(t)
	var ids []herald.NodeID
	var seqs []uint64
	for i := range 40 {
		seq := uint64(i + 1)
		id := herald.NodeID(fmt.Sprintf("m%03d", i))
		mustCommit(t, b, batch(seq, putNode(withBody(string(id), "Msg", seq, bigText(fmt.Sprint(i))))))
		ids, seqs = append(ids, id), append(seqs, seq)
	}
	// Backwards, with a missing body (a wrong seq) and an unknown node in between.
	ask := []herald.NodeID{ids[30], "nope", ids[2], ids[39], ids[0]}
	askSeq := []uint64{seqs[30], 1, seqs[2] + 100, seqs[39], seqs[0]}
	datas, err := b.LoadBodies(ask, askSeq)
	if err != nil {
		t.Fatalf("LoadBodies: %v", err)
	}
	if len(datas) != len(ask) {
		t.Fatalf("LoadBodies returned %d bodies for %d", len(datas), len(ask))
	}
	for i, want := range []string{bigText("30"), "", "", bigText("39"), bigText("0")} {
		if want == "" {
			if datas[i] != nil {
				t.Errorf("body %d (%s at %d) = %q, want nil", i, ask[i], askSeq[i], datas[i])
			}
			continue
		}
		a, _, err := herald.DecodeAttrs(datas[i])
		if err != nil || a.Get("big").AsString() != want {
			t.Errorf("body %d (%s) = %v %v, want big=%q…", i, ask[i], a, err, want[:4])
		}
	}
	if out, err := b.LoadBodies(nil, nil); err != nil || len(out) != 0 {
		t.Errorf("LoadBodies of nothing = %v, %v", out, err)
	}

	// Nodes read back from the store hold references; HoldBodies makes them resident.
	var nodes []*herald.Node
	if err := b.Load(ctx, func(r store.Record) error {
		if r.Node != nil {
			nodes = append(nodes, r.Node)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	held := herald.HoldBodies(nodes)
	if len(held) != len(nodes) {
		t.Fatalf("HoldBodies held %d of %d bodies", len(held), len(nodes))
	}
	for _, n := range nodes {
		if _, ok := n.Body.Data(); !ok {
			t.Fatalf("the body of %s is not resident after HoldBodies", n.ID)
		}
	}
	for _, h := range held {
		h.Release()
	}
	if bodyOf(t, nodes[7]) != bigText("7") {
		t.Fatal("a released body does not read itself back")
	}
}

func aux(key, value string) store.AuxOp {
	op := store.AuxOp{Key: []byte(key)}
	if value != "" {
		op.Value = []byte(value)
	}
	return op
}

func auxRecords(t *testing.T, b store.Backend) string {
	t.Helper()
	var out []string
	err := b.LoadAux(ctx, func(k, v []byte) error {
		out = append(out, string(k)+"="+string(v))
		return nil
	})
	if err != nil {
		t.Fatalf("LoadAux: %v", err)
	}
	return strings.Join(out, " ")
}

func (s *suite) testAux(t *testing.T) {
	b := s.open(t)
	// Auxiliary records alone take no seq and leave the position and the log alone.
	mustCommit(t, b, &store.Batch{Aux: []store.AuxOp{aux("b", "2"), aux("a", "1"), aux("c", "3")}})
	if m := meta(t, b); m != (store.Meta{}) {
		t.Fatalf("Meta after auxiliary records = %+v", m)
	}
	mustCommit(t, b, batch(1, putNode(node("n", "T"))))
	b1 := batch(2, putNode(node("o", "T")))
	b1.Aux = []store.AuxOp{aux("b", "two"), aux("c", "")}
	mustCommit(t, b, b1, &store.Batch{Aux: []store.AuxOp{aux("d", "4"), {Key: []byte("a"), Once: true}}})
	wantSeqs(t, changes(t, b, 0, 0), 1, 2)
	if got := auxRecords(t, b); got != "b=two d=4" {
		t.Fatalf("auxiliary records %q, want %q", got, "b=two d=4")
	}
	// A batch skipped for its seq skips its records too.
	skipped := batch(2, putNode(node("p", "T")))
	skipped.Aux = []store.AuxOp{aux("e", "5")}
	wantErrs(t, commit(t, b, skipped), store.ErrOutOfOrder)
	if got := auxRecords(t, b); got != "b=two d=4" {
		t.Fatalf("a skipped batch wrote its records: %q", got)
	}
	if s.h.Reopen != nil {
		b = s.reopen(t, b)
		if got := auxRecords(t, b); got != "b=two d=4" {
			t.Fatalf("after reopening: %q", got)
		}
	}
	for _, bad := range []*store.Batch{{}, {Aux: []store.AuxOp{{Value: []byte("x")}}}} {
		if _, err := b.Commit(ctx, []*store.Batch{bad}); err == nil {
			t.Fatalf("Commit accepted the malformed batch %+v", bad)
		}
	}
	if got := auxRecords(t, b); !bytes.Equal([]byte(got), []byte("b=two d=4")) {
		t.Fatalf("a malformed call wrote: %q", got)
	}
}
