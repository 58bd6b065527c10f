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
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/bench"
	heraldbench "github.com/herald-mq/herald/bench/herald"
	"github.com/herald-mq/herald/client"
)

// The fan-out mode's watchers run in a process of their own, so that reading a
// thousand streams does not take the CPU of the publisher whose latency is measured
// (the machine's cores are still shared, as they are between any broker's clients).

// watchChildCmd is the hidden first argument with which the command runs the watchers.
const watchChildCmd = "__watch"

// watchProgress is a line the watcher process writes: its counts so far, and at the
// end the delivery lags; Err when a watch failed.
type watchProgress struct {
	Ready     bool          `json:"ready,omitempty"`
	Delivered int64         `json:"delivered"`
	Gaps      int64         `json:"gaps"`
	LagP50    time.Duration `json:"lag_p50_ns,omitempty"`
	LagP99    time.Duration `json:"lag_p99_ns,omitempty"`
	Done      bool          `json:"done,omitempty"`
	Err       string        `json:"error,omitempty"`
}

// watchChild runs --n watch streams against --url until SIGTERM, writing a progress
// line to stdout every 20ms and a last one with the lags when it ends.
func watchChild(args []string) int {
	fs := flag.NewFlagSet(watchChildCmd, flag.ContinueOnError)
	url := fs.String("url", "", "server")
	n := fs.Int("n", 1, "watch streams")
	sse := fs.Bool("sse", false, "read server-sent events (GET /v1/watch) instead of WatchMany")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the watchers' process to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	stopProfile, err := startProfile(*cpuprofile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopProfile()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	out := json.NewEncoder(os.Stdout)
	open := openWatchers
	if *sse {
		open = openSSEWatchers
	}
	fan, err := open(ctx, *url, *n)
	if err != nil {
		_ = out.Encode(watchProgress{Err: err.Error()})
		return 1
	}
	_ = out.Encode(watchProgress{Ready: true})
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-fan.failed:
			_ = out.Encode(watchProgress{Err: err.Error()})
			fan.close()
			return 1
		case <-tick.C:
			_ = out.Encode(watchProgress{Delivered: fan.delivered.Load(), Gaps: fan.gaps.Load()})
		case <-ctx.Done():
			last := watchProgress{Done: true, Delivered: fan.delivered.Load(), Gaps: fan.gaps.Load()}
			last.LagP50, last.LagP99, _ = bench.Percentiles(fan.lags())
			_ = out.Encode(last)
			return 0
		}
	}
}

// watchProc is the watcher process as the fan-out mode sees it.
type watchProc struct {
	cmd    *exec.Cmd
	latest atomic.Pointer[watchProgress]
	failed chan error
	ended  chan watchProgress
}

// startWatchers starts the watcher process and waits until its n streams are open:
// WatchMany streams through the Go client, or with sse server-sent-event streams. With
// cpuprofile set, the process writes its CPU profile there.
func startWatchers(ctx context.Context, url string, n int, sse bool, cpuprofile string) (*watchProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{watchChildCmd, "--url", url, "--n", fmt.Sprint(n), fmt.Sprintf("--sse=%v", sse)}
	if cpuprofile != "" {
		args = append(args, "--cpuprofile", cpuprofile)
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &watchProc{cmd: cmd, failed: make(chan error, 1), ended: make(chan watchProgress, 1)}
	p.latest.Store(&watchProgress{})
	ready := make(chan struct{})
	go p.read(stdout, ready)
	select {
	case <-ready:
		return p, nil
	case err := <-p.failed:
		p.kill()
		return nil, err
	case <-ctx.Done():
		p.kill()
		return nil, ctx.Err()
	}
}

// read follows the process's progress lines until its stdout ends.
func (p *watchProc) read(r io.Reader, ready chan struct{}) {
	sc := bufio.NewScanner(r)
	gotReady := false
	for sc.Scan() {
		var line watchProgress
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			continue
		}
		switch {
		case line.Err != "":
			p.failed <- errors.New(line.Err)
			return
		case line.Ready && !gotReady:
			gotReady = true
			close(ready)
		case line.Done:
			p.latest.Store(&line)
			p.ended <- line
			return
		default:
			p.latest.Store(&line)
		}
	}
	p.failed <- errors.New("the watcher process ended")
}

// seen counts the events delivered or reported in gaps, as of the last progress line.
func (p *watchProc) seen() int64 {
	l := p.latest.Load()
	return l.Delivered + l.Gaps
}

// stop ends the watches and returns the final counts and lags.
func (p *watchProc) stop() (watchProgress, error) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	defer func() { _ = p.cmd.Wait() }()
	select {
	case last := <-p.ended:
		return last, nil
	case err := <-p.failed:
		return watchProgress{}, err
	case <-time.After(30 * time.Second):
		p.kill()
		return watchProgress{}, errors.New("the watcher process did not end")
	}
}

func (p *watchProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// fanout holds the watchers of the fan-out mode and what they saw.
type fanout struct {
	clients   []*client.Client
	watches   []*client.Watch
	wg        sync.WaitGroup
	delivered atomic.Int64
	gaps      atomic.Int64
	failed    chan error

	mu      sync.Mutex
	lagList []time.Duration

	stopSSE func() // ends the server-sent-event streams (nil for WatchMany ones)
}

// openWatchers opens n watch-mode streams on the benchmark type, watchersPerClient to
// a client, each read by a goroutine of its own.
func openWatchers(ctx context.Context, url string, n int) (*fanout, error) {
	fan := &fanout{failed: make(chan error, n)}
	query := "WATCH m: " + heraldbench.Type + " [initial: none] RETURN m.body AS body"
	for i := range n {
		if i%watchersPerClient == 0 {
			c, err := client.Dial(ctx, url, client.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				fan.close()
				return nil, err
			}
			fan.clients = append(fan.clients, c)
		}
		w, err := fan.clients[len(fan.clients)-1].Watch(ctx, query)
		if err != nil {
			fan.close()
			return nil, fmt.Errorf("watch %d: %w", i, err)
		}
		fan.watches = append(fan.watches, w)
		fan.wg.Go(func() { fan.read(ctx, w) })
	}
	return fan, nil
}

func (f *fanout) read(ctx context.Context, w *client.Watch) {
	var lags []time.Duration
	var seen int
	defer func() {
		f.mu.Lock()
		f.lagList = append(f.lagList, lags...)
		f.mu.Unlock()
	}()
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				f.failed <- err
			}
			return
		}
		switch ev.Type {
		case herald.EventAdded:
			if seen++; seen%lagSample == 0 {
				body, _ := ev.Match["body"].(string)
				if _, sent, err := bench.ParsePayload([]byte(body)); err == nil {
					lags = append(lags, time.Since(sent))
				}
			}
			f.delivered.Add(1)
		case herald.EventGap:
			f.gaps.Add(int64(ev.Count))
		}
	}
}

// lags returns the delivery lags of the watches that have ended; close ends them all.
func (f *fanout) lags() []time.Duration {
	f.close()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lagList
}

func (f *fanout) close() {
	if f.stopSSE != nil {
		f.stopSSE()
	}
	for _, w := range f.watches {
		_ = w.Close()
	}
	f.watches = nil
	f.wg.Wait()
	for _, c := range f.clients {
		_ = c.Close()
	}
	f.clients = nil
}
