package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/internal/clock"
)

// bodyEngine opens an engine on pebble over fs that keeps no body in memory once it is
// durable, so every read of a large value goes to the store.
func bodyEngine(t *testing.T, fs vfs.FS) *engine.Engine {
	t.Helper()
	e, err := engine.Open(context.Background(), engine.Config{Backend: pebbleOn(t, fs), Logger: quiet, BodyCache: -1,
		Clock: clock.NewManual(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func exec1(t *testing.T, e *engine.Engine, q string, params map[string]herald.Value) engine.Result {
	t.Helper()
	resp, err := e.Exec(context.Background(), "", q, params)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return resp.Results[len(resp.Results)-1]
}

func msgNode(t *testing.T, e *engine.Engine, id herald.NodeID) *herald.Node {
	t.Helper()
	var n *herald.Node
	_ = e.View(func(tx *graph.Tx, _, _ uint64) error { n = tx.Node(id); return nil })
	if n == nil {
		t.Fatalf("node %s is missing", id)
	}
	return n
}

// Large values live in a node's body, out of memory once durable; every read sees them.
func TestBodies(t *testing.T) {
	fs := vfs.NewMem()
	e := bodyEngine(t, fs)
	long1, long2 := strings.Repeat("a", 300), strings.Repeat("b", 200)
	exec1(t, e, `node Msg { body: String, k: Int, extra: String? }`, nil)
	exec1(t, e, `SPAWN #m: Msg { body = $b, k = 1 }`, map[string]herald.Value{"b": herald.String(long1)})

	n := msgNode(t, e, "m")
	if n.Body == nil || n.Attrs.Has("body") || !n.Attrs.Has("k") {
		t.Fatalf("node %+v: want k in memory and body in its body", n)
	}
	if _, held := n.Body.Data(); held {
		t.Fatal("the body is still in memory with a body cache of nothing")
	}
	firstBody := n.Body.Seq
	want := func(q, wantText string) {
		t.Helper()
		res := exec1(t, e, q, map[string]herald.Value{"b": herald.String(long1)})
		if got := herald.Map(res.Columns, res.Rows[0]).String(); !strings.Contains(got, wantText) {
			t.Fatalf("%s = %s, want it to contain %.40s", q, got, wantText)
		}
	}
	want(`MATCH m: Msg WHERE m.body = $b RETURN m.body, m.k`, `"`+long1+`", m.k: 1`)
	want(`MATCH m: Msg WHERE m.k = 1 OR $b = "" RETURN m`, `body: "`+long1+`"`)

	// Writes that leave the body alone keep it; a write to it moves it.
	exec1(t, e, `SET #m.k = 2`, nil)
	if n := msgNode(t, e, "m"); n.Body == nil || n.Body.Seq != firstBody {
		t.Fatalf("SET of a small attribute replaced the body: %+v", n)
	}
	exec1(t, e, `SET #m.body = "short"`, nil)
	if n := msgNode(t, e, "m"); n.Body != nil || n.Attrs.Get("body").AsString() != "short" {
		t.Fatalf("a short value stays in memory: %+v", n)
	}
	exec1(t, e, `SET #m.body = $b`, map[string]herald.Value{"b": herald.String(long2)})
	exec1(t, e, `SET #m.extra = $b`, map[string]herald.Value{"b": herald.String(long1)})
	if n := msgNode(t, e, "m"); n.Body == nil || strings.Join(n.Body.Names, ",") != "body,extra" {
		t.Fatalf("two large values share one body: %+v", n)
	}

	// After a restart only the small values are loaded; the body is read on demand.
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e = bodyEngine(t, fs)
	defer e.Close(context.Background())
	if n := msgNode(t, e, "m"); n.Body == nil || n.Attrs.Get("k").AsInt() != 2 {
		t.Fatalf("after restart: %+v", n)
	}
	res := exec1(t, e, `MATCH m: Msg RETURN m.body AS b, m.extra AS x`, nil)
	if res.Rows[0][0].AsString() != long2 || res.Rows[0][1].AsString() != long1 {
		t.Fatalf("after restart: %v", res.Rows)
	}
	exec1(t, e, `KILL #m`, nil)
	if res := exec1(t, e, `MATCH m: Msg RETURN COUNT(m)`, nil); res.Rows[0][0].AsInt() != 0 {
		t.Fatalf("COUNT after KILL = %v", res.Rows)
	}
}

// Auxiliary records commit with (or without) graph writes, take no seq alone, and
// survive a restart.
func TestAuxRecords(t *testing.T) {
	fs := vfs.NewMem()
	e := bodyEngine(t, fs)
	ctx := context.Background()
	seq0, _ := e.Position()
	seq, _, err := e.System(ctx, func(tx *engine.SysTx) error {
		tx.PutAux([]byte("lease/a"), []byte("1"))
		tx.PutAux([]byte("lease/b"), []byte("2"))
		return nil
	})
	if err != nil || seq != seq0 {
		t.Fatalf("auxiliary records alone: seq %d (was %d), %v", seq, seq0, err)
	}
	if _, _, err := e.System(ctx, func(tx *engine.SysTx) error {
		tx.PutNode(&herald.Node{ID: "_x", Type: "_X"})
		tx.DeleteAux([]byte("lease/a"), false)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	e = bodyEngine(t, fs)
	defer e.Close(ctx)
	var got []string
	if err := e.LoadAux(func(k, v []byte) error { got = append(got, string(k)+"="+string(v)); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "lease/b=2" {
		t.Fatalf("auxiliary records after restart: %v", got)
	}
	if s, _ := e.Position(); s != seq0+1 {
		t.Fatalf("position %d, want %d: only the graph write took a seq", s, seq0+1)
	}
}
