package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald/bench"
)

// TestMain lets the test binary serve as the child server of the backlog and fan-out
// modes, as the command's own binary does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == serveChildCmd {
		os.Exit(serveChild(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == watchChildCmd {
		os.Exit(watchChild(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == heraldChildCmd {
		os.Exit(heraldChild(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func runBenchArgs(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	err = Run(ctx, args, &out, &errb)
	return out.String(), errb.String(), err
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--scenarios", "s1,s9"},
		{"--scenarios", ""},
		{"--peers", "kafka"},
		{"--messages", "0"},
		{"--duration", "0s"},
		{"--size", "8"},
		{"--disk-probe", "/no/such/dir"},
		{"--in-process", "--herald-url", "http://127.0.0.1:1"},
		{"--in-process", "--herald-bin", "/bin/herald"},
		{"--herald-bin", "/bin/herald", "--herald-url", "http://127.0.0.1:1"},
		{"--peers", "herald-pg", "--pg-dsn", "mysql://root@127.0.0.1/db"},
	} {
		_, stderr, err := runBenchArgs(t, args...)
		if code := exitCode(err); code != 2 {
			t.Errorf("bench %q: exit %d (%v), want 2; stderr %q", args, code, err, stderr)
		}
	}
}

// TestBenchUnavailable measures only peers that cannot be reached: each is reported,
// and the command still succeeds.
func TestBenchUnavailable(t *testing.T) {
	stdout, _, err := runBenchArgs(t, "--peers", "nats,rabbitmq,redis", "--no-progress", "--json",
		"--nats-url", "nats://127.0.0.1:1", "--amqp-url", "amqp://guest:guest@127.0.0.1:1/", "--redis-addr", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct{ Systems []bench.System }
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v in %s", err, stdout)
	}
	if len(rep.Systems) != 3 {
		t.Fatalf("systems %+v", rep.Systems)
	}
	for i, name := range []string{"nats", "rabbitmq", "redis"} {
		if s := rep.Systems[i]; s.Name != name || s.Unavailable == "" || len(s.Results) != 0 {
			t.Errorf("system %d = %+v, want %s unavailable", i, s, name)
		}
	}
}

// TestBenchHerald runs a tiny workload against Herald as the bench runs it by default:
// a separate herald serve process. The report says so.
func TestBenchHerald(t *testing.T) {
	stdout, stderr, err := runBenchArgs(t, "--peers", "herald", "--messages", "100",
		"--rate", "100", "--duration", "300ms", "--timeout", "20s")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if strings.Contains(stdout, "herald (unavailable)") {
		t.Fatalf("the herald serve process was reported unavailable:\n%s\n%s", stdout, stderr)
	}
	for _, want := range []string{
		"Herald: a separate `herald serve` process (herald-bench's own copy of the herald command), a new data directory, the server's defaults but --prepared-logs 9.",
		"| system | S1 publish msg/s |",
		"| herald | herald serve process, Pebble store on local disk: every commit (publish, lease, ACK, NACK) is fsynced before the answer |",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
	// The CPU and store figures are the in-process mode's: the bench cannot read them
	// from another process.
	if strings.Contains(stdout, "in-process") || strings.Contains(stdout, "S1 publish CPU") {
		t.Errorf("a separate process reported as in-process:\n%s", stdout)
	}
	if strings.Contains(stdout, "error") || strings.Contains(stdout, "**no**") {
		t.Errorf("a scenario failed:\n%s", stdout)
	}
	if !strings.Contains(stderr, "herald   S1 publish [##############################] 100% 100/100\n") {
		t.Errorf("no progress bar on stderr:\n%q", stderr)
	}
}

// TestBenchHeraldInProcess runs the profiling mode: the report says the server ran
// in-process and adds the CPU and store figures per message.
func TestBenchHeraldInProcess(t *testing.T) {
	stdout, stderr, err := runBenchArgs(t, "--peers", "herald", "--in-process", "--scenarios", "s1", "--messages", "100",
		"--timeout", "20s", "--no-progress")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{
		"Herald: **in-process** (--in-process)",
		"for profiling only",
		"| herald | in-process server (profiling only), Pebble store on local disk: every commit (publish, lease, ACK, NACK) is fsynced before the answer |",
		"S1 publish CPU µs",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
}

// TestBenchHeraldBinMissing: a --herald-bin that cannot run leaves Herald unavailable,
// with the reason, and the command goes on.
func TestBenchHeraldBinMissing(t *testing.T) {
	stdout, stderr, err := runBenchArgs(t, "--peers", "herald", "--herald-bin", "/no/such/herald", "--no-progress", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rep struct {
		Herald  string
		Systems []bench.System
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v in %s", err, stdout)
	}
	if len(rep.Systems) != 1 || !strings.Contains(rep.Systems[0].Unavailable, "/no/such/herald") ||
		!strings.Contains(rep.Herald, "/no/such/herald") {
		t.Errorf("report %+v", rep)
	}
}

func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	p := &progressBar{w: &buf}
	p.update(bench.Progress{Broker: "nats", Scenario: "s1", Phase: "publish", Done: 5, Total: 10})
	p.update(bench.Progress{Broker: "nats", Scenario: "s1", Phase: "publish", Done: 5, Total: 10})
	p.update(bench.Progress{Broker: "nats", Scenario: "s1", Phase: "publish", Done: 10, Total: 10, Final: true})
	p.clear()
	want := "\rnats     S1 publish [###############...............]  50% 5/10" +
		"\rnats     S1 publish [##############################] 100% 10/10\n"
	if buf.String() != want {
		t.Errorf("got %q\nwant %q", buf.String(), want)
	}
}

func TestSplitList(t *testing.T) {
	got, err := splitList("peers", " Redis,herald,redis ", benchSystems)
	if err != nil || strings.Join(got, ",") != "herald,redis" {
		t.Errorf("splitList = %v, %v; want herald,redis in report order", got, err)
	}
	got, err = splitList("peers", "rabbitmq,herald-pg,herald", benchSystems)
	if err != nil || strings.Join(got, ",") != "herald,herald-pg,rabbitmq" {
		t.Errorf("splitList = %v, %v; want herald,herald-pg,rabbitmq", got, err)
	}
}

// TestBacklogMode fills a small backlog into a child server, kills it and restarts it,
// and checks the report's figures are there and plausible.
func TestBacklogMode(t *testing.T) {
	stdout, stderr, err := runBenchArgs(t, "--backlog", "300", "--json", "--no-progress")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rep backlogReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v in %s", err, stdout)
	}
	if rep.Messages != 300 || rep.RSSFull == 0 || rep.CountTime <= 0 || rep.FirstMessage <= 0 ||
		rep.RestartReady <= 0 || rep.RestartConsumed < rep.RestartReady {
		t.Errorf("report %+v", rep)
	}
}

// TestFanoutMode runs the fan-out mode with a few watchers: every watcher, WatchMany
// and server-sent events alike, must see every event published while it watched (none
// can be dropped at this rate).
func TestFanoutMode(t *testing.T) {
	stdout, stderr, err := runBenchArgs(t, "--fanout", "3", "--fanout-rate", "200", "--fanout-duration", "300ms", "--json", "--no-progress",
		"--disk-probe", t.TempDir())
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rep fanoutReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v in %s", err, stdout)
	}
	if rep.Alone.Published != 60 || len(rep.Phases) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for _, ph := range rep.Phases {
		if ph.Watched.Published != 60 || ph.Expected != 180 || ph.Delivered != 180 || ph.Gaps != 0 || ph.Watched.P99 <= 0 || ph.PerSecond <= 0 {
			t.Errorf("%s phase %+v", ph.Transport, ph)
		}
	}
	if rep.Phases[0].Transport != "WatchMany" || rep.Phases[1].Transport != "server-sent events" {
		t.Errorf("phases %q and %q", rep.Phases[0].Transport, rep.Phases[1].Transport)
	}
	for _, p := range []publishFigures{rep.Alone, rep.Phases[0].Watched, rep.Phases[1].Watched} {
		if p.Disk == nil || p.Disk.Syncs == 0 || p.Disk.Max < p.Disk.P99 {
			t.Errorf("disk probe beside a publishing run: %+v", p.Disk)
		}
	}
}
