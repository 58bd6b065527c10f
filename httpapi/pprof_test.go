package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
)

// TestPprof: the Go runtime's profiles are served under /debug/pprof/ to a server
// without authentication and to an administrator; a principal without the admin grant
// is refused with E4013 before anything is profiled.
func TestPprof(t *testing.T) {
	h := newTestHandler(t, &fakeEngine{}, Options{})
	for path, want := range map[string]string{
		"/debug/pprof/":                     "goroutine",
		"/debug/pprof/goroutine?debug=1":    "goroutine profile:",
		"/debug/pprof/cmdline":              "",
		"/debug/pprof/heap?debug=1":         "heap profile:",
		"/debug/pprof/profile?seconds=1":    "",
		"/debug/pprof/trace?seconds=0.01":   "",
		"/debug/pprof/symbol":               "num_symbols:",
		"/debug/pprof/threadcreate?debug=1": "threadcreate profile:",
	} {
		w := do(t, h, "GET", path, "")
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), want) {
			t.Errorf("GET %s: %d %.200s", path, w.Code, w.Body)
		}
	}

	for name, p := range map[string]*herald.Principal{
		"admin":  {Name: "ops", Grants: []string{herald.ActAdmin}},
		"reader": {Name: "app", Grants: []string{"read:*", "write:*"}},
	} {
		req := httptest.NewRequest("GET", "/debug/pprof/goroutine?debug=1", nil)
		req = req.WithContext(herald.WithPrincipal(req.Context(), p))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch name {
		case "admin":
			if w.Code != http.StatusOK {
				t.Errorf("an administrator: %d %s", w.Code, w.Body)
			}
		default:
			if w.Code != http.StatusForbidden || decodeError(t, w).Code != herald.CodePermissionDenied {
				t.Errorf("a principal without admin: %d %s", w.Code, w.Body)
			}
		}
	}
}

// TestRPCMetrics: the RPCs the server reports through ObserveRPC are on /metrics by
// procedure and code, beside the HTTP requests.
func TestRPCMetrics(t *testing.T) {
	h := newTestHandler(t, &fakeEngine{}, Options{})
	h.ObserveRPC("/herald.v1.Herald/Publish", "ok", 3*time.Millisecond)
	h.ObserveRPC("/herald.v1.Herald/Publish", "ok", time.Second)
	h.ObserveRPC("/herald.v1.Herald/Ack", "not_found", time.Millisecond)
	body := do(t, h, "GET", "/metrics", "").Body.String()
	for _, want := range []string{
		`herald_rpc_requests_total{code="ok",procedure="/herald.v1.Herald/Publish"} 2`,
		`herald_rpc_requests_total{code="not_found",procedure="/herald.v1.Herald/Ack"} 1`,
		`herald_rpc_request_duration_seconds_count{code="ok",procedure="/herald.v1.Herald/Publish"} 2`,
		`herald_rpc_request_duration_seconds_sum{code="ok",procedure="/herald.v1.Herald/Publish"} 1.003`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
