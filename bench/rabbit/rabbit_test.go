package rabbit_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-mq/herald/bench/benchtest"
	"github.com/herald-mq/herald/bench/rabbit"
)

func TestBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	b, err := rabbit.Open(ctx, rabbit.DefaultURL)
	if err != nil {
		t.Skipf("RabbitMQ unreachable at %s, skipping: %v", rabbit.DefaultURL, err)
	}
	defer b.Close()
	benchtest.Run(t, b)
}
