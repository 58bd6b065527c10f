package engine_test

import (
	"context"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/store/memstore"
)

// TestSystemConstraints: the Layer 0 invariants of _Watch hold for the server's own
// writes too — a system transaction that would break one is refused with E2010.
func TestSystemConstraints(t *testing.T) {
	e := openEngine(t, memstore.New(), engine.Config{})
	put := func(attrs herald.Attrs) error {
		_, _, err := e.System(context.Background(), func(tx *engine.SysTx) error {
			tx.PutNode(&herald.Node{ID: "w1", Type: "_Watch", Attrs: attrs})
			return nil
		})
		return err
	}
	good := herald.AttrsOf(map[string]herald.Value{"pattern": herald.String("WATCH t: Task RETURN t"), "mode": herald.String("watch"),
		"status": herald.String("active"), "on_full": herald.String("drop")})
	if err := put(good); err != nil {
		t.Fatalf("a valid _Watch: %v", err)
	}
	for attr, bad := range map[string]herald.Value{
		"pattern": herald.String(""),
		"mode":    herald.String("stream"),
		"status":  herald.String("done"),
		"on_full": herald.String("panic"),
	} {
		attrs := good.With(attr, bad)
		if err := put(attrs); herald.CodeOf(err) != herald.CodeConstraint {
			t.Errorf("_Watch with %s = %s: %v, want E2010", attr, bad, err)
		}
	}
	attrs := good.With("pattern", herald.Null)
	if err := put(attrs); herald.CodeOf(err) != herald.CodeConstraint {
		t.Errorf("_Watch without a pattern: %v, want E2010", err)
	}
}

// TestConstraintParameters: a constraint cannot use parameters, even when the request
// supplies them: it is checked at commits, where there are none.
func TestConstraintParameters(t *testing.T) {
	e := openEngine(t, memstore.New(), engine.Config{})
	_, err := e.Exec(context.Background(), "", `constraint p: j: Job => j.priority > $min`, map[string]herald.Value{"min": herald.Int(0)})
	if herald.CodeOf(err) != herald.CodeInvalidQuery {
		t.Fatalf("%v, want E1004", err)
	}
}

// TestRedeclareSameType: declaring a type again as it is declared, its attributes in
// any order, is a no-op (no commit), whatever its defaults hold (a String default parsed
// twice is held in two places but is the same value); any difference evolves the type.
func TestRedeclareSameType(t *testing.T) {
	e := openEngine(t, memstore.New(), engine.Config{})
	const decl = `node Job { kind: String = "batch", tags: List = ["a", "b"], n: Int = 3, at: Timestamp?, body: String? }`
	exec := func(q string) error {
		_, err := e.Exec(context.Background(), "", q, nil)
		return err
	}
	if err := exec(decl); err != nil {
		t.Fatal(err)
	}
	if err := exec(decl); err != nil {
		t.Fatalf("the same declaration again: %v", err)
	}
	reordered := `node Job { body: String?, at: Timestamp?, n: Int = 3, tags: List = ["a", "b"], kind: String = "batch" }`
	seq, _ := e.Position()
	if err := exec(reordered); err != nil {
		t.Fatalf("the same declaration in another order: %v", err)
	}
	if now, _ := e.Position(); now != seq {
		t.Errorf("re-declaring the same type committed (seq %d, then %d)", seq, now)
	}
	for _, other := range []string{
		`node Job { kind: String = "stream", tags: List = ["a", "b"], n: Int = 3, at: Timestamp?, body: String? }`,
		`node Job { kind: String = "batch", tags: List = ["a"], n: Int = 3, at: Timestamp?, body: String? }`,
		`node Job { kind: String = "batch", tags: List = ["a", "b"], n: Float = 3.0, at: Timestamp?, body: String? }`,
	} {
		seq, _ := e.Position()
		if err := exec(other); err != nil {
			t.Errorf("%s: %v", other, err)
		}
		if now, _ := e.Position(); now == seq {
			t.Errorf("%s: the type did not evolve", other)
		}
	}
}
