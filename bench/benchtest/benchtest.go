// Package benchtest is the conformance check every bench.Broker adapter runs: the three
// scenarios at a small, bounded size, expecting complete and correct results.
// Adapter tests call Run when their broker is reachable and skip otherwise.
package benchtest

import (
	"context"
	"testing"
	"time"

	"github.com/herald-mq/herald/bench"
)

// Config is the small workload of Run: a few hundred messages, a second at most of
// offered load, and a tight bound on each scenario.
func Config() bench.Config {
	cfg := bench.DefaultConfig()
	cfg.Messages = 300
	cfg.Rate = 200
	cfg.Duration = 500 * time.Millisecond
	cfg.Timeout = 20 * time.Second
	cfg.Drain = 200 * time.Millisecond
	return cfg
}

// Run runs every scenario against b and fails t on an error, a missing figure, a
// duplicate delivery or an S3 violation. It closes nothing.
func Run(t *testing.T, b bench.Broker) {
	t.Helper()
	if b.Durability() == "" {
		t.Error("Durability is empty")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config()
	for _, sc := range bench.Scenarios {
		res := bench.Run(ctx, b, sc, cfg)
		t.Logf("%s %s: %+v", b.Name(), sc, res)
		if res.Err != "" {
			t.Errorf("%s: %s", sc, res.Err)
			continue
		}
		if len(res.Violations) > 0 || res.Duplicates > 0 {
			t.Errorf("%s: %d duplicates, violations %q", sc, res.Duplicates, res.Violations)
		}
		switch sc {
		case bench.S1, bench.S3:
			if res.PublishRate <= 0 || res.ConsumeRate <= 0 {
				t.Errorf("%s: rates not measured: %+v", sc, res)
			}
		case bench.S2:
			if res.Received != res.Messages || res.P50 <= 0 || res.Max < res.P99 {
				t.Errorf("%s: latencies not measured: %+v", sc, res)
			}
		}
	}
}
