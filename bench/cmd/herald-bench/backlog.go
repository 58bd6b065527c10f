package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/herald-mq/herald/bench"
	heraldbench "github.com/herald-mq/herald/bench/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/server"
)

// serveChildCmd is the hidden first argument with which the command runs a Herald
// server of its own, as a child process that the backlog mode can kill -9.
const serveChildCmd = "__serve"

// serveChild runs a server until SIGTERM: --data, --listen, and --addr-file, where it
// writes its address once it serves.
func serveChild(args []string) int {
	fs := flag.NewFlagSet(serveChildCmd, flag.ContinueOnError)
	data := fs.String("data", "", "data directory")
	listen := fs.String("listen", "127.0.0.1:0", "address")
	addrFile := fs.String("addr-file", "", "file to write the address to")
	cpuprofile := fs.String("cpuprofile", "", "file to write a CPU profile of the server to")
	tracefile := fs.String("trace", "", "file to write an execution trace of the server to")
	watchCPU := fs.Float64("watch-cpu", 0, "the server's WatchCPUShare (0: its default)")
	preparedLogs := fs.Int("prepared-logs", 0, "the server's PreparedLogs")
	memprofile := fs.String("memprofile", "", "file to write an allocation profile of the server to at each collection the parent asks for")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	stopTrace, err := startTrace(*tracefile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopTrace()
	stopProfile, err := startProfile(*cpuprofile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopProfile()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv := server.New(server.Config{DataDir: *data, Listen: *listen, WatchCPUShare: *watchCPU, PreparedLogs: *preparedLogs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SSELinger: server.DefaultSSELinger, FeedLinger: server.DefaultFeedLinger}) // as herald serve runs
	if err := srv.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmp := *addrFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(srv.Addr()), 0o644); err != nil || os.Rename(tmp, *addrFile) != nil {
		fmt.Fprintln(os.Stderr, "cannot write the address file")
		return 1
	}
	go collectOnSignal(ctx, *addrFile+".gc", *memprofile)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Stop(sctx)
	return 0
}

// collectOnSignal answers SIGUSR1 until ctx ends: it collects garbage, returns the
// free memory to the system, writes the allocation profile so far to memprofile when
// one is named, and then writes the count of collections so far to file, so the parent
// can read the memory the server holds rather than what the last burst of work left
// for the collector (child.collect).
func collectOnSignal(ctx context.Context, file, memprofile string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	defer signal.Stop(sig)
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-sig:
		}
		debug.FreeOSMemory() // a full collection first, then the release
		if memprofile != "" {
			writeAllocs(memprofile)
		}
		tmp := file + ".tmp"
		if os.WriteFile(tmp, []byte(strconv.Itoa(n)), 0o644) == nil {
			_ = os.Rename(tmp, file)
		}
	}
}

// child is a server process of the backlog mode.
type child struct {
	cmd       *exec.Cmd
	url       string
	addrFile  string
	started   time.Time
	collected int // collections asked for (collect)
}

// childProfileFlags are the flags that have a server child write the CPU profile and
// trace asked for, beside the run's (FILE.server): it runs in a process of its own.
func childProfileFlags(f benchFlags) []string {
	var out []string
	if f.cpuProfile != "" {
		out = append(out, "--cpuprofile", f.cpuProfile+".server")
	}
	if f.traceFile != "" {
		out = append(out, "--trace", f.traceFile+".server")
	}
	return out
}

// startChild starts a server process on dir and waits until it has written its address.
// Extra arguments go to the child's flags.
func startChild(ctx context.Context, dir string, preparedLogs int, extra ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addrFile := filepath.Join(dir, "addr")
	_ = os.Remove(addrFile)
	args := append([]string{serveChildCmd, "--data", filepath.Join(dir, "data"), "--addr-file", addrFile, "--prepared-logs", strconv.Itoa(preparedLogs)}, extra...)
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	c := &child{cmd: cmd, addrFile: addrFile, started: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for {
		if b, err := os.ReadFile(addrFile); err == nil {
			c.url = "http://" + string(b)
			return c, nil
		}
		select {
		case <-ctx.Done():
			c.kill()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if cmd.ProcessState != nil {
			return nil, errors.New("the server process ended")
		}
	}
}

func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	_ = c.cmd.Wait()
}

func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
}

// collect has the server collect its garbage and give free memory back to the system,
// and waits until it has (see collectOnSignal).
func (c *child) collect(ctx context.Context) error {
	c.collected++
	want := strconv.Itoa(c.collected)
	if err := c.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return err
	}
	for end := time.Now().Add(30 * time.Second); ; {
		if b, err := os.ReadFile(c.addrFile + ".gc"); err == nil && string(b) == want {
			return nil
		}
		if time.Now().After(end) {
			return errors.New("the server did not report its collection within 30s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// rss reads the resident memory of the process, in bytes, from /proc.
func (c *child) rss() (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc")
}

// backlogReport is what the backlog mode measured.
type backlogReport struct {
	Messages        int           `json:"messages"`
	PayloadSize     int           `json:"payload_size"`
	FillTime        time.Duration `json:"fill_ns"`
	RSSEmpty        uint64        `json:"rss_empty_bytes"`
	RSSFull         uint64        `json:"rss_full_bytes"`
	RSSPerMessage   float64       `json:"rss_per_message_bytes"`
	CountTime       time.Duration `json:"count_ns"`
	FirstMessage    time.Duration `json:"new_group_first_message_ns"`
	RestartReady    time.Duration `json:"restart_ready_ns"`
	RestartConsumed time.Duration `json:"restart_first_consumed_ns"`
}

func runBacklog(ctx context.Context, f benchFlags, cfg bench.Config, stdout, stderr io.Writer) error {
	dir, err := os.MkdirTemp("", "herald-backlog-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := startChild(ctx, dir, f.preparedLogs)
	if err != nil {
		return fmt.Errorf("starting the server: %w", err)
	}
	defer func() { srv.kill() }()
	c, err := client.Dial(ctx, srv.url, client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	defer c.Close()
	rep := backlogReport{Messages: f.backlog, PayloadSize: cfg.PayloadSize}
	if _, err := c.Exec(ctx, "node "+heraldbench.Type+" { body: String }", nil); err != nil {
		return err
	}
	rep.RSSEmpty, _ = srv.rss()

	// Fill, cfg.InFlight publishes at a time.
	var bar *progressBar
	if !f.noProgress {
		bar = &progressBar{w: stderr}
	}
	start := time.Now()
	var next, done atomic.Int64
	var wg sync.WaitGroup
	fctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	for range cfg.InFlight {
		wg.Go(func() {
			for {
				id := next.Add(1) - 1
				if id >= int64(f.backlog) || fctx.Err() != nil {
					return
				}
				body := string(bench.NewPayload(uint64(id), time.Now(), cfg.PayloadSize))
				if _, err := c.Publish(fctx, heraldbench.Type, map[string]any{"body": body}); err != nil {
					fail(err)
					return
				}
				if n := done.Add(1); bar != nil && n%1000 == 0 {
					bar.update(bench.Progress{Broker: "herald", Scenario: "backlog", Phase: "fill", Done: int(n), Total: f.backlog})
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(fctx); err != nil {
		return fmt.Errorf("filling: %w", err)
	}
	if bar != nil {
		bar.update(bench.Progress{Broker: "herald", Scenario: "backlog", Phase: "fill", Done: f.backlog, Total: f.backlog, Final: true})
	}
	rep.FillTime = time.Since(start)
	time.Sleep(2 * time.Second) // let the server settle (flushes, the body cache) before reading its memory
	rep.RSSFull, _ = srv.rss()
	rep.RSSPerMessage = float64(rep.RSSFull) / float64(f.backlog)

	// COUNT of the type: the median of five.
	var counts []time.Duration
	for range 5 {
		t0 := time.Now()
		resp, err := c.Exec(ctx, "MATCH m: "+heraldbench.Type+" RETURN COUNT(m)", nil)
		if err != nil {
			return err
		}
		counts = append(counts, time.Since(t0))
		if got := resp.Last().Rows[0][0]; got != int64(f.backlog) {
			return fmt.Errorf("COUNT = %v, want %d", got, f.backlog)
		}
	}
	slices.Sort(counts)
	rep.CountTime = counts[len(counts)/2]

	// A new consumer group: how soon its first message arrives.
	if rep.FirstMessage, err = firstMessage(ctx, c, "backlog-probe"); err != nil {
		return err
	}

	// kill -9, then restart on the same data. The restarted server is stopped
	// gracefully, so it can write the profiles asked for.
	srv.kill()
	c.Close()
	srv, err = startChild(ctx, dir, f.preparedLogs, childProfileFlags(f)...)
	if err != nil {
		return fmt.Errorf("restarting the server: %w", err)
	}
	for {
		resp, err := http.Get(srv.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				rep.RestartReady = time.Since(srv.started)
				break
			}
		}
		if time.Since(srv.started) > time.Minute {
			return errors.New("the restarted server was not ready within a minute")
		}
		time.Sleep(2 * time.Millisecond)
	}
	c2, err := client.Dial(ctx, srv.url, client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	defer c2.Close()
	if _, err := firstMessage(ctx, c2, "backlog-after-restart"); err != nil {
		return err
	}
	rep.RestartConsumed = time.Since(srv.started)
	srv.stop()

	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Backlog: %d messages of %d B, filled in %v (%s msg/s).\n\n", rep.Messages, rep.PayloadSize, rep.FillTime.Round(time.Millisecond), fmtRate(float64(rep.Messages)/rep.FillTime.Seconds()))
	b.WriteString("| figure | value |\n|---|---:|\n")
	fmt.Fprintf(&b, "| server RSS, empty | %.1f MiB |\n", float64(rep.RSSEmpty)/(1<<20))
	fmt.Fprintf(&b, "| server RSS with the backlog | %.1f MiB |\n", float64(rep.RSSFull)/(1<<20))
	fmt.Fprintf(&b, "| RSS per queued message | %.0f B |\n", rep.RSSPerMessage)
	fmt.Fprintf(&b, "| `MATCH m: %s RETURN COUNT(m)` | %v |\n", heraldbench.Type, rep.CountTime.Round(time.Microsecond))
	fmt.Fprintf(&b, "| a new consumer group's first message | %v |\n", rep.FirstMessage.Round(time.Microsecond))
	fmt.Fprintf(&b, "| after kill -9: start to /readyz | %v |\n", rep.RestartReady.Round(time.Millisecond))
	fmt.Fprintf(&b, "| after kill -9: start to the first message consumed | %v |\n", rep.RestartConsumed.Round(time.Millisecond))
	_, err = io.WriteString(stdout, b.String())
	return err
}

// firstMessage subscribes a new group and returns how long its first message took; the
// message is given back.
func firstMessage(ctx context.Context, c *client.Client, group string) (time.Duration, error) {
	got := make(chan struct{}, 1)
	t0 := time.Now()
	sub, err := c.Subscribe(ctx, fmt.Sprintf(`WATCH m: %s [mode: consume, group: %q] RETURN m.body AS body`, heraldbench.Type, group),
		func(context.Context, *client.Message) error {
			select {
			case got <- struct{}{}:
			default:
			}
			return nil
		}, client.WithPolicy(client.Manual), client.WithPrefetch(1))
	if err != nil {
		return 0, err
	}
	defer sub.Close(context.Background())
	select {
	case <-got:
		return time.Since(t0), nil
	case <-time.After(time.Minute):
		return 0, errors.New("no message within a minute")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func fmtRate(r float64) string { return strconv.FormatFloat(r, 'f', 0, 64) }

// writeAllocs replaces file with the allocation profile of the process so far.
func writeAllocs(file string) {
	tmp := file + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	err = pprof.Lookup("allocs").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
