package e2e

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/internal/testutil"
)

// TestExposedBindRefused: bound beyond loopback without client certificates, the
// server refuses to start and says what to do.
func TestExposedBindRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "serve", "--listen", "0.0.0.0:0", "--data", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--insecure") || !strings.Contains(string(out), "loopback") {
		t.Fatalf("an exposed bind: err %v, output:\n%s", err, out)
	}
}

// TestMutualTLSFromTheCLI: a server that requires client certificates answers the
// command line that brings one (--ca, --cert, --key) and refuses one that does not.
func TestMutualTLSFromTheCLI(t *testing.T) {
	certs, err := testutil.NewCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, t.TempDir(), "--listen", "0.0.0.0:0",
		"--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey, "--tls-client-ca", certs.CA)
	_, port, _ := strings.Cut(s.Addr(), ":")
	for strings.Contains(port, ":") { // [::]:port
		_, port, _ = strings.Cut(port, ":")
	}
	url := "https://127.0.0.1:" + port
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
		return string(out), err
	}
	out, err := run("query", "--addr", url, "--ca", certs.CA, "--cert", certs.ClientCert, "--key", certs.ClientKey,
		"-e", `SPAWN t: TlsThing { n = 7 }; MATCH t: TlsThing RETURN t.n`)
	if err != nil || !strings.Contains(out, "7") {
		t.Fatalf("query with a client certificate: %v\n%s", err, out)
	}
	if out, err := run("query", "--addr", url, "--ca", certs.CA, "-e", `MATCH t: TlsThing RETURN t.n`); err == nil {
		t.Fatalf("query without a client certificate was answered:\n%s", out)
	}
	// The Go client brings its certificate too.
	tc, err := client.LoadTLSConfig(certs.CA, certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(context.Background(), url, client.WithTLSConfig(tc))
	if err != nil {
		t.Fatalf("the Go client with a certificate: %v", err)
	}
	r, err := c.Exec(context.Background(), `MATCH t: TlsThing RETURN COUNT(t)`, nil)
	c.Close()
	if err != nil || r.Results[0].Rows[0][0] != int64(1) {
		t.Fatalf("a query from the Go client over mutual TLS: %v %v", r, err)
	}
	out, err = run("consume", "--addr", url, "--ca", certs.CA, "--cert", certs.ClientCert, "--key", certs.ClientKey,
		"--count", "1", `WATCH t: TlsThing RETURN t.n`)
	if err != nil || !strings.Contains(out, `{"t.n":7} ack`) {
		t.Fatalf("consume with a client certificate: %v\n%s", err, out)
	}
}

// TestHangupWithoutTLS: SIGHUP to a server without TLS files reloads nothing and leaves
// it serving (a process without a handler for it would die of it, with no drain).
func TestHangupWithoutTLS(t *testing.T) {
	s := startServer(t, t.TempDir())
	mustQuery(t, s.URL(), `SPAWN j: HupJob { n = 1 }`)
	if err := s.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second) // a bound on a hang, not a timing
	for !strings.Contains(s.Log(), "SIGHUP: nothing to reload") {
		if s.Exited() {
			t.Fatalf("the server exited on SIGHUP:\n%s", s.Log())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not log the SIGHUP:\n%s", s.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := mustQuery(t, s.URL(), `MATCH j: HupJob RETURN COUNT(j)`); string(r.Results[0].Rows[0][0]) != "1" {
		t.Fatalf("after SIGHUP: %s", r.Results[0].Rows[0][0])
	}
}
