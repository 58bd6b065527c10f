package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
)

func TestPublish(t *testing.T) {
	e := bodyEngine(t, vfs.NewMem())
	defer e.Close(context.Background())
	ctx := context.Background()
	exec1(t, e, `node Job { p: Int [required], body: String? }`, nil)
	exec1(t, e, `constraint small: j: Job => j.p < 100`, nil)
	exec1(t, e, `SPAWN #taken: Job { p = 1 }`, nil)
	msgs := []engine.Publication{
		{Type: "Job", Attrs: map[string]herald.Value{"p": herald.Int(1), "body": herald.String(strings.Repeat("x", 500))}},
		{Type: "Job", Attrs: map[string]herald.Value{"p": herald.String("no")}},        // wrong kind
		{Type: "Job", Attrs: map[string]herald.Value{"p": herald.Int(2)}},              // ok
		{Type: "Job", ID: "taken", Attrs: map[string]herald.Value{"p": herald.Int(3)}}, // id in use
		{Type: "_Watch"}, // system type
		{Type: "Job", Attrs: map[string]herald.Value{"p": herald.Int(4)}}, // ok
		{Type: "Job", Attrs: map[string]herald.Value{"q": herald.Int(4)}}, // undeclared attribute
	}
	out, err := e.Publish(ctx, "", msgs)
	if err != nil {
		t.Fatal(err)
	}
	wantCodes := []herald.Code{"", herald.CodeTypeMismatch, "", herald.CodeDuplicateID, herald.CodeSealedType, "", herald.CodeUnknownAttribute}
	for i, want := range wantCodes {
		got := herald.Code("")
		if out[i].Err != nil {
			got = herald.CodeOf(out[i].Err)
		}
		if got != want || (want == "") != (out[i].ID != "") {
			t.Errorf("publication %d: %+v, want code %q", i, out[i], want)
		}
	}
	// The accepted ones are one commit, in publication order.
	if s, _ := e.Position(); s != out[0].Seq || out[2].Seq != s || out[5].Seq != s {
		t.Fatalf("publish answered seqs %d %d %d, position %d: want one commit", out[0].Seq, out[2].Seq, out[5].Seq, s)
	}
	res := exec1(t, e, `MATCH j: Job WHERE j.id != "taken" RETURN j.id, j.p`, nil)
	if len(res.Rows) != 3 || res.Rows[0][0].AsString() != string(out[0].ID) || res.Rows[1][1].AsInt() != 2 || res.Rows[2][1].AsInt() != 4 {
		t.Fatalf("published nodes in order: %v", res.Rows)
	}

	// A constraint one publication breaks fails that one only.
	out, err = e.Publish(ctx, "", []engine.Publication{
		{Type: "Job", Attrs: map[string]herald.Value{"p": herald.Int(5)}},
		{Type: "Job", Attrs: map[string]herald.Value{"p": herald.Int(500)}},
		{Type: "Job", Attrs: map[string]herald.Value{"p": herald.Int(6)}},
	})
	if err != nil || out[0].Err != nil || herald.CodeOf(out[1].Err) != herald.CodeConstraint || out[2].Err != nil {
		t.Fatalf("publish with a constraint violation: %+v %v", out, err)
	}

	// A publication without attributes still gets the declared defaults; one with a
	// null drops it.
	exec1(t, e, `node Note { kind: String = "plain", tag: String? }`, nil)
	out, err = e.Publish(ctx, "", []engine.Publication{{Type: "Note"}, {Type: "Note", Attrs: map[string]herald.Value{"tag": herald.Null}}})
	if err != nil || out[0].Err != nil || out[1].Err != nil {
		t.Fatalf("publish of notes: %+v %v", out, err)
	}
	res = exec1(t, e, `MATCH n: Note RETURN n.kind, n.tag`, nil)
	if len(res.Rows) != 2 || res.Rows[0][0].AsString() != "plain" || !res.Rows[1][1].IsNull() {
		t.Fatalf("notes: %v", res.Rows)
	}
}

func TestPrepared(t *testing.T) {
	e := bodyEngine(t, vfs.NewMem())
	defer e.Close(context.Background())
	ctx := context.Background()
	p, err := e.Prepare(`SPAWN j: Job { p = $p, q = $q }; MATCH j: Job WHERE j.p = $p RETURN COUNT(j)`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Params, ",") != "p,q" {
		t.Fatalf("params %v", p.Params)
	}
	if again, _ := e.Prepare(p.Query); again.Name != p.Name {
		t.Fatalf("the same text prepared twice: %s and %s", p.Name, again.Name)
	}
	for i := 1; i <= 3; i++ {
		got, err := e.Lookup(p.Name)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := e.ExecPrepared(ctx, "", got, map[string]herald.Value{"p": herald.Int(7), "q": herald.Int(int64(i))})
		if err != nil {
			t.Fatal(err)
		}
		if n := resp.Results[1].Rows[0][0].AsInt(); n != int64(i) {
			t.Fatalf("run %d counted %d", i, n)
		}
	}
	if _, err := e.ExecPrepared(ctx, "", p, map[string]herald.Value{"p": herald.Int(1)}); herald.CodeOf(err) != herald.CodeMissingParameter {
		t.Fatalf("missing parameter: %v", err)
	}
	if _, err := e.Prepare(`MATCH j: RETURN j`); herald.CodeOf(err) != herald.CodeSyntax {
		t.Fatalf("preparing bad text: %v", err)
	}
	if !e.Unprepare(p.Name) || e.Unprepare(p.Name) {
		t.Fatal("Unprepare should drop the statement once")
	}
	if _, err := e.Lookup(p.Name); herald.CodeOf(err) != herald.CodeUnknownStatement {
		t.Fatalf("lookup after Unprepare: %v", err)
	}
}
