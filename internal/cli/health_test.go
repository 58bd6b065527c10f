package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/herald-mq/herald/heraldtest"
)

// TestHealthCommand: herald health prints "ready" and exits 0 against a ready broker;
// against one that is not ready it exits 1 and says why (the error /readyz gives);
// --live asks /healthz; an unreachable broker exits 1.
func TestHealthCommand(t *testing.T) {
	srv := heraldtest.NewServer(t)
	if out, errOut, err := run(t, "", "health", "--addr", srv.URL()); err != nil || out != "ready\n" {
		t.Fatalf("a ready broker: %q %q %v", out, errOut, err)
	}
	if out, _, err := run(t, "", "health", "--live", "--addr", srv.URL()); err != nil || out != "ok\n" {
		t.Fatalf("--live: %q %v", out, err)
	}

	stopping := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error": {"code": "E5003", "name": "SHUTTING_DOWN", "message": "server is stopping"}}`)
	}))
	defer stopping.Close()
	_, errOut, err := run(t, "", "health", "--addr", stopping.URL)
	if ExitCode(err) != 1 || !strings.Contains(errOut, "not ready: E5003 server is stopping") {
		t.Fatalf("a stopping broker: exit %d, %q", ExitCode(err), errOut)
	}
	addr := stopping.URL
	stopping.Close()
	if _, errOut, err := run(t, "", "health", "--addr", addr); ExitCode(err) != 1 || errOut == "" {
		t.Fatalf("an unreachable broker: exit %d, %q", ExitCode(err), errOut)
	}
}
