package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/herald-mq/herald"
)

// recorder remembers what a handler answered, for the request log and the metrics.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int
	code   herald.Code // error code of an error answer
	uri    string      // the request's path and query, for a redirect to the leader
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer (flushing, deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// handle registers fn on pattern under a route name used for metrics and logs. The
// wrapper answers wrong methods with E4008, refuses a principal the route's grant
// (herald.Operations: "METHOD pattern", or "* pattern" for a route of every method)
// with E4013 before fn runs, turns a panic into E5001 (the server keeps serving), and
// logs and measures every request.
func (h *Handler) handle(pattern, route string, fn http.HandlerFunc, methods ...string) {
	allow := strings.Join(methods, ", ")
	if len(methods) == 0 {
		h.routes = append(h.routes, "* "+pattern)
	}
	for _, m := range methods {
		h.routes = append(h.routes, m+" "+pattern)
	}
	h.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, uri: r.URL.RequestURI()}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				h.log.Error("panic serving request", "route", route, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeError(rec, herald.Errorf(herald.CodeInternal, "internal error"))
				} else {
					rec.code = herald.CodeInternal
				}
			}
			h.observe(r, rec, route, time.Since(start))
		}()
		if len(methods) > 0 && !slices.Contains(methods, r.Method) {
			rec.Header().Set("Allow", allow)
			writeError(rec, herald.Errorf(herald.CodeMethodNotAllowed, "%s does not accept %s; use %s", r.URL.Path, r.Method, allow))
			return
		}
		op := "* " + pattern
		if len(methods) > 0 {
			op = r.Method + " " + pattern
		}
		if err := herald.CheckOperation(herald.PrincipalFrom(r.Context()), op); err != nil {
			writeError(rec, err)
			return
		}
		fn(rec, r)
	}))
}

// observe logs one request and updates the metrics.
func (h *Handler) observe(r *http.Request, rec *recorder, route string, elapsed time.Duration) {
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	h.metrics.observe(route, status, elapsed)
	level := slog.LevelInfo
	switch {
	case route == "readyz" && rec.code == "":
		// Ready, or ready in a role other than the one asked: a probe's routine answer.
		level = slog.LevelDebug
	case status >= 500:
		level = slog.LevelError
	case route == "healthz" || route == "readyz" || route == "metrics":
		level = slog.LevelDebug
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Duration("duration", elapsed),
		slog.Int("bytes", rec.bytes),
		slog.String("remote", r.RemoteAddr),
	}
	if rec.code != "" {
		attrs = append(attrs, slog.String("code", string(rec.code)))
	}
	h.log.LogAttrs(r.Context(), level, "http request", attrs...)
}

func statusLabel(status int) string { return strconv.Itoa(status) }
