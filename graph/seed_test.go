package graph

import (
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/parser"
)

// TestSeedOnly checks which seeded plans bind nothing but their seed: only those may
// skip running the plan, so a plan with any test beyond the seed's type must say no,
// and for those that say yes every node of the type must be a binding.
func TestSeedOnly(t *testing.T) {
	g := New()
	tx := g.Begin()
	tx.PutNode(testNode("m1", "Msg", "x", herald.Int(1)))
	tx.PutNode(testNode("m2", "Msg"))
	tx.PutNode(testNode("o1", "Other"))
	tx.PutEdge(testEdge("Rel", "m1", "o1"))
	for _, tc := range []struct {
		pattern, where string
		want           bool
	}{
		{"m: Msg", "", true},
		{"m: Msg", "m.x = 1", false},
		{"m: Msg", "1 = 2", false},
		{"m: Msg, o: Other, Rel(m, o)", "", false},
		{"m: Msg, o: Other", "", false},
	} {
		src := "MATCH " + tc.pattern
		if tc.where != "" {
			src += " WHERE " + tc.where
		}
		script, file, err := parser.ParseScript(src + " RETURN m")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		st := script.Stmts[0].(*ast.MatchStmt)
		plan, err := CompileSeeded(st.Pattern, st.Where, nil, "m", file)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := plan.SeedOnly(); got != tc.want {
			t.Errorf("%s: SeedOnly = %v, want %v", src, got, tc.want)
		}
		if !tc.want {
			continue
		}
		for _, id := range []herald.NodeID{"m1", "m2"} {
			rows := 0
			_, err := plan.RunSeeded(tx, &eval.Context{Node: tx.Node}, tx.Node(id), func(eval.Row) error { rows++; return nil })
			if err != nil || rows != 1 {
				t.Errorf("%s around %s: %d rows, %v; a seed-only plan binds every node of its type once", src, id, rows, err)
			}
		}
	}
}

// TestReadOnlyTx: a transaction that only reads makes none of its maps (most
// transactions are reads: every round of the consume dispatcher, every MATCH), and one
// that writes after Reserve behaves as any other.
func TestReadOnlyTx(t *testing.T) {
	g := New()
	tx := g.Begin()
	tx.PutNode(testNode("a", "Msg"))
	g.Apply(&herald.ChangeSet{Seq: 1, Changes: tx.Changes()})
	allocs := testing.AllocsPerRun(100, func() {
		tx := g.Begin()
		if tx.Node("a") == nil || tx.Node("b") != nil || len(tx.NodesOfType("Msg")) != 1 {
			t.Fatal("read view")
		}
	})
	if allocs > 2 {
		t.Errorf("a read-only transaction made %v allocations, want at most 2 (itself, the type's id list)", allocs)
	}
	w := g.Begin()
	w.Reserve(2)
	w.PutNode(testNode("b", "Msg"))
	w.DeleteNode("a")
	if w.Node("a") != nil || w.Node("b") == nil || len(w.Changes()) != 2 {
		t.Errorf("writes after Reserve: a=%v b=%v changes=%d", w.Node("a"), w.Node("b"), len(w.Changes()))
	}
}
