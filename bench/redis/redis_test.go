package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald/bench/benchtest"
	"github.com/herald-mq/herald/bench/redis"
)

func TestBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	b, err := redis.Open(ctx, redis.DefaultAddr)
	if err != nil {
		t.Skipf("Redis unreachable at %s, skipping: %v", redis.DefaultAddr, err)
	}
	defer b.Close()
	benchtest.Run(t, b)
}

func TestDurability(t *testing.T) {
	for _, tc := range []struct {
		cfg  map[string]string
		want string
	}{
		{map[string]string{"appendonly": "no", "save": ""}, "Redis 7.0.15: no persistence"},
		{map[string]string{"appendonly": "no", "save": "3600 1"}, `RDB snapshots only (appendonly no, save "3600 1")`},
		{map[string]string{"appendonly": "yes", "appendfsync": "everysec"}, "appendfsync everysec"},
		{map[string]string{"appendonly": "yes", "appendfsync": "always"}, "the XADD reply follows the fsync"},
		{map[string]string{"appendonly": "yes", "appendfsync": "no"}, "the kernel decides"},
	} {
		if got := redis.Durability(tc.cfg, "7.0.15"); !strings.Contains(got, tc.want) {
			t.Errorf("Durability(%v) = %q, want it to contain %q", tc.cfg, got, tc.want)
		}
	}
}
