package standing_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
)

var quiet = slog.New(slog.DiscardHandler)

func openEngine(t *testing.T, cfg engine.Config) *engine.Engine {
	t.Helper()
	cfg.Backend = memstore.New()
	cfg.Logger = quiet
	if cfg.Clock == nil {
		cfg.Clock = clock.NewManual(time.Unix(1700000000, 0))
	}
	e, err := engine.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

func exec(t *testing.T, e *engine.Engine, q string) *engine.Response {
	t.Helper()
	r, err := e.Exec(context.Background(), "", q, nil)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return r
}

func defaultConfig() engine.Config { return engine.Config{} }

// waitFor polls cond without sleeping long, failing the test after a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
	}
}
