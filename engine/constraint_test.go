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
