package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/store/memstore"
)

// accessSchema is the graph the authorization tests run against: Other nodes a
// principal may read and write, Secret nodes it may not, owns(Other, Secret) declared
// with typed endpoints, and tag undeclared.
const accessSchema = `
node Other { v: String }
node Secret { v: String }
edge owns(o: Other, s: Secret)
SPAWN #o1: Other { v = "o" }
SPAWN #s1: Secret { v = "hidden" }
LINK owns(#o1, #s1)
LINK tag(#o1, #s1)
`

// state is every node and edge of the graph, printed: what "nothing changed" compares.
func state(t *testing.T, e *engine.Engine) string {
	t.Helper()
	r := exec(t, e, `MATCH o: Other RETURN o ORDER BY o.id
MATCH s: Secret RETURN s ORDER BY s.id
MATCH owns(a, b) RETURN a.id, b.id
MATCH tag(a, b) RETURN a.id, b.id`)
	return fmt.Sprint(r.Results)
}

// TestAccessMatrix runs each statement form as a principal with the grants it needs
// and as one without them: the first is answered, the second refused with the code
// given, and a refused statement changes nothing.
func TestAccessMatrix(t *testing.T) {
	narrow := &herald.Principal{Name: "narrow", Grants: []string{"read:Other", "write:Other", "read:owns", "read:tag", "write:owns"}}
	for _, tc := range []struct {
		name  string
		query string
		allow []string     // grants that let it run (with narrow's)
		code  herald.Code  // narrow's refusal
		check func(string) // what the allowed run returned, printed (optional)
	}{
		{name: "match type", query: `MATCH s: Secret RETURN s.v`, allow: []string{"read:Secret"}, code: herald.CodePermissionDenied},
		{name: "count fast path", query: `MATCH s: Secret RETURN COUNT(s)`, allow: []string{"read:Secret"}, code: herald.CodePermissionDenied},
		{name: "declared endpoint", query: `MATCH owns(_, s) RETURN s`, allow: []string{"read:Secret"}, code: herald.CodePermissionDenied},
		{name: "declared endpoint in where", query: `MATCH o: Other, owns(o, s) WHERE s.v = "hidden" RETURN o.id`, allow: []string{"read:Secret"}, code: herald.CodePermissionDenied},
		{name: "undeclared endpoint", query: `MATCH tag(_, s) RETURN s.v`, allow: []string{"read:*"}, code: herald.CodePermissionDenied},
		{name: "ref in return", query: `MATCH o: Other RETURN #s1.v`, allow: []string{"read:Secret"}, code: herald.CodePermissionDenied},
		{name: "ref read into a write", query: `MATCH o: Other SET o.v = #s1.v`, allow: []string{"read:Secret"}, code: herald.CodePermissionDenied},
		{name: "ref read into a spawn", query: `SPAWN x: Other { v = #s1.v }`, allow: []string{"read:Secret"}, code: herald.CodePermissionDenied},
		{name: "write", query: `SPAWN x: Secret { v = "new" }`, allow: []string{"write:Secret"}, code: herald.CodePermissionDenied},
		{name: "set by id", query: `SET #s1.v = "changed"`, allow: []string{"write:Secret"}, code: herald.CodePermissionDenied},
		{name: "kill by id", query: `KILL #s1`, allow: []string{"write:Secret", "write:tag"}, code: herald.CodePermissionDenied},
		{name: "kill takes edges along", query: `KILL #o1`, allow: []string{"write:tag"}, code: herald.CodePermissionDenied},
		{name: "link", query: `LINK tag(#o1, #o1)`, allow: []string{"write:tag"}, code: herald.CodePermissionDenied},
		{name: "compound set through endpoint", query: `MATCH owns(o, s) SET s.v = "x"`, allow: []string{"read:Secret", "write:Secret"}, code: herald.CodePermissionDenied},
		{name: "schema", query: `node Fresh { a: Int }`, allow: []string{"admin"}, code: herald.CodePermissionDenied},
		{name: "tick", query: `TICK`, allow: []string{"admin"}, code: herald.CodePermissionDenied},
		{name: "redrive", query: `REDRIVE "dl1"`, allow: []string{"admin"}, code: herald.CodePermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := openEngine(t, memstore.New(), engine.Config{})
			exec(t, e, accessSchema)
			before := state(t, e)
			ctx := herald.WithPrincipal(context.Background(), narrow)
			_, err := e.Exec(ctx, "", tc.query, nil)
			if herald.CodeOf(err) != tc.code {
				t.Fatalf("narrow: err = %v, want %s", err, tc.code)
			}
			if after := state(t, e); after != before {
				t.Fatalf("a refused statement changed the graph:\nbefore %s\nafter  %s", before, after)
			}
			wide := &herald.Principal{Name: "wide", Grants: append(append([]string(nil), narrow.Grants...), tc.allow...)}
			_, err = e.Exec(herald.WithPrincipal(context.Background(), wide), "", tc.query, nil)
			if c := herald.CodeOf(err); c == herald.CodePermissionDenied || c == herald.CodeWatchPatternDenied {
				t.Fatalf("with %v: refused: %v", tc.allow, err)
			}
		})
	}
}

// TestDeadLetterGrants: purging and redriving dead letters is an admin's; a principal
// that may read and write every type is still refused, before anything runs.
func TestDeadLetterGrants(t *testing.T) {
	e := openEngine(t, memstore.New(), engine.Config{})
	exec(t, e, accessSchema)
	wide := herald.WithPrincipal(context.Background(), &herald.Principal{Name: "wide", Grants: []string{"read:*", "write:*"}})
	admin := herald.WithPrincipal(context.Background(), &herald.Principal{Name: "root", Grants: []string{"admin"}})
	// A letter as the consume engine writes one, to purge by id.
	if _, _, err := e.System(context.Background(), func(tx *engine.SysTx) error {
		tx.PutNode(&herald.Node{ID: "dl1", Type: "_DeadLetter", Attrs: herald.AttrsOf(map[string]herald.Value{"failure_reason": herald.String("no_retry")})})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`KILL #dl1`,
		`MATCH d: _DeadLetter KILL d`,
		`MATCH d: _DeadLetter WHERE d.created_at < now() - 1h REDRIVE d`,
	} {
		if _, err := e.Exec(wide, "", q, nil); herald.CodeOf(err) != herald.CodePermissionDenied {
			t.Errorf("%s as wide: err = %v, want E4013", q, err)
		}
		if _, err := e.Exec(admin, "", q, nil); err != nil {
			t.Errorf("%s as admin: %v", q, err)
		}
	}
	if r := exec(t, e, `MATCH d: _DeadLetter RETURN COUNT(d)`); fmt.Sprint(r.Results[0].Rows) != "[[0]]" {
		t.Fatalf("the letter was not purged: %v", r.Results[0].Rows)
	}
}

// TestAccessInTransaction: inside BEGIN … COMMIT a refused statement rolls the whole
// transaction back, and a node named by id is judged by its type in the transaction.
func TestAccessInTransaction(t *testing.T) {
	e := openEngine(t, memstore.New(), engine.Config{})
	exec(t, e, accessSchema)
	before := state(t, e)
	p := &herald.Principal{Name: "p", Grants: []string{"read:Other", "write:Other"}}
	ctx := herald.WithPrincipal(context.Background(), p)
	sid, err := e.OpenSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Exec(ctx, sid, `BEGIN; SPAWN a: Other { v = "in tx" }; MATCH o: Other RETURN #s1.v`, nil)
	if herald.CodeOf(err) != herald.CodePermissionDenied {
		t.Fatalf("err = %v, want E4013", err)
	}
	if after := state(t, e); after != before {
		t.Fatalf("the transaction committed:\n%s\n%s", before, after)
	}
}

// TestAccessOf names what each form needs, in order, as the grant check sees it.
func TestAccessOf(t *testing.T) {
	e := openEngine(t, memstore.New(), engine.Config{})
	exec(t, e, accessSchema)
	for _, tc := range []struct{ query, want string }{
		{`MATCH o: Other, owns(o, s) RETURN s.v`, "read:Other read:owns read:Secret"},
		{`MATCH tag(a, b) RETURN a`, "read:tag read:*"},
		{`MATCH tag(a, b), b: Other RETURN a`, "read:Other read:tag read:*"},
		{`MATCH o: Other RETURN #s1.v, #nope.v`, "read:Other read:Secret"},
		{`WATCH o: Other WHERE o.v = #s1.v RETURN o`, "watch:Other watch:Secret"},
		{`WATCH o: Other RETURN #later.v`, "watch:Other watch:*"},
		{`WATCH j: Other [mode: consume, dead_letter: #s1] RETURN j`, "consume:Other consume:Secret"},
		{`WATCH o: Other ON MATCH DO SET o.v = "x" SPAWN n: Secret {} KILL #s1`, "watch:Other write:Other write:Secret"},
		{`SET #s1.v = "x"`, "write:Secret"},
		{`LINK tag(#o1, #s1) { w = #s1.v }`, "write:tag read:Secret"},
		{`SPAWN x: Other {} RETURNING x`, "write:Other"},
		{`MATCH s: Secret RETURN COUNT(s)`, "read:Secret"},
		{`node T {}`, "admin"},
		{`MATCH d: _DeadLetter WHERE d.queue = "emails" REDRIVE d`, "admin read:_DeadLetter"},
		{`MATCH d: _DeadLetter WHERE d.failure_reason = "no_retry" KILL d`, "admin read:_DeadLetter"},
		{`MATCH w: _Watch KILL w`, "read:_Watch write:_Watch"},
	} {
		script, _, err := parser.ParseScript(tc.query)
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		var acc engine.Access
		_ = e.View(func(tx *graph.Tx, _, _ uint64) error {
			acc = engine.AccessOf(script.Stmts[0], engine.AccessEnv{Graph: tx})
			return nil
		})
		var got []string
		if acc.Admin {
			got = append(got, "admin")
		}
		for _, n := range acc.Needs {
			got = append(got, n.Action+":"+n.Type)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: needs %q, want %q", tc.query, strings.Join(got, " "), tc.want)
		}
	}
}
