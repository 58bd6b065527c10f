package standing_test

import (
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/standing"
)

func compile(t testing.TB, src string, mode option.Mode) *standing.Query {
	t.Helper()
	stmt, file, err := standing.Parse(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := standing.Compile(standing.Source{Stmt: stmt, File: file, Mode: mode, Clock: clock.Real()})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestIndexTouch: a change reaches the queries of its types (before and after), of the
// value an equality condition requires (old or new), of the nodes they read by id, and
// of untyped endpoints; a query taken out is reached no more.
func TestIndexTouch(t *testing.T) {
	x := standing.NewIndex[string]()
	queries := map[string]*standing.Query{
		"type":  compile(t, `WATCH t: Task RETURN t`, option.Watch),
		"value": compile(t, `WATCH t: Task WHERE t.state = "done" RETURN t`, option.Watch),
		"ref":   compile(t, `WATCH j: Job WHERE j.n > #cfg.min RETURN j`, option.Watch),
		"any":   compile(t, `WATCH owns(o, x) RETURN x`, option.Watch),
		"job":   compile(t, `WATCH j: Job [mode: consume] RETURN j`, option.Consume),
	}
	for k, q := range queries {
		x.Add(q, k)
	}
	touched := func(ch herald.Change) map[string]bool {
		got := map[string]bool{}
		x.Touch(ch, func(k string) { got[k] = true })
		return got
	}
	node := func(id, typ string, attrs map[string]herald.Value) *herald.Node {
		return &herald.Node{ID: herald.NodeID(id), Type: typ, Attrs: herald.AttrsOf(attrs)}
	}
	for _, tc := range []struct {
		name string
		ch   herald.Change
		want string
	}{
		{"a task", herald.Change{Kind: herald.NodeChange, NodeAfter: node("a", "Task", nil)}, "any type"},
		{"a task done", herald.Change{Kind: herald.NodeChange, NodeBefore: node("a", "Task", nil), NodeAfter: node("a", "Task", map[string]herald.Value{"state": herald.String("done")})}, "any type value"},
		{"a job becomes a task", herald.Change{Kind: herald.NodeChange, NodeBefore: node("b", "Job", nil), NodeAfter: node("b", "Task", nil)}, "any job ref type"},
		{"the config", herald.Change{Kind: herald.NodeChange, NodeAfter: node("cfg", "Config", nil)}, "any ref"},
		{"an edge", herald.Change{Kind: herald.EdgeChange, EdgeAfter: &herald.Edge{Type: "owns", Endpoints: []herald.NodeID{"a", "b"}}}, "any"},
		{"another edge", herald.Change{Kind: herald.EdgeChange, EdgeAfter: &herald.Edge{Type: "likes", Endpoints: []herald.NodeID{"a", "b"}}}, ""},
	} {
		got := touched(tc.ch)
		var names []string
		for _, k := range []string{"any", "job", "ref", "type", "value"} {
			if got[k] {
				names = append(names, k)
			}
		}
		if s := join(names); s != tc.want {
			t.Errorf("%s: touched %q, want %q", tc.name, s, tc.want)
		}
	}
	x.Remove(queries["any"], "any")
	if got := touched(herald.Change{Kind: herald.NodeChange, NodeAfter: node("z", "Other", nil)}); len(got) != 0 {
		t.Errorf("after its removal: touched %v", got)
	}
}

func join(xs []string) string {
	out := ""
	for i, s := range xs {
		if i > 0 {
			out += " "
		}
		out += s
	}
	return out
}

// BenchmarkIndexTouchMiss is the index's share of a commit that concerns no query: what
// every commit of a busy server costs the watch dispatcher, however many watches it has.
func BenchmarkIndexTouchMiss(b *testing.B) {
	x := standing.NewIndex[int]()
	q := compile(b, `WATCH t: Task WHERE t.n > 1 RETURN t`, option.Watch)
	for i := range 1000 {
		x.Add(q, i)
	}
	ch := herald.Change{Kind: herald.NodeChange, NodeBefore: &herald.Node{ID: "a", Type: "Other"}, NodeAfter: &herald.Node{ID: "a", Type: "Other"}}
	visit := func(int) { b.Fatal("visited") }
	for b.Loop() {
		x.Touch(ch, visit)
	}
}
