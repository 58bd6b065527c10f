// Package redis is the benchmark adapter for Redis Streams: XADD to publish, a consumer
// group read with XREADGROUP, XACK to settle, and a reclaim of the pending entry to nack.
// It is the only package of this module that imports the Redis client.
package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/herald-mq/herald/bench"
)

// DefaultAddr is the local Redis server the benchmark talks to.
const DefaultAddr = "127.0.0.1:6379"

// Names of what the adapter creates; Setup deletes and recreates them.
const (
	Stream = "herald-bench"
	Group  = "herald-bench"
)

const (
	// field is the stream entry field that holds the payload.
	field = "p"
	// block is how long XREADGROUP waits for new entries.
	block = 50 * time.Millisecond
	// reclaimAfter plays the role of an ack timeout: a pending entry idle this long is
	// taken over by the next consumer that looks. A nack marks the entry as idle for
	// longer than that, so it is taken over at once.
	reclaimAfter = 30 * time.Second
	// sweepEvery is how often a consumer looks for expired entries when no nack is
	// outstanding.
	sweepEvery = time.Second
)

// Broker drives one Redis server.
type Broker struct {
	rdb        *goredis.Client
	durability string
	nacked     atomic.Int64 // nacks not yet reclaimed, a hint to run XAUTOCLAIM
}

var _ bench.Broker = (*Broker)(nil)

// Open connects to addr and reads the server's persistence settings.
func Open(ctx context.Context, addr string) (*Broker, error) {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, DialTimeout: 3 * time.Second, MaxRetries: -1, PoolSize: 32})
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, err
	}
	cfg, err := rdb.ConfigGet(ctx, "*").Result()
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("CONFIG GET: %w", err)
	}
	info, _ := rdb.Info(ctx, "server").Result()
	return &Broker{rdb: rdb, durability: Durability(cfg, serverVersion(info))}, nil
}

func serverVersion(info string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return ""
}

// Durability describes a Redis server's persistence from its CONFIG GET answer.
func Durability(cfg map[string]string, version string) string {
	name := "Redis"
	if version != "" {
		name += " " + version
	}
	save := strings.TrimSpace(cfg["save"])
	if cfg["appendonly"] == "yes" {
		switch fsync := cfg["appendfsync"]; fsync {
		case "always":
			return name + ": AOF with appendfsync always, the XADD reply follows the fsync"
		case "everysec":
			return name + ": AOF with appendfsync everysec, an acknowledged XADD may be lost in the last second before a crash"
		default:
			return fmt.Sprintf("%s: AOF with appendfsync %s, the kernel decides when acknowledged XADDs reach the disk", name, fsync)
		}
	}
	if save == "" {
		return name + `: no persistence (appendonly no, save ""), an acknowledged XADD lives only in memory and a restart loses it`
	}
	return fmt.Sprintf("%s: RDB snapshots only (appendonly no, save %q), a crash loses what was acknowledged since the last snapshot", name, save)
}

// Name implements bench.Broker.
func (b *Broker) Name() string { return "redis" }

// Durability implements bench.Broker: what the server runs with, read at Open.
func (b *Broker) Durability() string { return b.durability }

// Setup implements bench.Broker: it deletes the stream with its group and creates both
// anew.
func (b *Broker) Setup(ctx context.Context) error {
	b.nacked.Store(0)
	if err := b.rdb.Del(ctx, Stream).Err(); err != nil {
		return err
	}
	return b.rdb.XGroupCreateMkStream(ctx, Stream, Group, "0").Err()
}

// Publish implements bench.Broker: the XADD reply is the confirmation.
func (b *Broker) Publish(ctx context.Context, payload []byte) error {
	return b.rdb.XAdd(ctx, &goredis.XAddArgs{Stream: Stream, Values: []any{field, payload}}).Err()
}

// Consume implements bench.Broker with n consumers of one group. Each consumer first
// takes over entries whose holder nacked them or went silent for reclaimAfter
// (XAUTOCLAIM), then reads new entries (XREADGROUP >).
func (b *Broker) Consume(ctx context.Context, n, prefetch int, handler func(context.Context, bench.Msg) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var once sync.Once
	fail := func(err error) { once.Do(func() { cancel(err) }) }
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		wg.Go(func() {
			if err := b.consume(ctx, name, prefetch, handler); err != nil && ctx.Err() == nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

func (b *Broker) consume(ctx context.Context, name string, prefetch int, handler func(context.Context, bench.Msg) error) error {
	lastSweep := time.Now()
	cursor := "0-0" // where this consumer's scan of the pending list resumes
	handle := func(ms []goredis.XMessage) error {
		for _, xm := range ms {
			p, _ := xm.Values[field].(string)
			if err := handler(ctx, &msg{b: b, consumer: name, id: xm.ID, payload: []byte(p)}); err != nil {
				return err
			}
		}
		return nil
	}
	for ctx.Err() == nil {
		if b.nacked.Load() > 0 || cursor != "0-0" || time.Since(lastSweep) >= sweepEvery {
			lastSweep = time.Now()
			ms, next, err := b.rdb.XAutoClaim(ctx, &goredis.XAutoClaimArgs{
				Stream: Stream, Group: Group, Consumer: name, MinIdle: reclaimAfter, Start: cursor, Count: int64(prefetch),
			}).Result()
			if err != nil {
				return fmt.Errorf("XAUTOCLAIM: %w", err)
			}
			cursor = next
			if len(ms) > 0 {
				b.nacked.Add(-int64(len(ms)))
				if err := handle(ms); err != nil {
					return err
				}
				continue
			}
			if cursor == "0-0" {
				// A whole scan found nothing to take over; a nack that raced with it is
				// found by the periodic sweep.
				b.nacked.Store(0)
			}
		}
		streams, err := b.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{
			Group: Group, Consumer: name, Streams: []string{Stream, ">"}, Count: int64(prefetch), Block: block,
		}).Result()
		if errors.Is(err, goredis.Nil) {
			continue
		}
		if err != nil {
			return fmt.Errorf("XREADGROUP: %w", err)
		}
		for _, s := range streams {
			if err := handle(s.Messages); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close implements bench.Broker.
func (b *Broker) Close() error { return b.rdb.Close() }

type msg struct {
	b        *Broker
	consumer string
	id       string
	payload  []byte
}

func (m *msg) Payload() []byte { return m.payload }

// Ack removes the entry from the group's pending list (XACK). The entry itself stays
// in the stream until Setup deletes the stream.
func (m *msg) Ack(ctx context.Context) error {
	return m.b.rdb.XAck(ctx, Stream, Group, m.id).Err()
}

// Nack has no Redis command of its own. The entry stays pending; XCLAIM with IDLE
// marks it as idle for longer than reclaimAfter, so the next XAUTOCLAIM of any
// consumer takes it over and delivers it again, which is the usual Streams
// redelivery path, run at once instead of after a timeout.
func (m *msg) Nack(ctx context.Context) error {
	idle := (reclaimAfter + time.Hour).Milliseconds()
	err := m.b.rdb.Do(ctx, "XCLAIM", Stream, Group, m.consumer, 0, m.id, "IDLE", idle, "JUSTID").Err()
	if err == nil {
		m.b.nacked.Add(1)
	}
	return err
}
