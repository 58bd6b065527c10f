package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/herald-mq/herald/internal/cli"
)

// heraldChildCmd is the hidden first argument with which the command runs the herald
// command line (the same code as the herald binary's main) in a process of its own: how
// S1–S3 measure Herald by default, without a herald binary at hand.
const heraldChildCmd = "__herald"

// heraldChild runs the herald command line with args, as cmd/herald does.
func heraldChild(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := cli.Run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	return cli.ExitCode(err)
}

// heraldProcess is a `herald serve` process the bench started: on a temporary data
// directory (the Pebble store), or on a PostgreSQL schema (herald-pg).
type heraldProcess struct {
	cmd  *exec.Cmd
	dir  string // its temporary directory, or ""
	url  string
	done chan struct{} // closed once the process has exited
	err  error         // its exit, once done

	mu   sync.Mutex
	tail []string // the last lines it logged, for an error
}

// startHeraldProcess runs `herald serve` in a process of its own, with a temporary data
// directory, on a free loopback port, with the server's defaults but for
// --prepared-logs; bin is the herald binary, or "" for this command's own copy of the
// herald command line. It returns once the server has logged that it listens.
func startHeraldProcess(ctx context.Context, bin string, preparedLogs int) (*heraldProcess, error) {
	dir, err := os.MkdirTemp("", "herald-bench-")
	if err != nil {
		return nil, err
	}
	p, err := startServe(ctx, bin, dir, "--data", filepath.Join(dir, "data"), "--prepared-logs", strconv.Itoa(preparedLogs))
	if err != nil {
		os.RemoveAll(dir)
	}
	return p, err
}

// startHeraldPGProcess runs `herald serve --store dsn --store-schema schema` in a
// process of its own, on a free loopback port, with the server's defaults otherwise: a
// node of its own on the PostgreSQL store, which it leads since nobody else uses the
// schema. It returns once the server has logged that it listens.
func startHeraldPGProcess(ctx context.Context, bin, dsn, schema string) (*heraldProcess, error) {
	return startServe(ctx, bin, "", "--store", dsn, "--store-schema", schema)
}

// startServe runs `herald serve` with the store arguments given, on a free loopback
// port, logging JSON, and returns once the server has logged the address it listens
// on. dir, when not "", is the process's temporary directory, which stop removes.
func startServe(ctx context.Context, bin, dir string, store ...string) (*heraldProcess, error) {
	args := append(append([]string{"serve"}, store...), "--listen", "127.0.0.1:0", "--log-format", "json")
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		bin, args = self, append([]string{heraldChildCmd}, args...)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = io.Discard
	logs, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s serve: %w", bin, err)
	}
	p := &heraldProcess{cmd: cmd, dir: dir, done: make(chan struct{})}
	addr := make(chan string, 1)
	go p.readLog(logs, addr)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	select {
	case a := <-addr:
		p.url = "http://" + a
		return p, nil
	case <-p.done:
		p.stop()
		return nil, fmt.Errorf("herald serve exited before it listened (%v): %s", p.err, p.lastLines())
	case <-time.After(time.Minute):
		p.stop()
		return nil, fmt.Errorf("herald serve did not listen within a minute: %s", p.lastLines())
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

// readLog reads the server's JSON log: it reports the address of the "listening"
// record and keeps the last lines.
func (p *heraldProcess) readLog(r io.Reader, addr chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		if p.tail = append(p.tail, line); len(p.tail) > 20 {
			p.tail = p.tail[1:]
		}
		p.mu.Unlock()
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
			select {
			case addr <- rec.Addr:
			default:
			}
		}
	}
}

func (p *heraldProcess) lastLines() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// stop ends the server with SIGTERM (SIGKILL if it has not exited 30 s later) and
// removes its temporary directory, if it has one.
func (p *heraldProcess) stop() {
	if p.dir != "" {
		defer os.RemoveAll(p.dir)
	}
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
