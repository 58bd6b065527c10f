package rpcapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
)

// mounted serves svc the way the server does (Mount, with a JSON API stand-in behind
// it) over HTTP/2 with TLS, which gRPC and bidirectional streams need.
func mounted(t *testing.T, svc *Service) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	svc.Mount(mux, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error": {"code": "E4007"}}`)
	}))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// TestReflection: gRPC server reflection lists the services and gives their files, so
// grpcurl needs no -proto.
func TestReflection(t *testing.T) {
	srv := mounted(t, New(fakeNode(&fakeEngine{}, nil, nil), Options{Logger: slog.New(slog.DiscardHandler)}))
	for _, proto := range []connect.ClientOption{connect.WithGRPC(), connect.WithGRPCWeb()} {
		stream := grpcreflect.NewClient(srv.Client(), srv.URL, proto).NewStream(context.Background())
		names, err := stream.ListServices()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{heraldv1connect.HeraldName, heraldv1connect.QueuesName, grpchealth.HealthV1ServiceName, grpcreflect.ReflectV1ServiceName} {
			if !slices.ContainsFunc(names, func(n protoreflect.FullName) bool { return string(n) == want }) {
				t.Errorf("reflection lists %v, without %s", names, want)
			}
		}
		files, err := stream.FileContainingSymbol(heraldv1connect.QueuesName + ".Enqueue")
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 || files[0].GetName() != heraldv1.File_herald_proto.Path() {
			t.Errorf("the file of Queues.Enqueue: %v", files)
		}
		if _, err := stream.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHealth: grpc.health.v1.Health answers SERVING while the server is ready,
// NOT_SERVING while it is not, and not_found for a service it does not have.
func TestHealth(t *testing.T) {
	var notReady atomic.Bool
	ready := func() error {
		if notReady.Load() {
			return herald.Errorf(herald.CodeShuttingDown, "stopping")
		}
		return nil
	}
	srv := mounted(t, New(fakeNode(&fakeEngine{}, nil, nil), Options{Logger: slog.New(slog.DiscardHandler), Ready: ready}))
	c := grpchealth.NewClient(srv.Client(), srv.URL, connect.WithGRPC())
	check := func(service string) (grpchealth.Status, error) {
		resp, err := c.Check(context.Background(), &grpchealth.CheckRequest{Service: service})
		if err != nil {
			return 0, err
		}
		return resp.Status, nil
	}
	for _, service := range []string{"", heraldv1connect.HeraldName, heraldv1connect.QueuesName} {
		if st, err := check(service); err != nil || st != grpchealth.StatusServing {
			t.Errorf("%q while ready: %v %v", service, st, err)
		}
	}
	notReady.Store(true)
	if st, err := check(""); err != nil || st != grpchealth.StatusNotServing {
		t.Errorf("while not ready: %v %v", st, err)
	}
	if _, err := check("acme.v1.Nothing"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("an unknown service: %v", err)
	}
}

// TestUnknownMethodsInTheCallersProtocol: a call of a procedure the server does not
// have — in one of its services or in none — answers UNIMPLEMENTED (E4024) as gRPC
// (trailers, grpc-status 12) or Connect (its JSON error) as the caller speaks; other
// requests reach the JSON API behind.
func TestUnknownMethodsInTheCallersProtocol(t *testing.T) {
	srv := mounted(t, New(fakeNode(&fakeEngine{}, nil, nil), Options{Logger: slog.New(slog.DiscardHandler)}))
	for _, path := range []string{"/herald.v1.Herald/Nope", "/acme.v1.Thing/Do"} {
		for name, proto := range map[string]connect.ClientOption{"grpc": connect.WithGRPC(), "grpc-web": connect.WithGRPCWeb(), "connect": connect.WithProtoJSON()} {
			c := connect.NewClient[emptypb.Empty, emptypb.Empty](srv.Client(), srv.URL+path, proto)
			_, err := c.CallUnary(context.Background(), connect.NewRequest(&emptypb.Empty{}))
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != connect.CodeUnimplemented || ce.Meta().Get(HeaderCode) != string(herald.CodeUnknownMethod) {
				t.Errorf("%s %s: %v", name, path, err)
			}
		}

		// What a gRPC client reads on the wire: status 200 and grpc-status 12.
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader([]byte{0, 0, 0, 0, 0}))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status := resp.Trailer.Get("Grpc-Status")
		if status == "" {
			status = resp.Header.Get("Grpc-Status") // a trailers-only answer
		}
		if resp.StatusCode != http.StatusOK || status != "12" {
			t.Errorf("raw gRPC %s: HTTP %d, grpc-status %q", path, resp.StatusCode, status)
		}

		// Connect's unary protocol: HTTP 501 and {"code": "unimplemented"}.
		resp, err = srv.Client().Post(srv.URL+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), `"code":"unimplemented"`) {
			t.Errorf("Connect JSON %s: %d %s", path, resp.StatusCode, body)
		}
	}

	// Requests that are not RPCs stay the JSON API's.
	for _, path := range []string{"/v1/query", "/nothing", "/queue/a.b/push"} {
		resp, err := srv.Client().Post(srv.URL+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "E4007") {
			t.Errorf("POST %s: %d %s", path, resp.StatusCode, body)
		}
	}
}

// TestEveryCallIsObserved: every call — unary, failed, a stream (once, when it ends),
// a health check, a call of an unknown procedure — is logged and passed to
// Options.Observe with its procedure, code and duration; health checks log at debug
// level, like /healthz.
func TestEveryCallIsObserved(t *testing.T) {
	type obs struct{ procedure, code string }
	seen := make(chan obs, 16)
	logs := &syncBuffer{}
	st := newFakeStream()
	eng := &fakeEngine{resp: &herald.Response{Seq: 1, Tick: 1}}
	svc := New(fakeNode(eng, &fakeDelivery{stream: st}, nil), Options{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Observe: func(procedure, code string, elapsed time.Duration) {
			if elapsed < 0 {
				t.Errorf("%s took %s", procedure, elapsed)
			}
			seen <- obs{procedure, code}
		},
	})
	srv := mounted(t, svc)
	next := func(what string) obs {
		t.Helper()
		select {
		case o := <-seen:
			return o
		case <-time.After(10 * time.Second):
			t.Fatalf("%s was not observed", what)
		}
		return obs{}
	}
	c := heraldv1connect.NewHeraldClient(srv.Client(), srv.URL, connect.WithGRPC())
	ctx := context.Background()

	if _, err := c.Query(ctx, connect.NewRequest(&heraldv1.QueryRequest{Query: "TICK"})); err != nil {
		t.Fatal(err)
	}
	if o := next("a query"); o != (obs{heraldv1connect.HeraldQueryProcedure, "ok"}) {
		t.Errorf("a query: %+v", o)
	}
	if _, err := c.CloseSession(ctx, connect.NewRequest(&heraldv1.CloseSessionRequest{Session: "nope"})); err == nil {
		t.Fatal("closing an unknown session succeeded")
	}
	if o := next("a failed call"); o != (obs{heraldv1connect.HeraldCloseSessionProcedure, "not_found"}) {
		t.Errorf("a failed call: %+v", o)
	}

	consumeAndCancel(t, c, st, seen)
	if o := next("a stream"); o.procedure != heraldv1connect.HeraldConsumeProcedure || o.code != "canceled" {
		t.Errorf("a stream: %+v", o)
	}

	if _, err := grpchealth.NewClient(srv.Client(), srv.URL, connect.WithGRPC()).Check(ctx, &grpchealth.CheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if o := next("a health check"); o != (obs{healthCheck, "ok"}) {
		t.Errorf("a health check: %+v", o)
	}
	unknown := connect.NewClient[emptypb.Empty, emptypb.Empty](srv.Client(), srv.URL+"/acme.v1.Thing/Do", connect.WithGRPC())
	if _, err := unknown.CallUnary(ctx, connect.NewRequest(&emptypb.Empty{})); err == nil {
		t.Fatal("an unknown procedure answered")
	}
	if o := next("an unknown procedure"); o != (obs{OtherProcedure, "unimplemented"}) {
		t.Errorf("an unknown procedure: %+v", o)
	}

	checkCallLog(t, logs.String())
}

// checkCallLog: the log of TestEveryCallIsObserved's calls has a record of each, at its
// level, with its code.
func checkCallLog(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		`level=INFO msg="rpc request" procedure=/herald.v1.Herald/Query protocol=grpc status=ok duration=`,
		`level=INFO msg="rpc request" procedure=/herald.v1.Herald/CloseSession protocol=grpc status=not_found duration=`,
		`level=INFO msg="rpc request" procedure=/herald.v1.Herald/Consume protocol=grpc status=canceled duration=`,
		`level=DEBUG msg="rpc request" procedure=/grpc.health.v1.Health/Check protocol=grpc status=ok`,
		`level=INFO msg="rpc request" procedure=/acme.v1.Thing/Do protocol=grpc status=unimplemented`,
		"code=E3004",
		"code=E4024",
		"stream=true",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log has no %q:\n%s", want, out)
		}
	}
}

// consumeAndCancel opens a Consume stream, receives one delivery, checks that the open
// stream was not observed yet, and cancels it.
func consumeAndCancel[T any](t *testing.T, c heraldv1connect.HeraldClient, st *fakeStream, seen chan T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.Consume(ctx, connect.NewRequest(&heraldv1.ConsumeRequest{Query: "WATCH j: Job [mode: consume] RETURN j"}))
	if err != nil {
		t.Fatal(err)
	}
	st.events <- herald.Event{Type: herald.EventConsumed, Match: herald.Int(1), DeliveryID: "d1", Attempt: 1}
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	select {
	case o := <-seen:
		t.Fatalf("an open stream was observed: %+v", o)
	default:
	}
	cancel()
	_ = stream.Close()
}

// TestObservedLevels: a call that fails on the server's side logs at error level, as a
// 5xx answer of the JSON API does.
func TestObservedLevels(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want slog.Level
	}{
		{nil, slog.LevelInfo},
		{toConnect(herald.Errorf(herald.CodeNodeNotFound, "x")), slog.LevelInfo},
		{toConnect(herald.Errorf(herald.CodeInternal, "x")), slog.LevelError},
		{toConnect(herald.Errorf(herald.CodeStorageFull, "x")), slog.LevelError}, // 507 over HTTP
		{toConnect(herald.Errorf(herald.CodeUnknownMethod, "x")), slog.LevelInfo},
		{connect.NewError(connect.CodeUnavailable, errors.New("x")), slog.LevelError},
		{context.Canceled, slog.LevelInfo},
		{errors.New("a bare error"), slog.LevelError},
	} {
		logs := &syncBuffer{}
		svc := New(fakeNode(&fakeEngine{}, nil, nil), Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		svc.observe(context.Background(), call{procedure: "/p.S/M", err: tc.err})
		if !strings.Contains(logs.String(), "level="+tc.want.String()+" ") {
			t.Errorf("%v: %s, want level %s", tc.err, logs, tc.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the handlers' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestStreamingRequestsIncludeReflection: a reflection call is a stream of requests
// (grpcurl asks several questions on one), so the server's bound on reading a request
// body must not apply to it, as it does not to Publish.
func TestStreamingRequestsIncludeReflection(t *testing.T) {
	got := StreamingRequests()
	for _, want := range []string{reflectV1, reflectV1Beta, heraldv1connect.HeraldPublishProcedure} {
		if !slices.Contains(got, want) {
			t.Errorf("StreamingRequests() = %v, without %s", got, want)
		}
	}
	if slices.Contains(got, heraldv1connect.HeraldQueryProcedure) || slices.Contains(got, healthCheck) {
		t.Errorf("StreamingRequests() = %v lists unary calls", got)
	}
}
