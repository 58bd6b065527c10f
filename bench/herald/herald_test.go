package herald_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-mq/herald/bench/benchtest"
	"github.com/herald-mq/herald/bench/herald"
	"github.com/herald-mq/herald/heraldtest"
)

func TestBroker(t *testing.T) {
	srv := heraldtest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := herald.Open(ctx, srv.URL(), "in-memory test server", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Check(ctx); err != nil {
		t.Fatalf("Check against the in-process server: %v", err)
	}
	benchtest.Run(t, b)
}
