package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fake is an in-memory broker. Its hooks break it in chosen ways.
type fake struct {
	ch    chan []byte
	delay time.Duration // each delivery waits until this long after the send time

	drop     func(id uint64) bool // Publish confirms this message but loses it
	lose     func(id uint64) bool // a NACK of this message loses it
	dupAfter func(id uint64) bool // an ACK of this message delivers it once more

	mu     sync.Mutex
	duped  map[uint64]bool
	acks   atomic.Int64
	nacks  atomic.Int64
	setups atomic.Int64
}

func newFake() *fake { return &fake{ch: make(chan []byte, 1<<16), duped: map[uint64]bool{}} }

func (f *fake) Name() string       { return "fake" }
func (f *fake) Durability() string { return "memory only" }
func (f *fake) Close() error       { return nil }

func (f *fake) Setup(ctx context.Context) error {
	f.setups.Add(1)
	for {
		select {
		case <-f.ch:
		default:
			return nil
		}
	}
}

func (f *fake) Publish(ctx context.Context, p []byte) error {
	if id, _, _ := ParsePayload(p); f.drop != nil && f.drop(id) {
		return nil
	}
	select {
	case f.ch <- bytes.Clone(p):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fake) Consume(ctx context.Context, n, prefetch int, h func(context.Context, Msg) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case p := <-f.ch:
					if f.delay > 0 {
						_, at, _ := ParsePayload(p)
						time.Sleep(time.Until(at.Add(f.delay)))
					}
					if err := h(ctx, &fakeMsg{f: f, p: p}); err != nil {
						errs <- err
						cancel()
						return
					}
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

type fakeMsg struct {
	f *fake
	p []byte
}

func (m *fakeMsg) Payload() []byte { return m.p }

func (m *fakeMsg) Ack(ctx context.Context) error {
	m.f.acks.Add(1)
	id, _, _ := ParsePayload(m.p)
	if m.f.dupAfter != nil && m.f.dupAfter(id) {
		m.f.mu.Lock()
		again := !m.f.duped[id]
		m.f.duped[id] = true
		m.f.mu.Unlock()
		if again {
			m.f.ch <- m.p
		}
	}
	return nil
}

func (m *fakeMsg) Nack(ctx context.Context) error {
	m.f.nacks.Add(1)
	id, _, _ := ParsePayload(m.p)
	if m.f.lose != nil && m.f.lose(id) {
		return nil
	}
	m.f.ch <- m.p
	return nil
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Messages = 2000
	cfg.Rate = 1000
	cfg.Duration = 200 * time.Millisecond
	cfg.Timeout = 5 * time.Second
	cfg.Drain = 50 * time.Millisecond
	return cfg
}

func TestS1(t *testing.T) {
	f := newFake()
	var phases sync.Map
	cfg := testConfig()
	cfg.Progress = func(p Progress) {
		if p.Final {
			phases.Store(p.Phase, p.Done)
		}
	}
	res := Run(context.Background(), f, S1, cfg)
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	if res.PublishRate <= 0 || res.ConsumeRate <= 0 || res.PublishTime <= 0 || res.ConsumeTime <= 0 {
		t.Errorf("rates not computed: %+v", res)
	}
	if got := float64(cfg.Messages) / res.PublishTime.Seconds(); got != res.PublishRate {
		t.Errorf("publish rate %v, want messages/time = %v", res.PublishRate, got)
	}
	if f.acks.Load() != int64(cfg.Messages) || res.Duplicates != 0 {
		t.Errorf("acks = %d, duplicates = %d; want %d, 0", f.acks.Load(), res.Duplicates, cfg.Messages)
	}
	for _, ph := range []string{"publish", "consume"} {
		if v, ok := phases.Load(ph); !ok || v.(int) != cfg.Messages {
			t.Errorf("final progress of %s = %v, want %d", ph, v, cfg.Messages)
		}
	}
	if f.setups.Load() != 1 {
		t.Errorf("Setup ran %d times", f.setups.Load())
	}
}

// inProcessFake is a fake that says it runs in the process (a StoreMeter), as Herald's
// in-process server does.
type inProcessFake struct{ *fake }

func (inProcessFake) StoreCounters(bool) (uint64, uint64, uint64) { return 0, 0, 0 }

// S1 reports the process's CPU time over each phase for a broker in the process, and
// none for one outside it, whose server's CPU the process cannot see.
func TestS1ProcessCPU(t *testing.T) {
	res := Run(context.Background(), inProcessFake{newFake()}, S1, testConfig())
	if res.Err != "" || res.PublishUse == nil || res.ConsumeUse == nil {
		t.Fatalf("in process: publish %v, consume %v (%s); want both measured", res.PublishUse, res.ConsumeUse, res.Err)
	}
	for _, u := range []*Use{res.PublishUse, res.ConsumeUse} {
		if u.CPU <= 0 || u.Allocs == 0 || u.AllocBytes < u.Allocs {
			t.Errorf("in process: %+v; want CPU time and allocations measured", *u)
		}
	}
	res = Run(context.Background(), newFake(), S1, testConfig())
	if res.Err != "" || res.PublishUse != nil || res.ConsumeUse != nil {
		t.Errorf("out of process: publish %v, consume %v (%s); want none", res.PublishUse, res.ConsumeUse, res.Err)
	}
}

func TestS1TimesOutOnMissingMessage(t *testing.T) {
	f := newFake()
	f.drop = func(id uint64) bool { return id == 17 }
	cfg := testConfig()
	cfg.Timeout = 300 * time.Millisecond
	res := Run(context.Background(), f, S1, cfg)
	if !strings.Contains(res.Err, "timed out") {
		t.Fatalf("err = %q, want a timeout", res.Err)
	}
	if res.PublishRate <= 0 || res.ConsumeRate <= 0 {
		t.Errorf("partial figures lost: %+v", res)
	}
}

func TestS2Latency(t *testing.T) {
	f := newFake()
	f.delay = 5 * time.Millisecond
	cfg := testConfig()
	cfg.ProbeDir, cfg.ProbeEvery = t.TempDir(), 5*time.Millisecond
	res := Run(context.Background(), f, S2, cfg)
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	if d := res.DiskSync; d == nil || d.Syncs == 0 || d.P50 <= 0 || d.P99 < d.P50 || d.Max < d.P99 {
		t.Errorf("disk probe saw %+v; want syncs with 0 < p50 <= p99 <= max", d)
	}
	if left, _ := os.ReadDir(cfg.ProbeDir); len(left) != 0 {
		t.Errorf("the probe left %d files behind", len(left))
	}
	if res.Messages != 200 || res.Received != 200 {
		t.Errorf("messages %d, received %d; want 200, 200", res.Messages, res.Received)
	}
	if res.P50 < f.delay || res.P99 < res.P50 || res.Max < res.P99 {
		t.Errorf("p50 %v p99 %v max %v: want delay %v <= p50 <= p99 <= max", res.P50, res.P99, res.Max, f.delay)
	}
	if res.OfferedRate != 1000 || res.SentRate <= 0 {
		t.Errorf("offered %v sent %v", res.OfferedRate, res.SentRate)
	}
}

func TestS3ExactlyOnce(t *testing.T) {
	f := newFake()
	cfg := testConfig()
	res := Run(context.Background(), f, S3, cfg)
	if res.Err != "" || len(res.Violations) != 0 {
		t.Fatalf("err %q, violations %v", res.Err, res.Violations)
	}
	if f.nacks.Load() != int64(cfg.Messages) || f.acks.Load() != int64(cfg.Messages) {
		t.Errorf("nacks %d acks %d, want %d each", f.nacks.Load(), f.acks.Load(), cfg.Messages)
	}
	if res.ConsumeTime <= 0 {
		t.Error("total time not measured")
	}
}

func TestS3DetectsDuplicate(t *testing.T) {
	f := newFake()
	f.dupAfter = func(id uint64) bool { return id == 7 }
	res := Run(context.Background(), f, S3, testConfig())
	if res.Duplicates != 1 || len(res.Violations) != 1 || res.Violations[0] != "message 7 acked 2 times" {
		t.Fatalf("duplicates %d, violations %q; want message 7 acked twice", res.Duplicates, res.Violations)
	}
}

func TestS3DetectsMissing(t *testing.T) {
	f := newFake()
	f.lose = func(id uint64) bool { return id == 3 }
	cfg := testConfig()
	cfg.Timeout = 500 * time.Millisecond
	res := Run(context.Background(), f, S3, cfg)
	if !strings.Contains(res.Err, "timed out") {
		t.Errorf("err = %q, want a timeout", res.Err)
	}
	if len(res.Violations) != 1 || res.Violations[0] != "message 3 never acked" {
		t.Fatalf("violations %q, want message 3 never acked", res.Violations)
	}
}

func TestLedgerCheck(t *testing.T) {
	l := newLedger(30)
	for i := range 30 {
		l.nacks[i], l.acks[i] = 1, 1
	}
	l.acks[2] = 0
	l.nacks[4] = 0
	for i := 10; i < 30; i++ {
		l.acks[i] = 3
	}
	v, dup := l.check()
	if dup != 40 {
		t.Errorf("duplicates = %d, want 40", dup)
	}
	if len(v) != maxViolations+1 {
		t.Fatalf("%d violations listed, want %d plus a summary", len(v), maxViolations)
	}
	want := []string{"message 2 never acked", "message 4 nacked 0 times", "message 10 acked 3 times"}
	for i, w := range want {
		if v[i] != w {
			t.Errorf("violation %d = %q, want %q", i, v[i], w)
		}
	}
	if last := v[len(v)-1]; last != "22 violations in all: 1 never acked, 20 acked twice or more, 1 not nacked exactly once" {
		t.Errorf("summary = %q", last)
	}
}

func TestPercentiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i
	}
	for _, tc := range []struct {
		in            []time.Duration
		p50, p99, max time.Duration
	}{
		{nil, 0, 0, 0},
		{ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{ms(4, 1, 3, 2), 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond},
		{ms(hundred...), 50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond},
	} {
		p50, p99, mx := Percentiles(tc.in)
		if p50 != tc.p50 || p99 != tc.p99 || mx != tc.max {
			t.Errorf("Percentiles(%v) = %v %v %v, want %v %v %v", tc.in, p50, p99, mx, tc.p50, tc.p99, tc.max)
		}
	}
}

func TestPayload(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	p := NewPayload(0xbeef, at, 256)
	if len(p) != 256 {
		t.Fatalf("len %d", len(p))
	}
	id, got, err := ParsePayload(p)
	if err != nil || id != 0xbeef || !got.Equal(at) {
		t.Fatalf("ParsePayload = %x %v %v", id, got, err)
	}
	if len(NewPayload(1, at, 3)) != MinPayloadSize {
		t.Error("short payloads are not padded to the header")
	}
	for _, bad := range []string{"", "xyz", strings.Repeat("z", 64)} {
		if _, _, err := ParsePayload([]byte(bad)); err != ErrPayload {
			t.Errorf("ParsePayload(%q) err = %v", bad, err)
		}
	}
}

func TestUnknownScenarioAndBadConfig(t *testing.T) {
	if res := Run(context.Background(), newFake(), "s9", testConfig()); !strings.Contains(res.Err, "unknown scenario") {
		t.Errorf("err = %q", res.Err)
	}
	cfg := testConfig()
	cfg.Messages = 0
	if res := Run(context.Background(), newFake(), S1, cfg); res.Err == "" {
		t.Error("zero messages accepted")
	}
}
