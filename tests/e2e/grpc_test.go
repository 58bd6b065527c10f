package e2e

import (
	"bytes"
	"context"
	encbin "encoding/binary"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/testutil"
)

// grpcRaw makes one unary gRPC call over HTTP/2 without TLS, the way a gRPC probe
// does, with msg the encoded request; it returns the grpc-status and the reply.
func grpcRaw(t *testing.T, addr, procedure string, msg []byte) (string, []byte) {
	t.Helper()
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Protocols: &protocols}}
	defer hc.CloseIdleConnections()
	frame := append(make([]byte, 5), msg...)
	encbin.BigEndian.PutUint32(frame[1:5], uint32(len(msg)))
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+procedure, bytes.NewReader(frame))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	status := resp.Trailer.Get("Grpc-Status")
	if status == "" {
		status = resp.Header.Get("Grpc-Status")
	}
	if len(body) >= 5 {
		body = body[5:]
	}
	return status, body
}

// TestGRPCHealthAndUnknownMethods: the real binary answers a gRPC health probe with
// SERVING (HealthCheckResponse{status: 1} is the two bytes 08 01), and a call of a
// procedure it does not have with grpc-status 12, UNIMPLEMENTED — both with --auth on,
// the probe without credentials.
func TestGRPCHealthAndUnknownMethods(t *testing.T) {
	s := startServer(t, t.TempDir(), "--auth", "--auth-loopback")
	if status, reply := grpcRaw(t, s.Addr(), "/grpc.health.v1.Health/Check", nil); status != "0" || !bytes.Equal(reply, []byte{0x08, 0x01}) {
		t.Errorf("health check: grpc-status %q, reply %x", status, reply)
	}
	s = startServer(t, t.TempDir())
	for _, p := range []string{"/herald.v1.Herald/NoSuchMethod", "/acme.v1.Nothing/Do"} {
		if status, _ := grpcRaw(t, s.Addr(), p, nil); status != "12" {
			t.Errorf("%s: grpc-status %q, want 12", p, status)
		}
	}
}

// grpcurlVersion is the grpcurl the reflection test builds through the module proxy.
const grpcurlVersion = "v1.9.3"

var grpcurlOnce struct {
	sync.Once
	path, why string
}

// grpcurl returns a grpcurl binary, built once with `go install`, or skips the test
// saying why the go command could not build it.
func grpcurl(t *testing.T) string {
	t.Helper()
	grpcurlOnce.Do(func() {
		dir := filepath.Join(filepath.Dir(binary), "grpcurl-bin")
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, testutil.GoTool(), "install", "github.com/fullstorydev/grpcurl/cmd/grpcurl@"+grpcurlVersion)
		cmd.Dir = filepath.Dir(binary) // outside the module: grpcurl's own go.mod decides
		cmd.Env = append(cmd.Environ(), "GOBIN="+dir, "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			grpcurlOnce.why = err.Error() + "\n" + string(out)
			return
		}
		grpcurlOnce.path = filepath.Join(dir, "grpcurl")
	})
	if grpcurlOnce.path == "" {
		t.Skipf("grpcurl %s could not be built with go install (the module proxy may be out of reach): %s", grpcurlVersion, grpcurlOnce.why)
	}
	return grpcurlOnce.path
}

// TestGrpcurl: grpcurl lists the services and calls them through server reflection,
// without the .proto — `grpcurl -plaintext 127.0.0.1:7420 list` — and its health check
// says SERVING.
func TestGrpcurl(t *testing.T) {
	tool := grpcurl(t)
	s := startServer(t, t.TempDir())
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, tool, append([]string{"-plaintext"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	list := run(s.Addr(), "list")
	for _, want := range []string{"herald.v1.Herald", "herald.v1.Queues", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(list, want+"\n") {
			t.Errorf("grpcurl list lacks %s:\n%s", want, list)
		}
	}
	if out := run(s.Addr(), "describe", "herald.v1.Queues.Enqueue"); !strings.Contains(out, "rpc Enqueue") {
		t.Errorf("grpcurl describe:\n%s", out)
	}
	if out := run(s.Addr(), "grpc.health.v1.Health/Check"); !strings.Contains(out, `"status": "SERVING"`) {
		t.Errorf("grpcurl health check:\n%s", out)
	}
	out := run("-d", `{"query": "SPAWN j: Job {n = 1} RETURNING j.n"}`, s.Addr(), "herald.v1.Herald/Query")
	if !strings.Contains(out, `"seq"`) {
		t.Errorf("grpcurl Query:\n%s", out)
	}
}
