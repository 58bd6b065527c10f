// Package httpapi serves Herald's query API as JSON over HTTP, watch streams of both
// modes as server-sent events (watch-mode ones written by a hub, ssehub.go), and the
// health, readiness, Prometheus metrics and profiling (/debug/pprof/) endpoints.
// It translates requests onto an Engine and maps every error to one status and body through the root error table.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/internal/clock"
)

// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 1 << 20

// Options configures a Handler.
type Options struct {
	// MaxBodyBytes caps request bodies; larger ones get E4005. 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Logger receives one record per request. nil means slog.Default().
	Logger *slog.Logger
	// Ready reports whether the server can take queries; /readyz answers 503 with its
	// error while it returns one. nil means always ready.
	Ready func() error
	// Role reports the node's role (broker.RoleLeader or broker.RoleFollower) and
	// where the leader serves clients ("" when no node leads), for /readyz, which
	// names them and answers ?role= with them. nil means a node that leads alone.
	Role func() (role, leader string)
	// Registry receives the HTTP metrics and is served on /metrics. nil means a new
	// registry private to the handler.
	Registry *prometheus.Registry
	// Clock times the watch streams' pings. nil means the real clock.
	Clock herald.Clock
	// PingInterval is the period of the ": ping" comment on watch streams; 0 means
	// DefaultPingInterval.
	PingInterval time.Duration
	// Metrics are the services whose own figures /metrics serves besides the HTTP
	// ones (the engine, the consume and watch engines, the queues).
	Metrics []herald.MetricSource
	// WatchLinger is how long a busy watch stream gathers events before its next
	// write: after a write the next one waits until this much time has passed since
	// it, so a stream of a thousand events a second makes tens of writes, not a
	// thousand. The first event after a quiet spell goes out at once. 0 means
	// DefaultWatchLinger; negative, no wait.
	WatchLinger time.Duration
	// SendSlots bounds how many watch streams encode at once (shared with the RPC
	// streams, so a fan-out leaves CPU to the writers); nil means slots of the
	// handler's own, half the CPUs.
	SendSlots chan struct{}
}

// DefaultWatchLinger is Options.WatchLinger's default.
const DefaultWatchLinger = 50 * time.Millisecond

// Handler is the HTTP API. Create it with New.
type Handler struct {
	b       broker.Broker
	maxBody int64
	log     *slog.Logger
	ready   func() error
	role    func() (role, leader string)
	mux     *http.ServeMux
	routes  []string // every operation handle registered, as herald.Operations names it
	metrics *metrics

	clock       herald.Clock
	ping        time.Duration
	linger      time.Duration   // Options.WatchLinger
	slots       chan struct{}   // Options.SendSlots
	streams     context.Context // done once CloseStreams is called
	stopStreams context.CancelFunc

	hubOnce sync.Once
	hubs    []*sseHub // the SSE hubs, made with the first stream (hubFor)
	hubNext atomic.Uint64
}

// New returns the HTTP API over a node.
func New(b broker.Broker, opts Options) *Handler {
	h := &Handler{
		b:       b,
		maxBody: opts.MaxBodyBytes,
		log:     opts.Logger,
		ready:   opts.Ready,
		role:    opts.Role,
		mux:     http.NewServeMux(),
		clock:   opts.Clock,
		ping:    opts.PingInterval,
		linger:  opts.WatchLinger,
		slots:   opts.SendSlots,
	}
	if h.linger == 0 {
		h.linger = DefaultWatchLinger
	}
	if h.slots == nil {
		h.slots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))
	}
	h.streams, h.stopStreams = context.WithCancel(context.Background())
	if h.clock == nil {
		h.clock = clock.Real()
	}
	if h.ping <= 0 {
		h.ping = DefaultPingInterval
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.ready == nil {
		h.ready = func() error { return nil }
	}
	if h.role == nil {
		h.role = func() (string, string) { return broker.RoleLeader, "" }
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	h.metrics = newMetrics(reg, b, opts.Metrics)

	h.handle("/v1/query", "query", h.query, http.MethodPost)
	h.handle("/v1/watch", "watch", h.watch, http.MethodGet)
	h.handle("/v1/settle", "settle", h.settle, http.MethodPost)
	h.handle("/v1/sessions", "sessions", h.openSession, http.MethodPost)
	h.handle("/v1/sessions/{id}", "session", h.closeSession, http.MethodDelete)
	h.queueRoutes()
	h.handle("/healthz", "healthz", h.healthz, http.MethodGet, http.MethodHead)
	h.handle("/readyz", "readyz", h.readyz, http.MethodGet, http.MethodHead)
	h.handle("/metrics", "metrics", h.metrics.serve, http.MethodGet)
	h.handle("/v1/cluster", "cluster", h.cluster, http.MethodGet)
	h.handle("/debug/pprof/", "pprof", pprofHandler().ServeHTTP, http.MethodGet, http.MethodPost)
	h.handle("/", "other", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, herald.Errorf(herald.CodeNotFound, "no endpoint %s", r.URL.Path))
	})
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Routes lists the operations the handler serves, as herald.Operations names them
// ("POST /v1/query"); each is checked against its entry there.
func (h *Handler) Routes() []string { return append([]string(nil), h.routes...) }

// request is the body of POST /v1/query.
type request struct {
	Query   string         `json:"query"`
	Params  map[string]any `json:"params"`
	Session string         `json:"session"`
}

func (h *Handler) query(w http.ResponseWriter, r *http.Request) {
	var req request
	if err := h.decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if strings.TrimSpace(req.Query) == "" {
		writeError(w, herald.Errorf(herald.CodeEmptyQuery, "the query is empty"))
		return
	}
	var params map[string]herald.Value
	if len(req.Params) > 0 {
		params = make(map[string]herald.Value, len(req.Params))
		for name, raw := range req.Params {
			v, err := herald.FromJSON(raw)
			if err != nil {
				writeError(w, herald.Errorf(herald.CodeMalformedRequest, "parameter $%s: %v", name, err))
				return
			}
			params[name] = v
		}
	}
	resp, err := h.b.Exec(r.Context(), req.Session, req.Query, params)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, normalize(resp))
}

// normalize returns resp with empty lists instead of nulls, so clients always see arrays.
func normalize(resp *herald.Response) *herald.Response {
	out := &herald.Response{Seq: resp.Seq, Tick: resp.Tick, Results: make([]herald.Result, len(resp.Results))}
	for i, res := range resp.Results {
		if res.Columns == nil {
			res.Columns = []string{}
		}
		if res.Rows == nil {
			res.Rows = [][]herald.Value{}
		}
		out.Results[i] = res
	}
	return out
}

// decode reads one JSON object from the body into v: numbers stay exact, unknown
// fields and trailing data are errors, text that is not UTF-8 is an error (JSON's
// decoder would quietly replace it), and the body is capped at the configured size.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err == nil && !utf8.Valid(raw) {
		return herald.Errorf(herald.CodeMalformedRequest, "the request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err == nil {
		err = dec.Decode(v)
	}
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("unexpected data after the JSON object")
			var tooLarge *http.MaxBytesError
			if errors.As(extra, &tooLarge) {
				err = extra
			}
		}
	}
	if err == nil {
		return nil
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return herald.Errorf(herald.CodeBodyTooLarge, "request body exceeds %d bytes", tooLarge.Limit)
	}
	var coded *herald.Error // reading the body failed with a code (it took too long)
	if errors.As(err, &coded) {
		return coded
	}
	if errors.Is(err, io.EOF) {
		return herald.Errorf(herald.CodeMalformedRequest, "request body is empty; expected a JSON object")
	}
	return &herald.Error{Code: herald.CodeMalformedRequest, Message: "invalid JSON body: " + err.Error(), Err: err}
}

func (h *Handler) openSession(w http.ResponseWriter, r *http.Request) {
	id, err := h.b.OpenSession(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"session": id})
}

func (h *Handler) closeSession(w http.ResponseWriter, r *http.Request) {
	if err := h.b.CloseSession(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readiness is the body of every /readyz answer: whether the node is ready, its role
// and where the leader is, and why it is not ready when it is not.
type readiness struct {
	Status string       `json:"status"` // "ready" or "not ready"
	Role   string       `json:"role,omitempty"`
	Leader string       `json:"leader,omitempty"`
	Error  *ErrorDetail `json:"error,omitempty"`
}

// readyz answers 200 while the node takes requests, and 503 with the reason while it
// does not. With ?role=leader (or follower) it answers 200 only when the node is also
// in that role, and 503 naming the role it has otherwise, so that a load balancer can
// send writes to the leader alone; the 503 of a node in the other role is an answer,
// not an error, and carries no error code. A role that is neither is 400 E4001.
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	want, asked := r.URL.Query().Get("role"), r.URL.Query().Has("role")
	if asked && want != broker.RoleLeader && want != broker.RoleFollower {
		writeError(w, herald.Errorf(herald.CodeMalformedRequest, "role must be %q or %q, not %q", broker.RoleLeader, broker.RoleFollower, want))
		return
	}
	role, leader := h.role()
	ans := readiness{Status: "ready", Role: role, Leader: leader}
	if err := h.ready(); err != nil {
		d := Detail(err)
		ans.Status, ans.Error = "not ready", &d
		if rec, ok := w.(*recorder); ok {
			rec.code = d.Code
		}
		writeJSON(w, d.Code.Info().HTTP, ans)
		return
	}
	status := http.StatusOK
	if asked && role != want {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, ans)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeError(w, &herald.Error{Code: herald.CodeInternal, Message: "encoding the response: " + err.Error(), Err: err})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// cluster serves GET /v1/cluster: the node's role and the nodes sharing its store.
func (h *Handler) cluster(w http.ResponseWriter, r *http.Request) {
	st, err := h.b.Status(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if st.Nodes == nil {
		st.Nodes = []broker.NodeStatus{}
	}
	writeJSON(w, http.StatusOK, st)
}
