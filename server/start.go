package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/console"
	"github.com/herald-mq/herald/httpapi"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/rpcapi"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/pebblestore"
)

// ErrStarted is returned by Start on a server that was already started or stopped.
var ErrStarted = errors.New("server: already started")

// undo is what a failed Start closes again, last opened first.
type undo []func()

func (u *undo) add(f func()) { *u = append(*u, f) }

func (u undo) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// Start binds the listener, then opens the store and the engine, and starts serving
// HTTP. When it returns nil the listener is bound (see Addr); when it returns an error
// everything it opened is closed again, and a server that could not bind its address
// has created nothing, not even the data directory. A data directory another process
// holds is refused with an error that says so (pebblestore.ErrLocked). ctx bounds the
// opening, not the life of the server.
func (s *Server) Start(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateNew {
		return ErrStarted
	}
	var cleanup undo
	defer func() {
		if err != nil {
			cleanup.run()
		}
	}()
	if err := s.checkExposure(); err != nil {
		return err
	}
	if err := s.loadTLS(); err != nil {
		return err
	}
	// The port first: a server that cannot have it stops before it creates or opens
	// anything. Connections that arrive meanwhile wait in the listen queue.
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return listenError(s.cfg.Listen, err)
	}
	cleanup.add(func() { _ = ln.Close() })

	var b broker.Broker
	if IsPostgres(s.cfg.Store) {
		if b, err = s.startCluster(ctx, ln.Addr().String()); err != nil {
			return err
		}
		cleanup.add(func() { _ = s.stopCluster(context.Background()) })
	} else {
		backend, err := s.openStore()
		if err != nil {
			return err
		}
		st, err := s.openLeader(ctx, backend, false)
		if err != nil {
			return err
		}
		cleanup.add(func() { _ = st.close(context.Background()) })
		s.backend = backend
		s.swapStack(st)
		b = st.b
	}
	handler, api, rpc, err := s.handler(b)
	if err != nil {
		return err
	}
	s.http = s.httpServer(handler)
	// Watch and Consume streams live as long as their clients; end them when the drain
	// starts, releasing their leases, so they do not hold the shutdown up.
	s.http.RegisterOnShutdown(api.CloseStreams)
	s.http.RegisterOnShutdown(rpc.CloseStreams)
	ln = s.wrapListener(ln)
	s.ln, s.state = ln, stateRunning
	go s.run(s.http, ln)

	seq, tick := b.Position()
	s.log.Info("listening", "addr", ln.Addr().String(), "tls", s.tls != nil, "client_certs", s.tls != nil && s.cfg.TLSClientCAFile != "", "data", s.dataLabel(), "seq", seq, "tick", tick)
	return nil
}

// loadTLS reads the certificate files, when TLS is asked for.
func (s *Server) loadTLS() error {
	if s.cfg.TLSCertFile == "" && s.cfg.TLSKeyFile == "" && s.cfg.TLSClientCAFile == "" {
		return nil
	}
	if s.cfg.TLSCertFile == "" || s.cfg.TLSKeyFile == "" {
		return errors.New("server: TLS needs both a certificate and its key (--tls-cert, --tls-key)")
	}
	f := &tlsFiles{certFile: s.cfg.TLSCertFile, keyFile: s.cfg.TLSKeyFile, caFile: s.cfg.TLSClientCAFile}
	if err := f.load(); err != nil {
		return err
	}
	s.tls = f
	return nil
}

// openStore returns Config.Backend, or opens the Pebble store in the data directory.
func (s *Server) openStore() (store.Backend, error) {
	if s.cfg.Backend != nil {
		return s.cfg.Backend, nil
	}
	if err := os.MkdirAll(s.cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	ps, err := pebblestore.Open(s.cfg.DataDir, pebblestore.Options{Logger: s.log.With("component", "pebble"), AcceptLoss: s.cfg.AcceptDataLoss, PreparedLogs: s.cfg.PreparedLogs})
	if errors.Is(err, pebblestore.ErrLocked) {
		return nil, fmt.Errorf("server: %w. Is a herald serve already running on it? Stop that process, or give this server another directory with --data", err)
	}
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return ps, nil
}

// handler mounts the JSON API, the RPC services, the principal and token API and the
// console on one port, inside authentication, the rate limit and the body limits.
func (s *Server) handler(b broker.Broker) (http.Handler, *httpapi.Handler, *rpcapi.Service, error) {
	// Watch streams of both surfaces encode their events in the same few slots, so
	// that a fan-out, over server-sent events and RPC alike, leaves CPU to the writers.
	sendSlots := s.fanSlots
	api := httpapi.New(b, httpapi.Options{
		MaxBodyBytes: s.cfg.MaxBodyBytes,
		Logger:       s.log.With("component", "http"),
		Ready:        s.ready,
		Role:         s.role,
		Clock:        s.cfg.Clock,
		PingInterval: s.cfg.PingInterval,
		Metrics:      []herald.MetricSource{s},
		WatchLinger:  positiveOrNone(s.cfg.SSELinger),
		SendSlots:    sendSlots,
	})
	rpc := rpcapi.New(b, rpcapi.Options{
		Logger:       s.log.With("component", "rpc"),
		MaxBodyBytes: s.cfg.MaxBodyBytes,
		WatchLinger:  s.cfg.WatchLinger,
		Clock:        s.clock(),
		SendSlots:    sendSlots,

		MaxInflightPublishes: s.cfg.MaxInflightPublishes,
		Ready:                s.ready,
		Observe:              api.ObserveRPC,
		TracerProvider:       s.cfg.TracerProvider,
	})
	tokens := s.currentTokens
	// One port: the RPC services on their procedures' paths, the JSON API everywhere
	// else. gRPC needs HTTP/2, which the server speaks without TLS too (h2c).
	mux := http.NewServeMux()
	admin, adminRoutes := authAPI(tokens)
	mux.Handle("/v1/principals/", admin)
	mux.Handle("/v1/tokens", admin)
	mux.Handle("/v1/tokens/", admin)
	// The console, at /ui, on the same seam, behind the same authentication.
	ui := console.New(b, console.Options{Logger: s.log.With("component", "console"), Auth: s.cfg.Auth, Metrics: s.Metrics, Clock: s.clock()})
	s.console = ui
	mux.Handle(console.Prefix+"/", ui)
	s.routes = append(append(append(api.Routes(), adminRoutes...), ui.Routes()...), rpc.Procedures()...)
	// The RPC services, reflection and health; any other RPC answers UNIMPLEMENTED,
	// and every other request goes to the JSON API.
	rpc.Mount(mux, api)

	var handler http.Handler = mux
	if s.cfg.Auth {
		if s.cfg.RateLimit > 0 {
			clk := s.cfg.Clock
			if clk == nil {
				clk = clock.Real()
			}
			rl := &rateLimiter{rate: s.cfg.RateLimit, clock: clk, buckets: map[string]*bucket{}}
			handler = rl.limitRate(handler)
		}
		handler = s.authenticate(tokens, handler)
	}
	bodyTimeout := s.cfg.BodyTimeout
	if bodyTimeout == 0 {
		bodyTimeout = DefaultBodyTimeout
	}
	return limitBodies(handler, bodyTimeout, rpcapi.StreamingRequests()), api, rpc, nil
}

// httpServer serves handler over HTTP/1.1 and HTTP/2 (h2c without TLS).
func (s *Server) httpServer(handler http.Handler) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if s.tls != nil {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Server{
		Handler:   handler,
		Protocols: &protocols,
		// Watches and subscriptions are streams: let one client connection carry
		// thousands of them (the default allows 250).
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: maxStreamsPerConn},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// wrapListener caps the listener's connections and adds TLS when configured.
func (s *Server) wrapListener(ln net.Listener) net.Listener {
	if max := s.cfg.MaxConnections; max >= 0 {
		if max == 0 {
			max = DefaultMaxConnections
		}
		var lastLog atomic.Int64
		ln = &limitListener{Listener: ln, max: int64(max), refused: func() {
			if now := time.Now().Unix(); lastLog.Swap(now) != now {
				s.log.Warn("connection refused: the server holds its most connections", "max", max)
			}
		}}
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls.config())
	}
	return ln
}
