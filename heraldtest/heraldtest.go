// Package heraldtest is the test kit of Herald's Go client. It starts an in-process
// server for tests — on 127.0.0.1 with a free port, an in-memory store by default,
// cleanup through testing.TB — and waits for what a worker test expects (WaitDrained,
// RequireAcked, RequireDeadLettered); Work runs a client.Worker on a payload without
// any server. With WithManualClock the server's time stands still until the test
// advances it, so ack timeouts and delays are tested without sleeping.
//
// Importing heraldtest links the whole server (engine, storage, both APIs) into the
// test binary, not into the program: see docs/worker.md for what it costs.
package heraldtest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/server"
	"github.com/herald-mq/herald/store/memstore"
)

// Option configures NewServer.
type Option func(*config)

type config struct {
	clockStart *time.Time
	disk       bool
	logger     *slog.Logger
	wait       time.Duration
	tp         trace.TracerProvider
}

// WithManualClock gives the server a clock that reads start and moves only when the
// test calls Server.Advance. Without it the server uses real time.
func WithManualClock(start time.Time) Option {
	return func(c *config) { c.clockStart = &start }
}

// WithDisk stores the server's data in a Pebble store in a temporary folder (removed at
// cleanup) instead of in memory, for tests of durability paths.
func WithDisk() Option { return func(c *config) { c.disk = true } }

// WithLogger sends the server's logs to l. By default they are discarded.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithTracerProvider gives the server a tracer provider: it records the commit, leases
// and settlements of each message that carries a trace context (docs/tracing.md).
// The client returned by Client uses the same provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// Server is a running in-process Herald server.
type Server struct {
	tb    testing.TB
	srv   *server.Server
	url   string
	clock *clock.Manual
	wait  time.Duration // bounds the wait-until helpers
	tp    trace.TracerProvider

	tempDir string

	mu     sync.Mutex
	client *client.Client

	closeOnce sync.Once
	closeErr  error
}

// NewServer starts a server on 127.0.0.1:0 and stops it when the test ends.
func NewServer(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := start(context.Background(), tb, opts)
	if err != nil {
		tb.Fatalf("heraldtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("heraldtest: %v", err)
		}
	})
	return s
}

// Start starts a server on 127.0.0.1:0 outside a test (in an example, a benchmark
// harness or a program); stop it with Close. The methods of a server started this way
// panic where NewServer's would fail the test.
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	return start(ctx, nil, opts)
}

func start(ctx context.Context, tb testing.TB, opts []Option) (*Server, error) {
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.wait <= 0 {
		cfg.wait = DefaultWaitTimeout
	}
	sc := server.Config{Listen: "127.0.0.1:0", Logger: cfg.logger, TracerProvider: cfg.tp}
	s := &Server{tb: tb, wait: cfg.wait, tp: cfg.tp}
	switch {
	case cfg.disk && tb != nil:
		sc.DataDir = tb.TempDir()
	case cfg.disk:
		dir, err := os.MkdirTemp("", "heraldtest-")
		if err != nil {
			return nil, err
		}
		sc.DataDir, s.tempDir = dir, dir
	default:
		sc.Backend = memstore.New()
	}
	if cfg.clockStart != nil {
		s.clock = clock.NewManual(*cfg.clockStart)
		sc.Clock = s.clock
	}
	s.srv = server.New(sc)
	if err := s.srv.Start(ctx); err != nil {
		if s.tempDir != "" {
			_ = os.RemoveAll(s.tempDir)
		}
		return nil, fmt.Errorf("start: %w", err)
	}
	s.url = "http://" + s.srv.Addr()
	return s, nil
}

// Close stops the server (and closes the client returned by Client). NewServer's
// cleanup calls it; it is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		c := s.client
		s.mu.Unlock()
		if c != nil {
			_ = c.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.srv.Stop(ctx); err != nil {
			s.closeErr = fmt.Errorf("stop: %w", err)
		}
		if s.tempDir != "" {
			_ = os.RemoveAll(s.tempDir)
		}
	})
	return s.closeErr
}

// fail reports a failure: through the test of NewServer, else by panicking.
func (s *Server) fail(format string, args ...any) {
	if s.tb != nil {
		s.tb.Helper()
		s.tb.Fatalf("heraldtest: "+format, args...)
	}
	panic(fmt.Sprintf("heraldtest: "+format, args...))
}

// URL returns the server's base URL, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return s.url }

// Client returns a client connected to the server; every call returns the same one,
// closed with the server.
func (s *Server) Client() *client.Client {
	if s.tb != nil {
		s.tb.Helper()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		opts := []client.Option{client.WithLogger(slog.New(slog.DiscardHandler))}
		if s.tp != nil {
			opts = append(opts, client.WithTracerProvider(s.tp))
		}
		c, err := client.Dial(context.Background(), s.url, opts...)
		if err != nil {
			s.fail("dial: %v", err)
		}
		s.client = c
	}
	return s.client
}

// Exec runs query on the server and fails (or panics) if it returns an error.
func (s *Server) Exec(query string, params map[string]any) *client.Response {
	if s.tb != nil {
		s.tb.Helper()
	}
	resp, err := s.Client().Exec(context.Background(), query, params)
	if err != nil {
		s.fail("%s: %v", query, err)
	}
	return resp
}

// ManualClock reports whether the server runs on a manual clock.
func (s *Server) ManualClock() bool { return s.clock != nil }

// Now returns the server clock's time.
func (s *Server) Now() time.Time {
	if s.clock != nil {
		return s.clock.Now()
	}
	return time.Now()
}

// Advance moves the server's manual clock forward by d, firing every timer due by then
// (ack timeouts, NACK delays, backoff). It fails the test without WithManualClock.
func (s *Server) Advance(d time.Duration) {
	if s.tb != nil {
		s.tb.Helper()
	}
	if s.clock == nil {
		s.fail("Advance needs WithManualClock")
	}
	s.clock.Advance(d)
}

// Clock returns the server's clock as a herald.Clock: the manual clock with
// WithManualClock, else nil (the server uses real time).
func (s *Server) Clock() herald.Clock {
	if s.clock == nil {
		return nil
	}
	return s.clock
}
