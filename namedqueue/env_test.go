package namedqueue

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type env struct {
	t   *testing.T
	clk *clock.Manual
	eng *engine.Engine
	del *delivery.Service
	q   *Service
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clk := clock.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	eng, err := engine.Open(context.Background(), engine.Config{Backend: memstore.New(), Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	del := delivery.New(delivery.Config{Engine: eng, Logger: quiet})
	if err := del.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = del.Stop(context.Background())
		_ = eng.Close(context.Background())
	})
	return &env{t: t, clk: clk, eng: eng, del: del, q: New(eng, del)}
}
