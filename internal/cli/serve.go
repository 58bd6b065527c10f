package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/tracing"
	"github.com/herald-mq/herald/server"
)

type serveFlags struct {
	data, listen, tick  string
	retention           uint64
	maxBody             int64
	sseLinger           time.Duration
	bodyTimeout         time.Duration
	logLevel, logFormat string
	shutdownTimeout     time.Duration
	denyWatch           []string
	sessionWatches      int
	metricsGroups       int
	statsInterval       time.Duration
	stmtTimeout         time.Duration
	maxScanned          int
	acceptLoss          bool
	preparedLogs        int
	tlsCert, tlsKey     string
	tlsCA               string
	insecure            bool
	auth, authLoopback  bool
	watchBytes          int
	watchCPU            float64
	watchLinger         time.Duration
	principalWatches    int
	maxConns            int
	rate                float64
	minFree             int64
	principalPubs       int
	config              string // --config: the TOML file of settings
	printConfig         bool
	store, storeSchema  string // --store postgres://…: a store shared with other nodes
	nodeName, advertise string
	leaseTTL            time.Duration
	otlpEndpoint        string
}

// DefaultRetention is how many change sets the change log keeps unless --retention says
// otherwise: enough for a watch-mode stream to resume after a long disconnection (a
// position older than that answers E6001, and the stream starts afresh), without a log
// that grows with every message the broker ever carried.
const DefaultRetention = 100_000

func newServeCmd() *cobra.Command { return newServeCmdEnv(os.LookupEnv) }

// newServeCmdEnv is herald serve reading its environment variables through lookup.
func newServeCmdEnv(lookup func(string) (string, bool)) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the broker: the embedded store, the engine and the HTTP API",
		Long: `Run a Herald broker in the foreground. It keeps its data in an embedded store
under --data and serves the query API, /healthz, /readyz and /metrics on --listen.

The logical clock (tick) advances with every commit by default; --tick=manual leaves
it to the TICK statement, and --tick=interval:100ms advances it on a timer.

SIGINT or SIGTERM stops the broker gracefully: it stops accepting connections, lets
requests in flight finish (up to --shutdown-timeout), then closes the store.

Every flag can also be set by its environment variable (HERALD_ and the flag's name in
capitals, dashes as underscores: HERALD_MAX_BODY for --max-body) and by its key in the
TOML file --config names (max-body = 1048576). A flag wins over its variable, and the
variable over the file. --print-config prints the settings that result, as such a file.`,
		Example: `  herald serve
  herald serve --listen 127.0.0.1:0 --log-format json   # pick a free port, log it
  herald serve --tick interval:100ms --retention 1000000
  herald serve --data /var/lib/herald --prepared-logs 9  # a new store's first syncs cheaper, 576 MB written once

  # Other hosts: a bind beyond loopback needs TLS and client authentication (bearer
  # tokens with --auth, or client certificates with --tls-client-ca), else it refuses to start
  herald serve --data /var/lib/herald --listen 0.0.0.0:7420 \
    --tls-cert /etc/herald/server.pem --tls-key /etc/herald/server-key.pem --auth`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sources, err := applySources(cmd.Flags(), lookup)
			if err != nil {
				return usageError(err)
			}
			if f.printConfig {
				if err := f.check(); err != nil {
					return err
				}
				return printConfig(cmd.OutOrStdout(), cmd.Flags(), sources)
			}
			return runServe(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", server.DefaultDataDir, "data directory of the embedded store (created if missing)")
	fl.StringVar(&f.listen, "listen", server.DefaultListen, "TCP address of the HTTP API; port 0 picks a free port")
	fl.StringVar(&f.tick, "tick", "commit", "how the logical clock advances: commit, manual or interval:<duration>")
	fl.Uint64Var(&f.retention, "retention", DefaultRetention, "change sets the change log keeps (0 keeps all, and the log grows without bound)")
	fl.Int64Var(&f.maxBody, "max-body", 1<<20, "largest accepted request body, in bytes")
	fl.DurationVar(&f.bodyTimeout, "body-timeout", 30*time.Second, "longest a request may take to send its body (streaming RPCs excepted); 0 for no bound")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown waits for requests in flight")
	fl.DurationVar(&f.stmtTimeout, "statement-timeout", server.DefaultStatementTimeout, "stop a statement that runs longer (E4012); 0 sets no limit")
	fl.IntVar(&f.maxScanned, "max-rows-scanned", server.DefaultMaxRowsScanned, "stop a statement that examines more bindings (E4012); 0 sets no limit")
	fl.DurationVar(&f.watchLinger, "watch-linger", server.DefaultWatchLinger, "how long a busy watch-mode RPC stream gathers events into one frame (the first event after a quiet spell, and the answer to an open, go out at once); 0 for no wait")
	fl.DurationVar(&f.sseLinger, "sse-linger", server.DefaultSSELinger, "the same for a busy watch-mode server-sent-event stream (GET /v1/watch), each write of which is one connection's; 0 for no wait")
	fl.Float64Var(&f.watchCPU, "watch-cpu", server.DefaultWatchCPUShare(), "share of one CPU that watch-mode fan-out may spend turning commits into events and framing them for the RPC transport (default: 2.5 % of the CPUs, GOMAXPROCS); past it watches lag (best_effort ones show gaps) and writers keep the CPUs; 1 for no bound")
	fl.IntVar(&f.watchBytes, "watch-buffer-bytes", server.DefaultWatchBufferBytes, "bytes a watch-mode stream may hold for a client that does not read; past it the statement's on_full applies")
	fl.IntVar(&f.principalPubs, "max-principal-inflight", server.DefaultMaxInflightPublishes, "with --auth, published messages one principal may have not yet durable, across its publish streams (E4015 past it)")
	fl.IntVar(&f.principalWatches, "max-principal-watches", server.DefaultMaxWatchesPerPrincipal, "watches one principal may hold (with --auth), both modes together (E8006 past it)")
	fl.Int64Var(&f.minFree, "min-free-space", server.DefaultMinFreeBytes, "bytes to keep free on the store's disk: below it writes are refused (E5005) and /readyz says not ready, until space is freed; 0 keeps no reserve")
	fl.IntVar(&f.maxConns, "max-connections", server.DefaultMaxConnections, "open connections the listener holds; beyond it new ones are closed at once")
	fl.Float64Var(&f.rate, "rate-limit", 0, "with --auth, requests a second each principal may make (429 E4015 past it); 0 sets no limit")
	fl.IntVar(&f.sessionWatches, "max-session-watches", server.DefaultMaxWatchesPerSession, "watches one session may hold, watch and consume mode together (E8006 past it)")
	fl.IntVar(&f.metricsGroups, "metrics-max-groups", server.DefaultMetricsMaxGroups, "consume groups with series of their own on /metrics; the rest are summed under group=\"_other\"; 0 labels none")
	fl.DurationVar(&f.statsInterval, "stats-interval", server.DefaultStatsInterval, "how often _Watch nodes get their counters (events_delivered, events_pending, last_event_at)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (PEM); with --tls-key the listener speaks TLS only. Reloaded on SIGHUP")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS private key file (PEM) of --tls-cert")
	fl.StringVar(&f.tlsCA, "tls-client-ca", "", "CA file (PEM): every client must present a certificate it signed (mutual TLS)")
	fl.BoolVar(&f.auth, "auth", false, "require credentials: a bearer token (herald token create) or a client certificate naming a principal; what a request may do is its principal's grants")
	fl.BoolVar(&f.authLoopback, "auth-loopback", false, "with --auth, require credentials from loopback clients too (otherwise they act as \"local\", with every grant)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow listening beyond loopback without client certificates: anyone who reaches the port can do anything")
	fl.IntVar(&f.preparedLogs, "prepared-logs", server.DefaultPreparedLogs, "write-ahead log files of 64 MB that a new data directory writes before it serves (9 covers all its first logs: 576 MB, 1.4 s on the benchmark machine), so that its first syncs overwrite files rather than grow them; on a new store the benchmark's S2 p99 was 3.6 ms with 9 against 5.2 ms without, and its S1 publish rate 67.7k against 60.3k msg/s (medians of seven pairs, docs/benchmarks.md). An existing store writes none. Default 0: none")
	fl.BoolVar(&f.acceptLoss, "accept-data-loss", false, "open a store whose write-ahead log lost synced commits, at the position it reaches (without it such a store is refused)")
	fl.StringSliceVar(&f.denyWatch, "deny-watch", nil, "node or edge types no WATCH may mention (comma-separated); such patterns answer E8001")
	fl.StringVar(&f.config, "config", "", "TOML file of settings, one key per flag (listen = \"127.0.0.1:7420\"); flags and environment variables win over it")
	fl.BoolVar(&f.printConfig, "print-config", false, "print the settings that flags, environment variables, --config and the defaults make, as TOML, and exit")
	fl.StringVar(&f.store, "store", "", "keep the graph in PostgreSQL instead of --data: a postgres:// connection string. Nodes started on one database and schema share it: one leads, the others follow and serve reads and watch-mode streams (docs/scale.md)")
	fl.StringVar(&f.storeSchema, "store-schema", "herald", "the PostgreSQL schema of --store")
	fl.StringVar(&f.nodeName, "node-name", "", "this node's name among those sharing --store, unique (default: the host name and the port)")
	fl.StringVar(&f.advertise, "advertise", "", "the URL clients reach this node at, which followers send them to when it leads (default: http(s)://<listen address>, with the host name for an unspecified host)")
	fl.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "export OpenTelemetry spans (the commit, leases and settlements of each traced message) to this OTLP/HTTP endpoint, e.g. http://collector:4318 (its /v1/traces), as JSON; default: OpenTelemetry's OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, else no exporting (docs/tracing.md)")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", server.DefaultLeaseTTL, "with --store, how long the leader's lease lasts without renewal: about the longest a dead leader holds the cluster up")
	documentEnv(fl)
	return cmd
}

func runServe(ctx context.Context, f serveFlags, stderr io.Writer) error {
	if err := f.check(); err != nil {
		return err
	}
	mode, interval, _ := parseTick(f.tick)
	logger, _ := newLogger(stderr, f.logLevel, f.logFormat)
	cfg := server.Config{
		DataDir:      f.data,
		Listen:       f.listen,
		TickMode:     mode,
		TickInterval: interval,
		Retention:    f.retention,
		MaxBodyBytes: f.maxBody,
		BodyTimeout:  bodyTimeoutOf(f.bodyTimeout),
		Logger:       logger,
		WatchPolicy:  herald.WatchPolicy{DenyTypes: f.denyWatch},

		MaxWatchesPerSession:   f.sessionWatches,
		MetricsMaxGroups:       noLimit(f.metricsGroups),
		MaxConnections:         f.maxConns,
		MaxInflightPublishes:   f.principalPubs,
		MinFreeBytes:           noLimit(f.minFree),
		RateLimit:              f.rate,
		MaxWatchesPerPrincipal: f.principalWatches,
		AcceptDataLoss:         f.acceptLoss,
		PreparedLogs:           f.preparedLogs,
		WatchBufferBytes:       f.watchBytes,
		WatchCPUShare:          f.watchCPU,
		WatchLinger:            linger(f.watchLinger),
		SSELinger:              f.sseLinger,
		FeedLinger:             server.DefaultFeedLinger,
		TLSCertFile:            f.tlsCert,
		TLSKeyFile:             f.tlsKey,
		TLSClientCAFile:        f.tlsCA,
		Insecure:               f.insecure,
		Auth:                   f.auth,
		AuthLoopback:           f.authLoopback,
		StatementTimeout:       noLimit(f.stmtTimeout),
		MaxRowsScanned:         noLimit(f.maxScanned),
		StatsInterval:          f.statsInterval,
		Store:                  f.store,
		StoreSchema:            f.storeSchema,
		NodeName:               f.nodeName,
		Advertise:              f.advertise,
		LeaseTTL:               f.leaseTTL,
	}
	if exp := exporting(f.otlpEndpoint, logger); exp != nil {
		cfg.TracerProvider = exp
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := exp.Shutdown(sctx); err != nil {
				logger.Warn("the last spans were not exported", "err", err)
			}
		}()
	}
	s := server.New(cfg)
	if err := s.Start(ctx); err != nil {
		return err
	}
	// SIGHUP reloads the TLS files; a server without them ignores it (and says so)
	// rather than dying of it, as a process without a handler would.
	stop := reloadOnHangup(s, f.tlsCert != "", logger)
	defer stop()
	select {
	case <-ctx.Done():
		logger.Info("shutdown requested")
	case <-s.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	stopErr := s.Stop(stopCtx)
	if err := s.Err(); err != nil {
		return err
	}
	return stopErr
}

// exporting returns the tracer provider that exports the server's spans to the OTLP
// endpoint of --otlp-endpoint or of OpenTelemetry's variables, or nil when neither
// names one.
func exporting(endpoint string, logger *slog.Logger) *tracing.Exporting {
	if endpoint != "" {
		endpoint = tracesURL(endpoint)
	} else {
		endpoint = tracing.EndpointFromEnv(os.Getenv)
	}
	if endpoint == "" {
		return nil
	}
	service := os.Getenv("OTEL_SERVICE_NAME")
	if service == "" {
		service = "herald"
	}
	logger.Info("exporting spans", "endpoint", endpoint, "service", service)
	return tracing.NewExporting(endpoint, tracing.HeadersFromEnv(os.Getenv), service, func(err error) {
		logger.Warn("span export failed", "err", err)
	})
}

// tracesURL is the traces URL of an OTLP/HTTP endpoint given as its base URL (or as the
// traces URL itself).
func tracesURL(endpoint string) string {
	if strings.HasSuffix(endpoint, "/v1/traces") {
		return endpoint
	}
	return strings.TrimSuffix(endpoint, "/") + "/v1/traces"
}

// check refuses flag values herald serve cannot run with, as usage errors.
func (f serveFlags) check() error {
	if _, _, err := parseTick(f.tick); err != nil {
		return usageError(err)
	}
	if _, err := newLogger(io.Discard, f.logLevel, f.logFormat); err != nil {
		return usageError(err)
	}
	if f.maxBody <= 0 {
		return usageError(fmt.Errorf("--max-body must be positive, got %d", f.maxBody))
	}
	if f.stmtTimeout < 0 || f.maxScanned < 0 {
		return usageError(fmt.Errorf("--statement-timeout and --max-rows-scanned must not be negative (got %s and %d)", f.stmtTimeout, f.maxScanned))
	}
	if f.sseLinger < 0 {
		return usageError(fmt.Errorf("--sse-linger must not be negative, got %s", f.sseLinger))
	}
	if f.watchLinger < 0 {
		return usageError(fmt.Errorf("--watch-linger must not be negative, got %s", f.watchLinger))
	}
	if f.watchCPU <= 0 {
		return usageError(fmt.Errorf("--watch-cpu must be positive, got %g", f.watchCPU))
	}
	if f.watchBytes < 1 {
		return usageError(fmt.Errorf("--watch-buffer-bytes must be positive, got %d", f.watchBytes))
	}
	if f.minFree < 0 {
		return usageError(fmt.Errorf("--min-free-space must not be negative, got %d", f.minFree))
	}
	if f.maxConns < 1 || f.rate < 0 {
		return usageError(fmt.Errorf("--max-connections must be at least 1 and --rate-limit not negative (got %d and %g)", f.maxConns, f.rate))
	}
	if f.principalWatches < 1 || f.principalPubs < 1 {
		return usageError(fmt.Errorf("--max-principal-watches and --max-principal-inflight must be at least 1, got %d and %d", f.principalWatches, f.principalPubs))
	}
	if f.store != "" && !server.IsPostgres(f.store) {
		return usageError(fmt.Errorf("--store %q: want a postgres:// connection string (without --store the graph stays in --data)", redactDSN(f.store)))
	}
	if f.leaseTTL < 100*time.Millisecond {
		return usageError(fmt.Errorf("--lease-ttl must be at least 100ms, got %s", f.leaseTTL))
	}
	if f.otlpEndpoint != "" {
		if u, err := url.Parse(f.otlpEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageError(fmt.Errorf("--otlp-endpoint %q: want an http:// or https:// URL", f.otlpEndpoint))
		}
	}
	if f.metricsGroups < 0 {
		return usageError(fmt.Errorf("--metrics-max-groups must be at least 0, got %d", f.metricsGroups))
	}
	if f.sessionWatches < 1 || f.statsInterval <= 0 {
		return usageError(fmt.Errorf("--max-session-watches must be at least 1 and --stats-interval positive (got %d and %s)", f.sessionWatches, f.statsInterval))
	}
	return nil
}

// parseTick reads the --tick flag.
func parseTick(s string) (server.TickMode, time.Duration, error) {
	switch {
	case s == "commit":
		return server.TickCommit, 0, nil
	case s == "manual":
		return server.TickManual, 0, nil
	case strings.HasPrefix(s, "interval:"):
		d, err := time.ParseDuration(strings.TrimPrefix(s, "interval:"))
		if err != nil || d <= 0 {
			return 0, 0, fmt.Errorf("--tick %q: the interval must be a positive duration such as interval:100ms", s)
		}
		return server.TickInterval, d, nil
	}
	return 0, 0, fmt.Errorf("--tick %q: want commit, manual or interval:<duration>", s)
}

// newLogger builds the slog logger of --log-level and --log-format.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// noLimit turns a flag's 0 ("no limit") into the engine's negative value for it, since
// the engine reads 0 as "the default".
func noLimit[T int | int64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// linger maps the --watch-linger flag to server.Config.WatchLinger, where 0 means the
// default and a negative value none.
func linger(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// bodyTimeoutOf maps --body-timeout to server.Config.BodyTimeout: 0 (no bound) is
// negative there, where 0 means the default.
func bodyTimeoutOf(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// redactDSN hides the password of a connection string in messages.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	return dsn
}
