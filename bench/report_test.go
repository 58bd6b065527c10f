package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	cfg := testConfig()
	f := newFake()
	r := &Report{Started: time.Now(), Config: cfg, Scenarios: Scenarios}
	r.Systems = append(r.Systems, RunSystem(context.Background(), f, Scenarios, cfg))
	r.Systems = append(r.Systems, System{Name: "redis", Unavailable: "dial tcp 127.0.0.1:6379: connection refused"})
	r.Systems = append(r.Systems, System{Name: "inproc", Durability: "fsync", Results: map[string]Result{
		S1: {Scenario: S1, Messages: 1000, PublishRate: 1, ConsumeRate: 1,
			PublishUse: &Use{CPU: 30 * time.Millisecond, Allocs: 61000, AllocBytes: 8 << 20},
			ConsumeUse: &Use{CPU: 42500 * time.Microsecond, Allocs: 95500, AllocBytes: 9 << 20}},
		S2: {Scenario: S2, Messages: 10, DiskSync: &DiskSync{Syncs: 500, P50: 120 * time.Microsecond, P99: 260 * time.Microsecond, Max: 48 * time.Millisecond}},
	}})
	r.Systems = append(r.Systems, System{Name: "bad", Durability: "none", Results: map[string]Result{
		S1: {Scenario: S1, Err: "setup: boom"},
		S3: {Scenario: S3, Violations: []string{"message 1 never acked"}},
	}})

	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, want := range []string{
		"| system | S1 publish msg/s | S1 consume+ack msg/s | S2 sent msg/s | S2 p50 | S2 p99 | S2 max | S3 nack+redeliver+ack | S3 exactly once |",
		"| fake | ",
		" | yes |",
		"| redis (unavailable) | — | — |",
		"| fake | memory only |",
		"| redis | unavailable: dial tcp 127.0.0.1:6379: connection refused |",
		"| bad | error | error | — | — | — | — | ",
		"**no** (1)",
		"- bad S1: setup: boom",
		"- bad S3 violation: message 1 never acked",
		"| S1 publish CPU µs | allocations | allocated KB | S1 consume+ack CPU µs | allocations | allocated KB |",
		"| inproc | 30.0 | 61.0 | 8.2 | 42.5 | 95.5 | 9.2 |",
		"| disk probe during S2 (4 KB write and fdatasync every 20ms) | syncs | p50 | p99 | max |",
		"| inproc | 500 | 120µs | 260µs | 48ms |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}

	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Config  map[string]any
		Systems []System
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Config["messages"] != float64(cfg.Messages) || len(back.Systems) != 4 || back.Systems[0].Results[S1].PublishRate <= 0 {
		t.Errorf("JSON round trip lost data: %s", js.String())
	}
}

func TestFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1234 * time.Nanosecond:        "1µs",
		1234567 * time.Nanosecond:     "1.23ms",
		12345678 * time.Nanosecond:    "12.3ms",
		1234567891 * time.Nanosecond:  "1.23s",
		12345678912 * time.Nanosecond: "12.3s",
	} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%d) = %q, want %q", d, got, want)
		}
	}
	for r, want := range map[float64]string{1234.4: "1234", 12.34: "12.3", 1.234: "1.23"} {
		if got := fmtRate(r); got != want {
			t.Errorf("fmtRate(%v) = %q, want %q", r, got, want)
		}
	}
}

// TestReportRatiosHeraldSystems: with Herald on two stores in one run, each Herald
// system is set over every peer, and the PostgreSQL store over the Pebble one, never
// the other way round as well; an unavailable system and a failed scenario give no
// figure.
func TestReportRatiosHeraldSystems(t *testing.T) {
	res := func(pub, cons float64, p99 time.Duration, s3 time.Duration) map[string]Result {
		return map[string]Result{
			S1: {Scenario: S1, PublishRate: pub, ConsumeRate: cons},
			S2: {Scenario: S2, P99: p99},
			S3: {Scenario: S3, ConsumeTime: s3},
		}
	}
	r := &Report{Config: testConfig(), Scenarios: Scenarios, HeraldPG: "a separate `herald serve --store …` process", Systems: []System{
		{Name: "herald", Results: res(60000, 90000, 5*time.Millisecond, 2*time.Second)},
		{Name: "herald-pg", Results: res(15000, 30000, 20*time.Millisecond, 8*time.Second)},
		{Name: "nats", Unavailable: "dial tcp 127.0.0.1:4222: connection refused"},
		{Name: "rabbitmq", Results: res(30000, 60000, 4*time.Millisecond, 4*time.Second)},
		{Name: "redis", Results: map[string]Result{S1: {Scenario: S1, Err: "boom"}, S2: {Scenario: S2, P99: 2 * time.Millisecond}}},
	}}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, want := range []string{
		"Herald on PostgreSQL (herald-pg): a separate `herald serve --store …` process.\n",
		"| ratio | S1 publish (higher is better) | S1 consume+ack (higher is better) | S2 p99 (lower is better) | S3 time (lower is better) |\n" +
			"| --- | ---: | ---: | ---: | ---: |\n" +
			"| herald ÷ rabbitmq | 2.00 | 1.50 | 1.25 | 0.50 |\n" +
			"| herald ÷ redis | — | — | 2.50 | — |\n" +
			"| herald-pg ÷ herald | 0.25 | 0.33 | 4.00 | 4.00 |\n" +
			"| herald-pg ÷ rabbitmq | 0.50 | 0.50 | 5.00 | 2.00 |\n" +
			"| herald-pg ÷ redis | — | — | 10.00 | — |\n\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"herald ÷ herald-pg", "÷ nats"} {
		if strings.Contains(out, bad) {
			t.Errorf("markdown has %q:\n%s", bad, out)
		}
	}
	if !IsHerald("herald") || !IsHerald("herald-pg") || IsHerald("heraldry") || IsHerald("nats") {
		t.Error("IsHerald")
	}
}
