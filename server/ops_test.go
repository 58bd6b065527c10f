package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/store/memstore"
)

// grpcCall makes one unary gRPC call of procedure over HTTP/2 without TLS, as a
// Kubernetes probe or grpcurl would, with msg the encoded request message; it returns
// the grpc-status and the reply message.
func grpcCall(t *testing.T, addr, procedure string, msg []byte) (string, []byte) {
	t.Helper()
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Protocols: &protocols}}
	defer hc.CloseIdleConnections()
	frame := append([]byte{0, 0, 0, 0, 0}, msg...)
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(msg)))
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+procedure, bytes.NewReader(frame))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	status := resp.Trailer.Get("Grpc-Status")
	if status == "" {
		status = resp.Header.Get("Grpc-Status") // a trailers-only answer
	}
	if len(body) >= 5 {
		body = body[5:]
	}
	return status, body
}

// The grpc.health.v1 messages: HealthCheckRequest{service: ""} encodes as nothing,
// HealthCheckResponse{status} as field 1, a varint.
var (
	healthServing    = []byte{0x08, 0x01}
	healthNotServing = []byte{0x08, 0x02}
)

// TestGRPCHealthNeedsNoCredentials: with authentication required of every client,
// loopback too, the gRPC health check still answers SERVING (a Kubernetes gRPC probe
// brings no credentials), while an RPC of Herald's, reflection and /debug/pprof/ are
// refused.
func TestGRPCHealthNeedsNoCredentials(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger(), Auth: true, AuthLoopback: true})
	start(t, s)
	if status, reply := grpcCall(t, s.Addr(), "/grpc.health.v1.Health/Check", nil); status != "0" || !bytes.Equal(reply, healthServing) {
		t.Errorf("health check: grpc-status %q, reply %x", status, reply)
	}
	for _, procedure := range []string{"/herald.v1.Herald/OpenSession", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"} {
		if status, _ := grpcCall(t, s.Addr(), procedure, nil); status != "16" { // UNAUTHENTICATED
			t.Errorf("%s without credentials: grpc-status %q", procedure, status)
		}
	}
	resp, err := http.Get("http://" + s.Addr() + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/debug/pprof/ without credentials: %d", resp.StatusCode)
	}
}

// TestGRPCHealthFollowsReadiness: a server below its free-space reserve is not ready
// (/readyz answers 507 E5005), and the gRPC health check says NOT_SERVING.
func TestGRPCHealthFollowsReadiness(t *testing.T) {
	s := New(Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: quietLogger(), MinFreeBytes: 1 << 60})
	start(t, s)
	resp, err := http.Get("http://" + s.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatalf("/readyz: %d", resp.StatusCode)
	}
	if status, reply := grpcCall(t, s.Addr(), "/grpc.health.v1.Health/Check", nil); status != "0" || !bytes.Equal(reply, healthNotServing) {
		t.Errorf("health check: grpc-status %q, reply %x", status, reply)
	}
}

// TestPprofForAdministrators: with --auth, /debug/pprof/ serves an administrator (here
// the credential-less loopback client, "local") and refuses a principal without the
// admin grant.
func TestPprofForAdministrators(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger(), Auth: true})
	start(t, s)
	ctx := context.Background()
	admin, err := client.Dial(ctx, "http://"+s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.SetPrincipal(ctx, herald.Principal{Name: "app", Grants: []string{"read:*", "write:*"}}); err != nil {
		t.Fatal(err)
	}
	token, _, err := admin.CreateToken(ctx, "app", "test")
	if err != nil {
		t.Fatal(err)
	}
	get := func(bearer string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+s.Addr()+"/debug/pprof/goroutine?debug=1", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(""); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("an administrator: %d %.200s", code, body)
	}
	if code, body := get(token); code != http.StatusForbidden || !strings.Contains(body, string(herald.CodePermissionDenied)) {
		t.Errorf("a principal without admin: %d %.200s", code, body)
	}
}

// TestRPCsAreCountedAndLogged: the Go client's traffic — all of it RPCs — shows in the
// request log and on /metrics: publishes (a stream, counted when it ends) and queries,
// by procedure and code.
func TestRPCsAreCountedAndLogged(t *testing.T) {
	logs := &lockedBuffer{}
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	start(t, s)
	ctx := context.Background()
	c, err := client.Dial(ctx, "http://"+s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := c.Publish(ctx, "Job", map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Exec(ctx, "MATCH j: Job RETURN COUNT(j)", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "MATCH j: Job RETURN", nil); err == nil {
		t.Fatal("a statement that does not parse ran")
	}
	if err := c.Close(); err != nil { // ends the publish stream
		t.Fatal(err)
	}
	// The client ends its publish stream by cancelling it: the stream counts as
	// "canceled", as gRPC servers count a stream the caller ended.
	want := []string{
		`procedure="/herald.v1.Herald/Publish"} 1`,
		`herald_rpc_requests_total{code="invalid_argument",procedure="/herald.v1.Herald/Exec"} 1`,
		`herald_rpc_requests_total{code="ok",procedure="/herald.v1.Herald/Exec"} 1`,
		`herald_rpc_request_duration_seconds_count{code="ok",procedure="/herald.v1.Herald/Exec"} 1`,
	}
	var metrics string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + s.Addr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		metrics = string(b)
		if strings.Contains(metrics, "herald_rpc_requests_total{code=\"canceled\",procedure=\"/herald.v1.Herald/Publish\"}") { // the stream ends after Close returns
			break
		}
	}
	for _, w := range want {
		if !strings.Contains(metrics, w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
	for _, w := range []string{
		`msg="rpc request" component=rpc procedure=/herald.v1.Herald/Publish protocol=connect`,
		"stream=true",
		"status=invalid_argument",
		"code=E1001",
	} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("the log lacks %s:\n%s", w, logs)
		}
	}
}

// lockedBuffer is a bytes.Buffer the server's goroutines may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
