// Command herald-bench measures Herald, on its embedded Pebble store and on its
// PostgreSQL store, against NATS JetStream, RabbitMQ and Redis Streams with one
// workload, side by side and as ratios. It lives in the bench module,
// apart from the herald binary, since it links the peers' client libraries.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-mq/herald/bench"
	heraldbench "github.com/herald-mq/herald/bench/herald"
	natsbench "github.com/herald-mq/herald/bench/nats"
	rabbitbench "github.com/herald-mq/herald/bench/rabbit"
	redisbench "github.com/herald-mq/herald/bench/redis"
	"github.com/herald-mq/herald/server"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == serveChildCmd {
		os.Exit(serveChild(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == watchChildCmd {
		os.Exit(watchChild(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == heraldChildCmd {
		os.Exit(heraldChild(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

// exitError carries the exit status the command wants: 2 for usage errors.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(err error) error { return &exitError{code: 2, err: err} }

func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}

// Run runs the command with args (without the program name); it prints errors to
// stderr itself.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newBenchCmd(stdout, stderr)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	err := cmd.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "herald-bench: %v\n", err)
	}
	return err
}

// Systems the command knows, in report order: herald is Herald on its embedded Pebble
// store, herald-pg Herald on its PostgreSQL store.
var benchSystems = []string{"herald", heraldPG, "nats", "rabbitmq", "redis"}

type benchFlags struct {
	scenarios, peers                  string
	messages, rate                    int
	duration, timeout                 time.Duration
	heraldURL, natsURL                string
	amqpURL, redisAddr                string
	json, noProgress                  bool
	inFlight, consumers, size         int
	prefetch                          int
	cpuProfile, traceFile, memProfile string
	backlog                           int
	fanout, fanoutRate                int
	fanoutCPU                         float64
	preparedLogs                      int
	inProcess                         bool
	heraldBin                         string
	fanoutDuration                    time.Duration
	fanoutTransport                   string
	diskProbe                         string
	pgDSN                             string
	pgSchema                          string // the run's fresh schema for herald-pg
}

func newBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "herald-bench",
		Short: "Measure Herald against NATS JetStream, RabbitMQ and Redis Streams",
		Long: `Run the same workload against Herald and its peers and print the figures side by
side, Herald's over each peer's as ratios, and each system's durability setting.

  S1  publish --messages messages of --size bytes, --inflight confirmed
      publishes at a time, then consume them with --consumers consumers holding
      --prefetch unsettled deliveries each, acking every one: publish msg/s and
      consume+ack msg/s.
  S2  one producer offers --rate msg/s for --duration, open loop (each message
      is due at its scheduled time and its latency counts from then): end-to-end
      latency p50, p99 and max. Beside it a probe writes 4 KB and fdatasyncs it
      every 20 ms in --disk-probe, and the report gives those syncs' p50, p99 and
      max: a broker that syncs before answering waits out every disk stall.
  S3  NACK every message once and ACK its redelivery: the time it takes, and a
      check that every message was acked exactly once after one redelivery.

Herald runs as users run it, as the peers run: a separate "herald serve" process
on 127.0.0.1 with a temporary data directory and the server's defaults (but
--prepared-logs), fsyncing each commit before it answers. The process runs
--herald-bin, or without it this command's own copy of the herald command line.
--herald-url measures a server already running instead. --in-process runs the
server inside this process, for profiling only: it shares the process, its CPUs
and its garbage collector with the clients, and its figures are not comparable
with the peers'; the report then adds fsyncs and bytes written to the store,
and CPU time and allocations, per message. The report says which mode ran. A
peer that cannot be reached is reported as unavailable. --herald-url is for
herald alone; --herald-bin and --in-process apply to herald-pg as well.

herald-pg is Herald on its PostgreSQL store, run the same way: "herald serve
--store <--pg-dsn> --store-schema <S>" in a process of its own, S a schema made
for the run (herald_bench_ and random hex) and dropped at its end. --pg-dsn
defaults to $HERALD_BENCH_PG_DSN, else the local server. Only a PostgreSQL that
cannot be reached leaves herald-pg out, as unavailable; one that answers but
refuses the bench fails its scenarios, with the reason. Its figures are set over
Herald's on Pebble (herald-pg ÷ herald) as well as over the peers'.

Two more modes measure Herald alone:
  --backlog N   fill N messages into a server of its own (a child process), then
                report its memory per queued message, COUNT of the type, how
                soon a new consumer group gets its first message, and after a
                kill -9 and restart how soon the server is ready and the first
                message consumed.
  --fanout N    publish at --fanout-rate msg/s with no watcher, then with N
                watch-mode streams on the same pattern, and compare the publish
                latency (p50, p99) of the two runs; between them, the server's
                memory per idle watch, once every stream has parked and again
                after the server has collected its garbage.

A progress bar runs on stderr; the report goes to stdout, as markdown or, with
--json, as JSON.`,
		Example: `  herald-bench
  herald-bench --peers herald,nats --messages 50000
  herald-bench --peers herald,herald-pg,rabbitmq --pg-dsn postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
  herald-bench --herald-bin ./herald --messages 100000   # a herald binary you built
  herald-bench --peers herald --in-process --cpuprofile cpu.out   # profiling only
  herald-bench --scenarios s2 --rate 5000 --duration 10s --json
  herald-bench --backlog 1000000
  herald-bench --fanout 1000 --fanout-rate 1000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBench(cmd.Context(), f, stdout, stderr)
		},
	}
	def := bench.DefaultConfig()
	fl := cmd.Flags()
	fl.StringVar(&f.scenarios, "scenarios", "s1,s2,s3", "comma-separated scenarios to run: s1, s2, s3")
	fl.StringVar(&f.peers, "peers", strings.Join(benchSystems, ","), "comma-separated systems to measure: herald (the embedded Pebble store), herald-pg (the PostgreSQL store at --pg-dsn), nats, rabbitmq, redis")
	fl.IntVar(&f.messages, "messages", def.Messages, "messages published in S1 and S3")
	fl.IntVar(&f.inFlight, "inflight", def.InFlight, "confirmed publishes in flight at once in S1 and S3")
	fl.IntVar(&f.consumers, "consumers", def.Consumers, "competing consumers in every scenario")
	fl.IntVar(&f.prefetch, "prefetch", def.Prefetch, "unsettled deliveries each consumer may hold")
	fl.IntVar(&f.rate, "rate", def.Rate, "messages per second offered in S2")
	fl.DurationVar(&f.duration, "duration", def.Duration, "how long S2 offers load")
	fl.DurationVar(&f.timeout, "timeout", def.Timeout, "bound on each scenario of each system")
	fl.IntVar(&f.size, "size", def.PayloadSize, "payload bytes per message")
	fl.StringVar(&f.heraldURL, "herald-url", "", "a running Herald server to measure; empty starts a herald serve process of its own")
	fl.StringVar(&f.heraldBin, "herald-bin", "", "the herald binary whose \"serve\" the bench runs as a separate process; empty: this command's own copy of the herald command line")
	fl.BoolVar(&f.inProcess, "in-process", false, "run the Herald server inside this process, for profiling only (its figures are not comparable with the peers'): the report adds store and CPU figures per message")
	fl.StringVar(&f.natsURL, "nats-url", natsbench.DefaultURL, "NATS server with JetStream")
	fl.StringVar(&f.amqpURL, "amqp-url", rabbitbench.DefaultURL, "RabbitMQ server")
	fl.StringVar(&f.redisAddr, "redis-addr", redisbench.DefaultAddr, "Redis server")
	fl.StringVar(&f.pgDSN, "pg-dsn", pgDSNDefault(), "PostgreSQL database for herald-pg, a postgres:// URL (default $"+pgDSNEnv+" when set): the run makes a fresh schema in it, runs `herald serve --store` on it and drops it at the end")
	fl.BoolVar(&f.json, "json", false, "print the report as JSON")
	fl.BoolVar(&f.noProgress, "no-progress", false, "do not draw the progress bar")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (the server included with --in-process; in --fanout mode the server child, and in --backlog mode the server restarted after kill -9, writes FILE.server, and --fanout's watcher processes FILE.watchers and FILE.watchers-sse) to this file")
	fl.StringVar(&f.memProfile, "memprofile", "", "write an allocation profile of the whole run (the server included with --in-process) to this file at its end (in --fanout mode the server child writes FILE.server at each collection it is asked for)")
	fl.StringVar(&f.traceFile, "trace", "", "write an execution trace of the whole run (for go tool trace) to this file (the server child of --fanout, and the server --backlog restarts, write FILE.server)")
	fl.IntVar(&f.backlog, "backlog", 0, "backlog mode: fill this many messages into a child server and measure it (Herald only)")
	fl.IntVar(&f.fanout, "fanout", 0, "fan-out mode: this many watch-mode streams on the published pattern (Herald only)")
	fl.IntVar(&f.fanoutRate, "fanout-rate", 1000, "fan-out mode: messages per second published")
	fl.Float64Var(&f.fanoutCPU, "fanout-watch-cpu", 0, "fan-out mode: the server's --watch-cpu (0: its default)")
	fl.IntVar(&f.preparedLogs, "prepared-logs", server.FullPreparedLogs, "the Herald server's --prepared-logs: log files its new store writes ahead (herald serve's default is 0; the bench's new stores take 9, as a server that has run a while reuses full-size logs); 0 to measure without")
	fl.DurationVar(&f.fanoutDuration, "fanout-duration", 10*time.Second, "fan-out mode: how long each of its runs publishes")
	fl.StringVar(&f.fanoutTransport, "fanout-transport", "both", "fan-out mode: the watchers' transport: watchmany (the Go client's WatchMany streams), sse (server-sent events, one HTTP/1.1 connection each), or both, one run each")
	fl.StringVar(&f.diskProbe, "disk-probe", os.TempDir(), "directory on the brokers' disk where S2's disk probe syncs a file of its own (the Herald the bench starts keeps its store under the system's temporary directory); empty: no probe")
	return cmd
}

// splitList parses a comma-separated flag against the allowed values, keeping the
// order of allowed and dropping duplicates.
func splitList(flag, v string, allowed []string) ([]string, error) {
	want := map[string]bool{}
	for s := range strings.SplitSeq(v, ",") {
		s = strings.ToLower(strings.TrimSpace(s))
		if s == "" {
			continue
		}
		if !slices.Contains(allowed, s) {
			return nil, fmt.Errorf("--%s: unknown %q; want some of %s", flag, s, strings.Join(allowed, ", "))
		}
		want[s] = true
	}
	var out []string
	for _, s := range allowed {
		if want[s] {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--%s: empty", flag)
	}
	return out, nil
}

func runBench(ctx context.Context, f benchFlags, stdout, stderr io.Writer) error {
	scenarios, err := splitList("scenarios", f.scenarios, bench.Scenarios)
	if err != nil {
		return usageError(err)
	}
	systems, err := splitList("peers", f.peers, benchSystems)
	if err != nil {
		return usageError(err)
	}
	cfg := bench.DefaultConfig()
	cfg.Messages, cfg.Rate, cfg.Duration, cfg.Timeout = f.messages, f.rate, f.duration, f.timeout
	cfg.InFlight, cfg.Consumers, cfg.Prefetch, cfg.PayloadSize = f.inFlight, f.consumers, f.prefetch, f.size
	switch {
	case f.messages <= 0 || f.rate <= 0 || f.inFlight <= 0 || f.consumers <= 0 || f.prefetch <= 0:
		return usageError(fmt.Errorf("--messages, --rate, --inflight, --consumers and --prefetch must be positive"))
	case f.backlog < 0 || f.fanout < 0 || f.fanoutRate <= 0 || f.fanoutDuration <= 0:
		return usageError(fmt.Errorf("--backlog and --fanout must not be negative; --fanout-rate and --fanout-duration must be positive"))
	case f.fanoutTransport != "both" && f.fanoutTransport != "watchmany" && f.fanoutTransport != "sse":
		return usageError(fmt.Errorf("--fanout-transport %q: want watchmany, sse or both", f.fanoutTransport))
	case f.backlog > 0 && f.fanout > 0:
		return usageError(fmt.Errorf("--backlog and --fanout are separate modes; give one"))
	case f.duration <= 0 || f.timeout <= 0:
		return usageError(fmt.Errorf("--duration and --timeout must be positive"))
	case f.size < bench.MinPayloadSize:
		return usageError(fmt.Errorf("--size must be at least %d", bench.MinPayloadSize))
	case f.inProcess && f.heraldURL != "" || f.heraldBin != "" && (f.inProcess || f.heraldURL != ""):
		return usageError(fmt.Errorf("--herald-url, --herald-bin and --in-process each choose how Herald runs; give one"))
	case slices.Contains(systems, heraldPG) && !isPostgresDSN(f.pgDSN):
		return usageError(fmt.Errorf("--pg-dsn %q: want a postgres:// or postgresql:// URL", redactDSN(f.pgDSN)))
	}
	f.pgSchema = newPGSchema()
	if f.diskProbe != "" {
		if fi, err := os.Stat(f.diskProbe); err != nil || !fi.IsDir() {
			return usageError(fmt.Errorf("--disk-probe %q: not a directory", f.diskProbe))
		}
		cfg.ProbeDir = f.diskProbe
	}
	stopProfile, err := startProfile(f.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if f.memProfile != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			if mf, err := os.Create(f.memProfile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(mf, 0)
				mf.Close()
			}
		}()
	}
	stopTrace, err := startTrace(f.traceFile)
	if err != nil {
		return err
	}
	defer stopTrace()
	switch {
	case f.backlog > 0:
		return runBacklog(ctx, f, cfg, stdout, stderr)
	case f.fanout > 0:
		return runFanout(ctx, f, cfg, stdout, stderr)
	}
	var bar *progressBar
	if !f.noProgress {
		bar = &progressBar{w: stderr}
		cfg.Progress = bar.update
	}

	report := &bench.Report{Started: time.Now().UTC(), Config: cfg, Scenarios: scenarios}
	if slices.Contains(systems, "herald") {
		report.Herald = heraldMode(f)
	}
	if slices.Contains(systems, heraldPG) {
		report.HeraldPG = heraldPGMode(f)
	}
	for _, name := range systems {
		if ctx.Err() != nil {
			break
		}
		sys := measure(ctx, name, f, scenarios, cfg, stderr)
		if bar != nil {
			bar.clear()
		}
		report.Systems = append(report.Systems, sys)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.json {
		return report.WriteJSON(stdout)
	}
	return report.WriteMarkdown(stdout)
}

// measure opens one system, runs the scenarios on it and closes it; a system that
// cannot be reached comes back as unavailable, and one that was reached but could not
// be started (a failedStart) as failed in every scenario.
func measure(ctx context.Context, name string, f benchFlags, scenarios []string, cfg bench.Config, stderr io.Writer) bench.System {
	b, stop, err := openSystem(ctx, name, f, stderr)
	var failed *failedStart
	switch {
	case errors.As(err, &failed):
		return failedSystem(name, scenarios, err)
	case err != nil:
		return bench.System{Name: name, Unavailable: oneLine(err.Error())}
	}
	defer func() {
		_ = b.Close()
		if stop != nil {
			stop()
		}
	}()
	return bench.RunSystem(ctx, b, scenarios, cfg)
}

// openSystem connects to one system, starting a Herald server when no URL was given;
// stop, when not nil, stops that server (and drops herald-pg's schema). Warnings that
// do not stop the run go to warn.
func openSystem(ctx context.Context, name string, f benchFlags, warn io.Writer) (b bench.Broker, stop func(), err error) {
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	switch name {
	case "nats":
		b, err = natsbench.Open(octx, f.natsURL)
	case "rabbitmq":
		b, err = rabbitbench.Open(octx, f.amqpURL)
	case "redis":
		b, err = redisbench.Open(octx, f.redisAddr)
	case "herald":
		return openHerald(ctx, f)
	case heraldPG:
		return openHeraldPG(ctx, f, warn)
	default:
		err = fmt.Errorf("unknown system %q", name)
	}
	return b, nil, err
}

// heraldMode says, for the report, how Herald ran.
func heraldMode(f benchFlags) string {
	switch {
	case f.heraldURL != "":
		return fmt.Sprintf("the server at %s (--herald-url), as it was started", f.heraldURL)
	case f.inProcess:
		return fmt.Sprintf("**in-process** (--in-process): the server runs inside the bench's process and shares its CPUs and garbage collector with the clients; for profiling only, not comparable with the peers (--prepared-logs %d)", f.preparedLogs)
	}
	bin := "herald-bench's own copy of the herald command"
	if f.heraldBin != "" {
		bin = f.heraldBin
	}
	return fmt.Sprintf("a separate `herald serve` process (%s), a new data directory, the server's defaults but --prepared-logs %d", bin, f.preparedLogs)
}

// openHerald connects to f.heraldURL, or starts a server with a temporary data
// directory, as a separate `herald serve` process or, with f.inProcess, in this
// process, and connects to it.
func openHerald(ctx context.Context, f benchFlags) (bench.Broker, func(), error) {
	const synced = "Pebble store on local disk: every commit (publish, lease, ACK, NACK) is fsynced before the answer"
	url, durability := f.heraldURL, ""
	var stop func()
	var meter func(bool) (uint64, uint64, uint64)
	switch {
	case url != "":
	case f.inProcess:
		dir, err := os.MkdirTemp("", "herald-bench-")
		if err != nil {
			return nil, nil, err
		}
		srv := server.New(server.Config{
			DataDir:      dir,
			Listen:       "127.0.0.1:0",
			Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
			PreparedLogs: f.preparedLogs,
		})
		if err := srv.Start(ctx); err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
		stop = func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = srv.Stop(sctx)
			os.RemoveAll(dir)
		}
		url = "http://" + srv.Addr()
		durability = "in-process server (profiling only), " + synced
		meter = srv.StoreCounters
	default:
		p, err := startHeraldProcess(ctx, f.heraldBin, f.preparedLogs)
		if err != nil {
			return nil, nil, err
		}
		stop, url = p.stop, p.url
		durability = "herald serve process, " + synced
	}
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := heraldbench.Open(octx, url, durability, meter)
	if err == nil {
		if cerr := b.Check(octx); cerr != nil {
			b.Close()
			b, err = nil, fmt.Errorf("consume-mode watches not served: %w", cerr)
		}
	}
	if err != nil {
		if stop != nil {
			stop()
		}
		return nil, nil, err
	}
	return b.ForRunner(), stop, nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// progressBar draws one line on a terminal, rewritten in place with a carriage return.
type progressBar struct {
	mu   sync.Mutex
	w    io.Writer
	last string
}

const barWidth = 30

func (p *progressBar) update(pr bench.Progress) {
	frac := 0.0
	if pr.Total > 0 {
		frac = min(float64(pr.Done)/float64(pr.Total), 1)
	}
	fill := int(frac * barWidth)
	line := fmt.Sprintf("%-8s %s %-7s [%s%s] %3.0f%% %d/%d", pr.Broker, strings.ToUpper(pr.Scenario), pr.Phase,
		strings.Repeat("#", fill), strings.Repeat(".", barWidth-fill), frac*100, pr.Done, pr.Total)
	p.mu.Lock()
	defer p.mu.Unlock()
	if line != p.last {
		pad := ""
		if n := len(p.last) - len(line); n > 0 {
			pad = strings.Repeat(" ", n)
		}
		fmt.Fprintf(p.w, "\r%s%s", line, pad)
		p.last = line
	}
	if pr.Final {
		fmt.Fprintln(p.w)
		p.last = ""
	}
}

// clear ends a line left open.
func (p *progressBar) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last != "" {
		fmt.Fprintln(p.w)
		p.last = ""
	}
}
