package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-mq/herald/bench/benchtest"
	"github.com/herald-mq/herald/bench/nats"
)

func TestBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	b, err := nats.Open(ctx, nats.DefaultURL)
	if err != nil {
		t.Skipf("NATS JetStream unreachable at %s, skipping: %v", nats.DefaultURL, err)
	}
	defer b.Close()
	benchtest.Run(t, b)
}
