// Package server composes a Herald process: the store, the engine, the consume engine, and
// the JSON and RPC APIs on one port, with one lifecycle (Start, Stop) around them.
// Stop drains gracefully: it stops accepting, lets in-flight requests finish, then closes the engine and the store.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/auth"
	"github.com/herald-mq/herald/console"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/httpapi"
	"github.com/herald-mq/herald/rpcapi"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/pebblestore"
	"github.com/herald-mq/herald/store/pgstore"
	"github.com/herald-mq/herald/watch"
)

// Defaults of Config.
const (
	DefaultDataDir = "./herald-data"
	DefaultListen  = "127.0.0.1:7420"
)

// Config configures a Server. The zero value is usable: every field has a default.
type Config struct {
	// DataDir is the folder of the embedded store; it is created if missing.
	DataDir string
	// Listen is the TCP address of the HTTP API; port 0 picks a free port (see Addr).
	Listen string
	// TickMode and TickInterval choose how the logical clock advances.
	TickMode     engine.TickMode
	TickInterval time.Duration
	// Retention is how many change sets the change log keeps; 0 keeps all.
	Retention uint64
	// MaxBodyBytes caps HTTP request bodies; 0 means httpapi.DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyTimeout bounds how long a request may take to send its body (streaming RPCs
	// excepted, see limitBodies); 0 means DefaultBodyTimeout, negative none.
	BodyTimeout time.Duration
	// Logger receives the server's, the engine's and the request logs; nil means
	// slog.Default().
	Logger *slog.Logger
	// Clock is the engine's time source; nil means the real clock.
	Clock herald.Clock
	// TracerProvider, when set, records the commit, leases and settlements of each
	// message that carries a trace context as spans in its publisher's trace (see
	// docs/tracing.md). The program embedding the server sets it up (and its
	// exporter); nil records none. `herald serve` sets none.
	TracerProvider trace.TracerProvider
	// Backend, when set, is used instead of opening a Pebble store in DataDir. The
	// server closes it on Stop.
	Backend store.Backend
	// MaxConsumers caps consume streams server-wide; 0 means the delivery package's
	// default. MaxWatchesPerSession caps the watches of one session, consume and watch
	// mode together; 0 means engine.DefaultMaxWatchesPerSession.
	MaxConsumers         int
	MaxWatchesPerSession int
	// MetricsMaxGroups is how many consume groups get series of their own on /metrics;
	// the rest are summed under group="_other". 0 means DefaultMetricsMaxGroups, a
	// negative value none.
	MetricsMaxGroups int
	// MaxWatchesPerPrincipal caps the watches of one principal (with Auth); 0 means
	// engine.DefaultMaxWatchesPerPrincipal.
	MaxWatchesPerPrincipal int
	// TLSCertFile and TLSKeyFile make the listener speak TLS (HTTP/1.1 and HTTP/2);
	// TLSClientCAFile, in addition, requires every client to present a certificate
	// signed by that CA. ReloadTLS reads the files again.
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
	// Auth makes every request act for a principal (authn.go): a bearer token's, or a
	// client certificate's; what it may do is its grants. AuthLoopback also requires
	// credentials from loopback clients (otherwise they act as "local", with every
	// grant).
	Auth, AuthLoopback bool
	// Insecure lets a server bound beyond loopback start without client certificates
	// (see checkExposure); it logs a warning at every start.
	Insecure bool
	// AcceptDataLoss opens a store whose write-ahead log lost synced commits (it is
	// behind its position mark) instead of refusing to start.
	AcceptDataLoss bool
	// PreparedLogs is how many write-ahead log files a new Pebble store writes ahead
	// of use, so that its first logs' syncs need not grow them; 0 writes none (the
	// default; FullPreparedLogs covers every log of a new store).
	PreparedLogs int
	// StatementTimeout and MaxRowsScanned limit each statement (E4012); 0 means the
	// engine's defaults, a negative value no limit.
	StatementTimeout time.Duration
	MaxRowsScanned   int
	// MaxConnections caps the open connections of the listener; beyond it new ones are
	// closed at once. 0 means DefaultMaxConnections, a negative value no cap.
	MaxConnections int
	// MaxInflightPublishes, with Auth, caps each principal's published messages not
	// yet durable (E4015 past it); 0 means rpcapi.DefaultMaxInflightPublishes.
	MaxInflightPublishes int
	// RateLimit, with Auth, caps each principal's requests a second (a stream counts
	// once, when it opens); past it requests answer 429 E4015 with Retry-After. 0 means
	// no cap.
	RateLimit float64
	// MinFreeBytes is the store's free-space reserve: below it writes are refused with
	// E5005 and /readyz reports not ready. 0 means engine.DefaultMinFreeBytes, a
	// negative value none.
	MinFreeBytes int64
	// WatchBufferBytes bounds, in bytes, what a watch-mode stream holds for a client
	// that does not read; 0 means DefaultWatchBufferBytes.
	WatchBufferBytes int
	// WatchLinger is how long a busy watch-mode RPC stream gathers events into its next
	// frame (rpcapi.Options.WatchLinger); 0 means rpcapi.DefaultWatchLinger, negative
	// none.
	WatchLinger time.Duration
	// SSELinger is the same for a busy watch-mode event stream (GET /v1/watch,
	// server-sent events: httpapi.Options.WatchLinger): each write there is one
	// connection's, so it gathers longer. 0 or less: no wait (herald serve sets
	// DefaultSSELinger).
	SSELinger time.Duration
	// FeedLinger is the least time between two wakes of the streams sharing a type's
	// feed (watch.Config.FeedLinger). 0 or less: every commit wakes them (herald serve
	// sets DefaultFeedLinger).
	FeedLinger time.Duration
	// WatchCPUShare bounds the CPU that watch-mode fan-out may take, as a share of one
	// CPU (watch.Config.CPUShare); 0 means watch.DefaultCPUShare(), 1 or more no bound.
	WatchCPUShare float64
	// StatsInterval is how often _Watch nodes get their counters; 0 means
	// engine.DefaultLayer0Interval.
	StatsInterval time.Duration
	// PingInterval is the period of the keep-alive comment on /v1/watch streams; 0 means
	// httpapi.DefaultPingInterval.
	PingInterval time.Duration
	// WatchPolicy refuses WATCH patterns with E8001 in both modes.
	WatchPolicy herald.WatchPolicy

	// Store, when it is a postgres:// (or postgresql://) connection string, keeps the
	// graph in PostgreSQL instead of the Pebble store in DataDir, shared with any other
	// node started on the same database and schema: one of them leads (writes, consume
	// streams, settlements), the others follow its change log and serve reads and
	// watch-mode streams (see cluster.go and docs/scale.md).
	Store string
	// StoreSchema is the PostgreSQL schema of the store; "" means "herald".
	StoreSchema string
	// NodeName names this node among those sharing the store (unique; it holds the
	// leadership lease under it). "" means the host name and the listen port.
	NodeName string
	// Advertise is where clients reach this node (http://host:port): followers send
	// clients of the leader's work there. "" means the listen address, with the host
	// name in place of an unspecified host.
	Advertise string
	// LeaseTTL is how long the leader's lease lasts without renewal: the longest a dead
	// leader holds the cluster up. 0 means DefaultLeaseTTL.
	LeaseTTL time.Duration
}

// DefaultLeaseTTL is Config.LeaseTTL's default: the leader renews every quarter of it,
// and a follower takes over within about this long after the leader dies.
const DefaultLeaseTTL = 3 * time.Second

type state int

const (
	stateNew state = iota
	stateRunning
	stateStopping
	stateStopped
)

// Server is one Herald process. Create it with New; it is safe for concurrent use.
type Server struct {
	cfg Config
	log *slog.Logger
	// fanSlots are the fan-out slots the watch streams and the transports writing their
	// events share (watch.Config.Slots): fan-out holds at most that many CPUs at once.
	fanSlots chan struct{}

	mu      sync.Mutex
	state   state
	backend store.Backend
	cluster *cluster // nil on a store of the node's own (set by Start)

	// smu guards the services of the node's current role, which change (cluster.go)
	// while the server runs; mu is held by all of Start.
	smu     sync.Mutex
	stack   *stack
	tokens  *auth.Store
	ln      net.Listener
	tls     *tlsFiles // nil without TLS
	http    *http.Server
	served  chan struct{} // closed when the HTTP server stops serving
	serve   error         // why it stopped, when it failed on its own
	stopped chan struct{} // closed when the first Stop has finished
	stopErr error
	routes  []string // the HTTP operations served, as herald.Operations names them
	console *console.Handler
}

// Routes lists the operations the running server serves, as herald.Operations names
// them: its HTTP routes and its RPC procedures (Herald's services, reflection, health).
func (s *Server) Routes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.routes...)
}

// New returns a server for cfg, with defaults filled in. Nothing is opened until Start.
func New(cfg Config) *Server {
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{cfg: cfg, log: cfg.Logger, served: make(chan struct{}), stopped: make(chan struct{}), fanSlots: watch.FanOutSlots()}
}

// listenError says why the listener could not be bound, plainly for the usual causes.
func listenError(addr string, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("server: cannot listen on %s: the address is already in use (another herald serve, or another program, holds the port); stop it or choose another address with --listen (port 0 picks a free one): %w", addr, err)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("server: cannot listen on %s: no interface of this machine has that address; choose another with --listen: %w", addr, err)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("server: cannot listen on %s: permission denied (ports below 1024 need privileges); choose another with --listen: %w", addr, err)
	}
	return fmt.Errorf("server: listen on %s: %w", addr, err)
}

// DefaultMaxInflightPublishes is Config.MaxInflightPublishes's default.
const DefaultMaxInflightPublishes = rpcapi.DefaultMaxInflightPublishes

// DefaultPreparedLogs is the number of log files `herald serve` has a new store write
// ahead (Config.PreparedLogs) unless told otherwise: none, so that a first start on a
// laptop, in CI or in a container writes a few kilobytes, not 576 MB.
const DefaultPreparedLogs = 0

// FullPreparedLogs is the number of prepared log files that covers every log a new
// store creates before Pebble reuses retired ones (576 MB): the value to give
// Config.PreparedLogs (--prepared-logs) when a new store's first sync latencies matter.
const FullPreparedLogs = pebblestore.FullPreparedLogs

// DefaultWatchLinger is Config.WatchLinger's default.
const DefaultWatchLinger = rpcapi.DefaultWatchLinger

// DefaultSSELinger is what herald serve sets Config.SSELinger to.
const DefaultSSELinger = httpapi.DefaultWatchLinger

// DefaultFeedLinger is what herald serve sets Config.FeedLinger to.
const DefaultFeedLinger = watch.DefaultFeedLinger

// positiveOrNone maps a linger of this package's Config, where 0 means none, to the
// httpapi's, where 0 means its default and a negative value none.
func positiveOrNone(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return -1
}

// DefaultWatchCPUShare returns Config.WatchCPUShare's default on this machine (see
// watch.DefaultCPUShare).
func DefaultWatchCPUShare() float64 { return watch.DefaultCPUShare() }

// DefaultWatchBufferBytes is Config.WatchBufferBytes's default.
const DefaultWatchBufferBytes = watch.DefaultMaxBufferBytes

// maxStreamsPerConn bounds the concurrent HTTP/2 streams of one client connection.
const maxStreamsPerConn = 10000

func (s *Server) dataLabel() string {
	switch {
	case s.cfg.Backend != nil:
		return "(custom backend)"
	case IsPostgres(s.cfg.Store):
		schema := s.cfg.StoreSchema
		if schema == "" {
			schema = pgstore.DefaultSchema
		}
		return "postgres schema " + schema
	}
	return s.cfg.DataDir
}

func (s *Server) run(hs *http.Server, ln net.Listener) {
	err := hs.Serve(ln)
	if !errors.Is(err, http.ErrServerClosed) {
		s.mu.Lock()
		s.serve = err
		s.mu.Unlock()
		s.log.Error("http server failed", "err", err)
	}
	close(s.served)
}

// Addr returns the address the HTTP API listens on, or "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Done is closed when the server stops serving, through Stop or because the HTTP server
// failed; Err then tells which.
func (s *Server) Done() <-chan struct{} { return s.served }

// Delivery returns the consume engine, or nil before Start.
func (s *Server) Delivery() *delivery.Service {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.currentStack(); st != nil {
		return st.del
	}
	return nil
}

// StoreCounters reports the work of the embedded store since Start: synced writes and
// the bytes written to its write-ahead log and to its tables. With flush the store
// first writes out its memtable, so the tables hold everything committed. It answers
// zeros for a store that does not keep these counters.
func (s *Server) StoreCounters(flush bool) (syncs, walBytes, tableBytes uint64) {
	s.mu.Lock()
	b := s.backend
	s.mu.Unlock()
	ps, ok := b.(*pebblestore.Store)
	if !ok {
		return 0, 0, 0
	}
	if flush {
		_ = ps.Flush()
	}
	w := ps.WriteStats()
	return ps.Syncs(), w.WAL, w.Flushed + w.Compacted
}

// Err returns the error that stopped the HTTP server on its own, or nil.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serve
}

// ready backs /readyz: the server takes queries only while running, its HTTP server has
// not failed, and its engine reports no fault.
func (s *Server) ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateNew:
		return herald.Errorf(herald.CodeShuttingDown, "server is starting")
	case stateStopping, stateStopped:
		return herald.Errorf(herald.CodeShuttingDown, "server is stopping")
	}
	if s.serve != nil {
		return herald.Errorf(herald.CodeInternal, "http server failed: %v", s.serve)
	}
	st := s.currentStack()
	if st == nil {
		return herald.Errorf(herald.CodeShuttingDown, "the node is changing role")
	}
	return st.err()
}

// Stop shuts the server down: it stops accepting connections, ends the watch and consume
// streams, waits for in-flight requests (until ctx is done, then closes the remaining
// connections), stops the consume engine, closes the engine, and closes the store. It is idempotent, safe before Start, and concurrent
// calls wait for the first one.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	switch s.state {
	case stateNew:
		s.state = stateStopped
		close(s.stopped)
		close(s.served)
		s.mu.Unlock()
		return nil
	case stateStopping, stateStopped:
		s.mu.Unlock()
		select {
		case <-s.stopped:
			return s.stopErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.state = stateStopping
	hs, cl := s.http, s.cluster
	s.mu.Unlock()

	s.log.Info("stopping: draining requests")
	var errs []error
	if err := hs.Shutdown(ctx); err != nil {
		// The deadline passed with requests still running: cut them off.
		_ = hs.Close()
		errs = append(errs, fmt.Errorf("server: drain: %w", err))
	}
	<-s.served
	if cl != nil {
		// No role changes from here on; a leader gives its lease back for another.
		if err := s.stopCluster(context.WithoutCancel(ctx)); err != nil {
			errs = append(errs, err)
		}
	} else if st := s.swapStack(nil); st != nil {
		// Closing the engine closes the store it took over.
		if err := st.close(ctx); err != nil {
			errs = append(errs, err)
		}
	}

	s.mu.Lock()
	s.state = stateStopped
	s.stopErr = errors.Join(errs...)
	s.mu.Unlock()
	close(s.stopped)
	if s.stopErr != nil {
		s.log.Error("stopped with errors", "err", s.stopErr)
	} else {
		s.log.Info("stopped")
	}
	return s.stopErr
}
