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

// TestRedeclareSameType: declaring a type again exactly as it is declared is a no-op,
// whatever its defaults hold (a String default parsed twice is held in two places
// but is the same value), and any difference is a conflict (E2006).
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
	for _, other := range []string{
		`node Job { kind: String = "stream", tags: List = ["a", "b"], n: Int = 3, at: Timestamp?, body: String? }`,
		`node Job { kind: String = "batch", tags: List = ["a"], n: Int = 3, at: Timestamp?, body: String? }`,
		`node Job { kind: String = "batch", tags: List = ["a", "b"], n: Float = 3.0, at: Timestamp?, body: String? }`,
		`node Job { kind: String = "batch", tags: List = ["a", "b"], n: Int = 3, at: Timestamp?, body: String }`,
		`node Job { kind: String, tags: List = ["a", "b"], n: Int = 3, at: Timestamp?, body: String? }`,
	} {
		if err := exec(other); herald.CodeOf(err) != herald.CodeTypeConflict {
			t.Errorf("%s: %v, want %s", other, err, herald.CodeTypeConflict)
		}
	}
}
