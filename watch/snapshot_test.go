package watch_test

import (
	"context"
	"testing"

	"github.com/herald-mq/herald/engine"
)

// graphSnapshots reads herald_graph_snapshots_total.
func graphSnapshots(t *testing.T, eng *engine.Engine) float64 {
	t.Helper()
	for _, m := range eng.Metrics() {
		if m.Name == "herald_graph_snapshots_total" {
			return m.Value
		}
	}
	t.Fatal("no herald_graph_snapshots_total metric")
	return 0
}

// TestOpenWithoutInitialTakesNoSnapshot: a watch that starts from now (initial: none)
// needs only the position, not a snapshot of the graph. A snapshot would make the
// commit of its _Watch node copy the tree nodes it changes, which was most of what
// opening such a watch cost; with initial: full the snapshot is needed, and taken.
func TestOpenWithoutInitialTakesNoSnapshot(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	before := graphSnapshots(t, h.eng)
	for range 5 {
		st, err := h.svc.Open(ctx, "", `WATCH t: Task [initial: none] RETURN t`, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
	}
	if got := graphSnapshots(t, h.eng) - before; got != 0 {
		t.Errorf("opening five watches with initial: none took %v snapshots, want none", got)
	}
	st, err := h.svc.Open(ctx, "", `WATCH t: Task [initial: full] RETURN t`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := graphSnapshots(t, h.eng) - before; got == 0 {
		t.Error("opening a watch with initial: full took no snapshot; the test cannot see snapshots")
	}
}
