package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herald-mq/herald/bench"
	heraldbench "github.com/herald-mq/herald/bench/herald"
	"github.com/herald-mq/herald/client"
)

// watchersPerClient is how many watch streams share one client (one HTTP/2
// connection) in the fan-out mode.
const watchersPerClient = 100

// fanoutReport is what the fan-out mode measured.
type fanoutReport struct {
	Watchers      int            `json:"watchers"`
	Rate          int            `json:"rate"`
	Duration      time.Duration  `json:"duration_ns"`
	WatchCPU      float64        `json:"watch_cpu,omitempty"` // the server's --watch-cpu; 0: its default
	Alone         publishFigures `json:"without_watchers"`
	RSSIdleWatch  float64        `json:"rss_per_idle_watch_bytes"`      // read once every stream has parked
	HeldIdleWatch float64        `json:"rss_held_per_idle_watch_bytes"` // after a collection (see child.collect)
	// Phases are the runs with watchers: WatchMany streams through the Go client
	// (HTTP/2, a hundred watches a connection), then server-sent-event streams (what
	// browsers and curl read: HTTP/1.1, one connection each).
	Phases []fanoutPhase `json:"with_watchers"`
}

// fanoutPhase is one run with watchers: the publisher's latency meanwhile, and what
// the watchers received.
type fanoutPhase struct {
	Transport string         `json:"transport"`
	Watched   publishFigures `json:"publish"`
	Delivered int64          `json:"events_delivered"`
	Expected  int64          `json:"events_expected"`
	Gaps      int64          `json:"events_in_gaps"`
	PerSecond float64        `json:"events_per_second"` // delivered (or dropped as gaps) while publishing, a second
	// DeliveredRate is the events delivered (gaps not counted) a second, from the start of
	// publishing until the watchers had caught up: what the streams carried.
	DeliveredRate  float64       `json:"delivered_per_second"`
	LagP50, LagP99 time.Duration `json:"-"`
	CatchUp        time.Duration `json:"catch_up_ns"`
	Lagging        bool          `json:"lagging"` // not caught up within catchUpBound
}

// catchUpBound is how long the watchers get to catch up once publishing has ended.
const catchUpBound = 30 * time.Second

type publishFigures struct {
	Published int           `json:"published"`
	P50       time.Duration `json:"p50_ns"`
	P99       time.Duration `json:"p99_ns"`
	Max       time.Duration `json:"max_ns"`
	// Disk is what the disk probe saw meanwhile (--disk-probe): the publisher waits
	// for syncs, so a stall there moves this run's p99 whatever the watchers do.
	Disk *bench.DiskSync `json:"disk_sync,omitempty"`
}

// runFanout measures what watch-mode streams cost writers: the publish latency at a
// fixed rate with no watcher, then with f.fanout WatchMany watchers on the published
// pattern, then with as many server-sent-event watchers, on a server of its own (a
// child process, so its memory per idle watch can be read too).
func runFanout(ctx context.Context, f benchFlags, cfg bench.Config, stdout, stderr io.Writer) error {
	dir, err := os.MkdirTemp("", "herald-fanout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	extra := childProfileFlags(f)
	if f.fanoutCPU > 0 {
		extra = append(extra, "--watch-cpu", strconv.FormatFloat(f.fanoutCPU, 'g', -1, 64))
	}
	if f.memProfile != "" {
		extra = append(extra, "--memprofile", f.memProfile+".server")
	}
	srv, err := startChild(ctx, dir, f.preparedLogs, extra...)
	if err != nil {
		return fmt.Errorf("starting the server: %w", err)
	}
	defer srv.kill()
	quiet := client.WithLogger(slog.New(slog.DiscardHandler))
	pub, err := client.Dial(ctx, srv.url, quiet)
	if err != nil {
		return err
	}
	defer pub.Close()
	if _, err := pub.Exec(ctx, "node "+heraldbench.Type+" { body: String }", nil); err != nil {
		return err
	}
	rep := fanoutReport{Watchers: f.fanout, Rate: f.fanoutRate, Duration: f.fanoutDuration, WatchCPU: f.fanoutCPU}
	logf := func(format string, args ...any) {
		if !f.noProgress {
			fmt.Fprintf(stderr, format+"\n", args...)
		}
	}

	logf("fan-out: publishing %d msg/s for %v with no watcher", f.fanoutRate, f.fanoutDuration)
	if rep.Alone, err = probedPublish(ctx, pub, f, cfg, 0); err != nil {
		return err
	}
	published := rep.Alone.Published
	for _, sse := range []bool{false, true} {
		if (sse && f.fanoutTransport == "watchmany") || (!sse && f.fanoutTransport == "sse") {
			continue
		}
		ph, err := fanoutRun(ctx, f, cfg, srv, pub, sse, published, &rep, logf)
		if err != nil {
			return err
		}
		published += ph.Watched.Published
		rep.Phases = append(rep.Phases, ph)
	}
	srv.stop()

	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeFanout(stdout, rep)
}

// fanoutRun opens the watchers of one phase (sse: server-sent events, else WatchMany),
// publishes at the rate meanwhile, waits for the watchers to catch up and ends them.
// The first phase also reads the server's memory per idle watch into rep. Ids start
// at first.
func fanoutRun(ctx context.Context, f benchFlags, cfg bench.Config, srv *child, pub *client.Client, sse bool, first int, rep *fanoutReport, logf func(string, ...any)) (fanoutPhase, error) {
	ph := fanoutPhase{Transport: "WatchMany"}
	if sse {
		ph.Transport = "server-sent events"
	}
	logf("fan-out: opening %d %s watches", f.fanout, ph.Transport)
	if err := srv.collect(ctx); err != nil {
		return ph, err
	}
	rssBefore, _ := srv.rss()
	var watchProfile string
	if f.cpuProfile != "" {
		watchProfile = f.cpuProfile + ".watchers"
		if sse {
			watchProfile += "-sse"
		}
	}
	fan, err := startWatchers(ctx, srv.url, f.fanout, sse, watchProfile)
	if err != nil {
		return ph, err
	}
	defer fan.kill()
	if !sse {
		// An idle stream parks (gives up its goroutine) after a second or two without
		// work: read the memory once every stream has.
		if err := waitParked(ctx, srv.url, f.fanout, 30*time.Second); err != nil {
			logf("fan-out: %v; reading the memory anyway", err)
		}
		if rssAfter, err := srv.rss(); err == nil {
			rep.RSSIdleWatch = (float64(rssAfter) - float64(rssBefore)) / float64(f.fanout)
		}
		if err := srv.collect(ctx); err != nil {
			return ph, err
		}
		if rssHeld, err := srv.rss(); err == nil {
			rep.HeldIdleWatch = (float64(rssHeld) - float64(rssBefore)) / float64(f.fanout)
		}
	}
	logf("fan-out: publishing %d msg/s for %v with %d %s watchers", f.fanoutRate, f.fanoutDuration, f.fanout, ph.Transport)
	start := time.Now()
	if ph.Watched, err = probedPublish(ctx, pub, f, cfg, first); err != nil {
		return ph, err
	}
	end := time.Now()
	ph.PerSecond = float64(fan.seen()) / end.Sub(start).Seconds()
	ph.Expected = int64(ph.Watched.Published) * int64(f.fanout)
	// Watchers may lag (best_effort ones report what they dropped as gaps); give them a
	// while to catch up, then report what they got.
	deadline := time.After(catchUpBound)
	for fan.seen() < ph.Expected && !ph.Lagging {
		select {
		case <-deadline:
			ph.Lagging = true
		case err := <-fan.failed:
			return ph, fmt.Errorf("a watch ended: %w", err)
		case <-ctx.Done():
			return ph, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	ph.CatchUp = time.Since(end)
	last, err := fan.stop()
	if err != nil {
		return ph, err
	}
	ph.Delivered, ph.Gaps, ph.LagP50, ph.LagP99 = last.Delivered, last.Gaps, last.LagP50, last.LagP99
	ph.DeliveredRate = float64(ph.Delivered) / (end.Sub(start) + ph.CatchUp).Seconds()
	return ph, nil
}

func writeFanout(w io.Writer, rep fanoutReport) error {
	var b strings.Builder
	share := "its default"
	if rep.WatchCPU > 0 {
		share = strconv.FormatFloat(rep.WatchCPU, 'g', -1, 64)
	}
	fmt.Fprintf(&b, "Fan-out: one publisher at %d msg/s for %v, confirmed publishes; then again with %d watch-mode streams on the same pattern (best_effort, initial: none), first WatchMany streams, then server-sent-event streams; the server's --watch-cpu is %s.\n\n",
		rep.Rate, rep.Duration, rep.Watchers, share)
	b.WriteString("| publish latency | p50 | p99 | max | p99 ÷ p99 without | disk probe meanwhile: syncs, p99, max |\n|---|---:|---:|---:|---:|---:|\n")
	row := func(name string, p publishFigures) {
		disk := "—"
		if d := p.Disk; d != nil {
			disk = fmt.Sprintf("%d, %v, %v", d.Syncs, d.P99.Round(time.Microsecond), d.Max.Round(time.Microsecond))
		}
		ratio := 0.0
		if rep.Alone.P99 > 0 {
			ratio = float64(p.P99) / float64(rep.Alone.P99)
		}
		fmt.Fprintf(&b, "| %s | %v | %v | %v | %.2f× | %s |\n", name, p.P50.Round(time.Microsecond), p.P99.Round(time.Microsecond), p.Max.Round(time.Microsecond), ratio, disk)
	}
	row("no watcher", rep.Alone)
	for _, ph := range rep.Phases {
		row(fmt.Sprintf("%d %s watchers", rep.Watchers, ph.Transport), ph.Watched)
	}
	b.WriteString("\n| watchers | events delivered | of | in gaps | events/s while publishing | delivered/s until caught up | lag p50 | lag p99 | caught up |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, ph := range rep.Phases {
		caught := fmt.Sprintf("%v after publishing ended", ph.CatchUp.Round(time.Millisecond))
		if ph.Lagging {
			caught = fmt.Sprintf("still behind %v after publishing ended", catchUpBound)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.0f | %.0f | %v | %v | %s |\n", ph.Transport, ph.Delivered, ph.Expected, ph.Gaps, ph.PerSecond, ph.DeliveredRate,
			ph.LagP50.Round(time.Microsecond), ph.LagP99.Round(time.Microsecond), caught)
	}
	fmt.Fprintf(&b, "\nServer RSS per idle watch (WatchMany): %.1f KB once every stream has parked, %.1f KB held (after a collection).\n", rep.RSSIdleWatch/1024, rep.HeldIdleWatch/1024)
	_, err := io.WriteString(w, b.String())
	return err
}

// probedPublish runs publishAtRate with the disk probe beside it when one is asked for.
func probedPublish(ctx context.Context, c *client.Client, f benchFlags, cfg bench.Config, first int) (publishFigures, error) {
	var fig publishFigures
	disk, err := bench.Probed(cfg.ProbeDir, cfg.ProbeEvery, func() error {
		var err error
		fig, err = publishAtRate(ctx, c, f.fanoutRate, f.fanoutDuration, cfg.PayloadSize, first)
		return err
	})
	fig.Disk = disk
	return fig, err
}

// publishAtRate publishes rate msg/s for d, open loop: each message is due at its
// scheduled time, its latency counts from then to its confirmation. Ids start at first.
func publishAtRate(ctx context.Context, c *client.Client, rate int, d time.Duration, size, first int) (publishFigures, error) {
	total := int(d.Seconds() * float64(rate))
	lat := make([]time.Duration, total)
	interval := time.Second / time.Duration(rate)
	pctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range total {
		due := start.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			select {
			case <-time.After(wait):
			case <-pctx.Done():
			}
		}
		if pctx.Err() != nil {
			break
		}
		body := string(bench.NewPayload(uint64(first+i), due, size))
		fut := c.PublishAsync(heraldbench.Type, map[string]any{"body": body})
		wg.Go(func() {
			select {
			case <-fut.Done():
			case <-pctx.Done():
				return
			}
			if _, _, err := fut.Result(); err != nil {
				fail(err)
				return
			}
			lat[i] = time.Since(due)
		})
	}
	wg.Wait()
	if err := context.Cause(pctx); err != nil && ctx.Err() == nil {
		return publishFigures{}, fmt.Errorf("publishing: %w", err)
	}
	p50, p99, maxd := bench.Percentiles(lat)
	return publishFigures{Published: total, P50: p50, P99: p99, Max: maxd}, ctx.Err()
}

// waitParked waits until the server at url reports at least n parked watch streams
// (its herald_watch_streams_parked gauge), or bound has passed.
func waitParked(ctx context.Context, url string, n int, bound time.Duration) error {
	end := time.Now().Add(bound)
	var have float64
	for {
		if v, err := gauge(ctx, url, "herald_watch_streams_parked"); err == nil {
			have = v
			if v >= float64(n) {
				return nil
			}
		}
		if time.Now().After(end) {
			return fmt.Errorf("%v parked streams of %d after %v", have, n, bound)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// gauge reads one unlabelled metric from the server's /metrics.
func gauge(ctx context.Context, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	// Uncompressed: a gzip answer would leave the server holding a compressor (a few
	// hundred KB each, pooled) that the memory per watch would then count.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, fmt.Errorf("%s: not in /metrics", name)
}
