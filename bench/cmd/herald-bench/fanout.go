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
	Watchers       int            `json:"watchers"`
	Rate           int            `json:"rate"`
	Duration       time.Duration  `json:"duration_ns"`
	WatchCPU       float64        `json:"watch_cpu,omitempty"` // the server's --watch-cpu; 0: its default
	Alone          publishFigures `json:"without_watchers"`
	Watched        publishFigures `json:"with_watchers"`
	RSSIdleWatch   float64        `json:"rss_per_idle_watch_bytes"`      // read once every stream has parked
	HeldIdleWatch  float64        `json:"rss_held_per_idle_watch_bytes"` // after a collection (see child.collect)
	Delivered      int64          `json:"events_delivered"`
	Expected       int64          `json:"events_expected"`
	Gaps           int64          `json:"events_in_gaps"`
	LagP50, LagP99 time.Duration  `json:"-"`
	CatchUp        time.Duration  `json:"catch_up_ns"`
	Lagging        bool           `json:"lagging"` // not caught up within catchUpBound
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
// fixed rate with no watcher and with f.fanout watchers on the published pattern, on a
// server of its own (a child process, so its memory per idle watch can be read too).
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

	logf("fan-out: opening %d watches", f.fanout)
	if err := srv.collect(ctx); err != nil {
		return err
	}
	rssBefore, _ := srv.rss()
	fan, err := startWatchers(ctx, srv.url, f.fanout)
	if err != nil {
		return err
	}
	defer fan.kill()
	// An idle stream parks (gives up its goroutine) after a second or two without work:
	// read the memory once every stream has.
	if err := waitParked(ctx, srv.url, f.fanout, 30*time.Second); err != nil {
		logf("fan-out: %v; reading the memory anyway", err)
	}
	if rssAfter, err := srv.rss(); err == nil {
		rep.RSSIdleWatch = (float64(rssAfter) - float64(rssBefore)) / float64(f.fanout)
	}
	if err := srv.collect(ctx); err != nil {
		return err
	}
	if rssHeld, err := srv.rss(); err == nil {
		rep.HeldIdleWatch = (float64(rssHeld) - float64(rssBefore)) / float64(f.fanout)
	}

	logf("fan-out: publishing %d msg/s for %v with %d watchers", f.fanoutRate, f.fanoutDuration, f.fanout)
	if rep.Watched, err = probedPublish(ctx, pub, f, cfg, rep.Alone.Published); err != nil {
		return err
	}
	end := time.Now()
	rep.Expected = int64(rep.Watched.Published) * int64(f.fanout)
	// Watchers may lag (best_effort ones report what they dropped as gaps); give them a
	// while to catch up, then report what they got.
	deadline := time.After(catchUpBound)
	for fan.seen() < rep.Expected && !rep.Lagging {
		select {
		case <-deadline:
			rep.Lagging = true
		case err := <-fan.failed:
			return fmt.Errorf("a watch ended: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	rep.CatchUp = time.Since(end)
	last, err := fan.stop()
	if err != nil {
		return err
	}
	rep.Delivered, rep.Gaps, rep.LagP50, rep.LagP99 = last.Delivered, last.Gaps, last.LagP50, last.LagP99
	srv.stop()

	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeFanout(stdout, rep)
}

func writeFanout(w io.Writer, rep fanoutReport) error {
	var b strings.Builder
	share := "its default"
	if rep.WatchCPU > 0 {
		share = strconv.FormatFloat(rep.WatchCPU, 'g', -1, 64)
	}
	fmt.Fprintf(&b, "Fan-out: one publisher at %d msg/s for %v, confirmed publishes; then again with %d watch-mode streams on the same pattern (best_effort, initial: none); the server's --watch-cpu is %s.\n\n",
		rep.Rate, rep.Duration, rep.Watchers, share)
	b.WriteString("| publish latency | p50 | p99 | max | disk probe meanwhile: syncs, p99, max |\n|---|---:|---:|---:|---:|\n")
	for _, r := range []struct {
		name string
		p    publishFigures
	}{{"no watcher", rep.Alone}, {fmt.Sprintf("%d watchers", rep.Watchers), rep.Watched}} {
		disk := "—"
		if d := r.p.Disk; d != nil {
			disk = fmt.Sprintf("%d, %v, %v", d.Syncs, d.P99.Round(time.Microsecond), d.Max.Round(time.Microsecond))
		}
		fmt.Fprintf(&b, "| %s | %v | %v | %v | %s |\n", r.name, r.p.P50.Round(time.Microsecond), r.p.P99.Round(time.Microsecond), r.p.Max.Round(time.Microsecond), disk)
	}
	ratio := 0.0
	if rep.Alone.P99 > 0 {
		ratio = float64(rep.Watched.P99) / float64(rep.Alone.P99)
	}
	fmt.Fprintf(&b, "\np99 with watchers ÷ p99 without: %.2f×\n\n", ratio)
	caught := fmt.Sprintf("caught up %v after publishing ended", rep.CatchUp.Round(time.Millisecond))
	if rep.Lagging {
		caught = fmt.Sprintf("still behind %v after publishing ended", catchUpBound)
	}
	fmt.Fprintf(&b, "Watchers: %d of %d events delivered, %d reported in gaps; delivery lag p50 %v, p99 %v; %s.\n",
		rep.Delivered, rep.Expected, rep.Gaps, rep.LagP50.Round(time.Microsecond), rep.LagP99.Round(time.Microsecond), caught)
	fmt.Fprintf(&b, "Server RSS per idle watch: %.1f KB once every stream has parked, %.1f KB held (after a collection).\n", rep.RSSIdleWatch/1024, rep.HeldIdleWatch/1024)
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
