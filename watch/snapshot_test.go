package watch_test

import (
	"context"
	"slices"
	"testing"

	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
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

// TestWatchNodeAttributes: a stream's _Watch node carries its attributes in name order
// (the graph's lookups by name rely on it) and every one of them.
func TestWatchNodeAttributes(t *testing.T) {
	h := newHarness(t)
	st, err := h.svc.Open(context.Background(), "", `jobs = WATCH t: Task [initial: none] RETURN t`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var names []string
	err = h.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		for _, id := range tx.NodesOfType("_Watch") {
			for _, a := range tx.Node(id).Attrs {
				names = append(names, a.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"buffer_size", "created_at", "delivery", "events_delivered", "events_pending", "handle",
		"mode", "on_full", "ordering", "pattern", "position", "status", "visibility"}
	if !slices.Equal(names, want) {
		t.Errorf("_Watch attributes %q, want %q", names, want)
	}
}
