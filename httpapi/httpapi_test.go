package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// fakeEngine records calls and answers with canned results or errors.
type fakeEngine struct {
	mu       sync.Mutex
	query    string
	session  string
	params   map[string]herald.Value
	resp     *herald.Response
	err      error
	panicMsg string
	sessions map[string]bool
}

func (f *fakeEngine) Exec(ctx context.Context, sessionID, query string, params map[string]herald.Value) (*herald.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panicMsg != "" {
		panic(f.panicMsg)
	}
	f.query, f.session, f.params = query, sessionID, params
	if f.err != nil {
		return nil, f.err
	}
	if f.resp != nil {
		return f.resp, nil
	}
	return &herald.Response{Results: []herald.Result{{}}, Seq: 7, Tick: 7}, nil
}

func (f *fakeEngine) OpenSession(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sessions == nil {
		f.sessions = map[string]bool{}
	}
	f.sessions["s1"] = true
	return "s1", nil
}

func (f *fakeEngine) CloseSession(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.sessions[id] {
		return herald.Errorf(herald.CodeNoSession, "unknown session %q", id)
	}
	delete(f.sessions, id)
	return nil
}

func (f *fakeEngine) Position() (uint64, uint64) { return 7, 7 }

// newTestHandler returns a handler over a fake node made of eng and the other fakes
// given (a *fakeDelivery, *fakeWatcher or *fakeQueue).
func newTestHandler(t *testing.T, eng *fakeEngine, opts Options, others ...any) *Handler {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return New(fakeNode(eng, others...), opts)
}

func do(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func decodeError(t *testing.T, w *httptest.ResponseRecorder) ErrorDetail {
	t.Helper()
	var body ErrorBody
	dec := json.NewDecoder(w.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("error body does not decode: %v", err)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	return body.Error
}

func TestQueryOK(t *testing.T) {
	f := &fakeEngine{resp: &herald.Response{
		Results: []herald.Result{
			{Stats: herald.Stats{TypesDeclared: 1}},
			{Columns: []string{"j.status", "j.priority"}, Rows: [][]herald.Value{{herald.String("pending"), herald.Int(5)}}, Stats: herald.Stats{RowsScanned: 1}},
		},
		Seq: 3, Tick: 2,
	}}
	h := newTestHandler(t, f, Options{})
	w := do(t, h, "POST", "/v1/query", `{"query":"MATCH j: Job WHERE j.priority > $p RETURN j.status, j.priority","params":{"p":3,"f":1.5,"s":"x","l":[1,"a",null],"b":true},"session":"abc"}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	want := `{"results":[{"columns":[],"rows":[],"stats":{"types_declared":1,"rows_scanned":0}},{"columns":["j.status","j.priority"],"rows":[["pending",5]],"stats":{"rows_scanned":1}}],"seq":3,"tick":2}` + "\n"
	if got := w.Body.String(); got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
	if f.session != "abc" || !strings.HasPrefix(f.query, "MATCH") {
		t.Errorf("engine saw session %q query %q", f.session, f.query)
	}
	wantParams := map[string]herald.Value{
		"p": herald.Int(3), "f": herald.Float(1.5), "s": herald.String("x"),
		"l": herald.List(herald.Int(1), herald.String("a"), herald.Null), "b": herald.Bool(true),
	}
	for k, v := range wantParams {
		got, ok := f.params[k]
		if !ok || got.Kind() != v.Kind() || !got.Equal(v) {
			t.Errorf("param %s = %v (%v), want %v (%v)", k, got, got.Kind(), v, v.Kind())
		}
	}
}

func TestQueryBigIntegerStaysExact(t *testing.T) {
	f := &fakeEngine{}
	h := newTestHandler(t, f, Options{})
	w := do(t, h, "POST", "/v1/query", `{"query":"RETURN $n","params":{"n":9007199254740993}}`)
	if w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	if got := f.params["n"]; got.Kind() != herald.KindInt || got.AsInt() != 9007199254740993 {
		t.Fatalf("param n = %v", got)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name         string
		method, path string
		body         string
		engErr       error
		maxBody      int64
		status       int
		code         herald.Code
		line, col    int
	}{
		{name: "malformed JSON", method: "POST", path: "/v1/query", body: `{"query": `, status: 400, code: herald.CodeMalformedRequest},
		{name: "not an object", method: "POST", path: "/v1/query", body: `[1,2]`, status: 400, code: herald.CodeMalformedRequest},
		{name: "empty body", method: "POST", path: "/v1/query", body: ``, status: 400, code: herald.CodeMalformedRequest},
		{name: "unknown field", method: "POST", path: "/v1/query", body: `{"query":"x","bogus":1}`, status: 400, code: herald.CodeMalformedRequest},
		{name: "trailing data", method: "POST", path: "/v1/query", body: `{"query":"x"} {"query":"y"}`, status: 400, code: herald.CodeMalformedRequest},
		{name: "bad bytes parameter", method: "POST", path: "/v1/query", body: `{"query":"x","params":{"o":{"$bytes":"aGVsbG8=","a":1}}}`, status: 400, code: herald.CodeMalformedRequest},
		{name: "empty query", method: "POST", path: "/v1/query", body: `{"query":""}`, status: 400, code: herald.CodeEmptyQuery},
		{name: "whitespace query", method: "POST", path: "/v1/query", body: `{"query":" \n\t "}`, status: 400, code: herald.CodeEmptyQuery},
		{name: "missing query", method: "POST", path: "/v1/query", body: `{}`, status: 400, code: herald.CodeEmptyQuery},
		{name: "body too large", method: "POST", path: "/v1/query", body: `{"query":"` + strings.Repeat("x", 200) + `"}`, maxBody: 64, status: 413, code: herald.CodeBodyTooLarge},
		{name: "wrong method", method: "GET", path: "/v1/query", status: 405, code: herald.CodeMethodNotAllowed},
		{name: "wrong method sessions", method: "GET", path: "/v1/sessions", status: 405, code: herald.CodeMethodNotAllowed},
		{name: "unknown path", method: "GET", path: "/v2/nothing", status: 404, code: herald.CodeNotFound},
		{name: "syntax error", method: "POST", path: "/v1/query", body: `{"query":"MATCH ["}`,
			engErr: herald.Errorf(herald.CodeSyntax, "expected identifier, found '['").At(1, 7), status: 400, code: herald.CodeSyntax, line: 1, col: 7},
		{name: "unknown parameter", method: "POST", path: "/v1/query", body: `{"query":"RETURN 1","params":{"x":1}}`,
			engErr: herald.Errorf(herald.CodeUnknownParameter, "$x is not used"), status: 400, code: herald.CodeUnknownParameter},
		{name: "missing parameter", method: "POST", path: "/v1/query", body: `{"query":"RETURN $x"}`,
			engErr: herald.Errorf(herald.CodeMissingParameter, "$x is not supplied"), status: 400, code: herald.CodeMissingParameter},
		{name: "wrapped coded error", method: "POST", path: "/v1/query", body: `{"query":"KILL #x"}`,
			engErr: fmtWrap(herald.Errorf(herald.CodeNodeNotFound, "no node #x")), status: 404, code: herald.CodeNodeNotFound},
		{name: "foreign error", method: "POST", path: "/v1/query", body: `{"query":"RETURN 1"}`,
			engErr: errors.New("disk on fire"), status: 500, code: herald.CodeInternal},
		{name: "not implemented", method: "POST", path: "/v1/query", body: `{"query":"WATCH x: Job"}`,
			engErr: herald.Errorf(herald.CodeNotImplemented, "WATCH"), status: 501, code: herald.CodeNotImplemented},
		{name: "close unknown session", method: "DELETE", path: "/v1/sessions/nope", status: 404, code: herald.CodeNoSession},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newTestHandler(t, &fakeEngine{err: c.engErr}, Options{MaxBodyBytes: c.maxBody})
			w := do(t, h, c.method, c.path, c.body)
			if w.Code != c.status {
				t.Errorf("status %d, want %d (%s)", w.Code, c.status, w.Body)
			}
			d := decodeError(t, w)
			if d.Code != c.code || d.Name != c.code.Name() || d.Message == "" {
				t.Errorf("error %+v, want code %s", d, c.code)
			}
			if d.Line != c.line || d.Column != c.col {
				t.Errorf("position %d:%d, want %d:%d", d.Line, d.Column, c.line, c.col)
			}
		})
	}
}

func fmtWrap(err error) error { return errors.Join(errors.New("while executing"), err) }

func TestPositionOmittedWhenUnset(t *testing.T) {
	h := newTestHandler(t, &fakeEngine{}, Options{})
	w := do(t, h, "POST", "/v1/query", `{"query":""}`)
	if strings.Contains(w.Body.String(), "line") || strings.Contains(w.Body.String(), "column") {
		t.Fatalf("position fields in %s", w.Body)
	}
}

func TestMethodNotAllowedSetsAllow(t *testing.T) {
	h := newTestHandler(t, &fakeEngine{}, Options{})
	w := do(t, h, "PUT", "/v1/sessions/s1", "")
	if w.Code != 405 || w.Header().Get("Allow") != "DELETE" {
		t.Fatalf("status %d Allow %q", w.Code, w.Header().Get("Allow"))
	}
}

func TestPanicRecovered(t *testing.T) {
	f := &fakeEngine{panicMsg: "boom"}
	var logs bytes.Buffer
	h := New(fakeNode(f), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	w := do(t, h, "POST", "/v1/query", `{"query":"RETURN 1"}`)
	if w.Code != 500 {
		t.Fatalf("status %d", w.Code)
	}
	if d := decodeError(t, w); d.Code != herald.CodeInternal {
		t.Fatalf("code %s", d.Code)
	}
	if !strings.Contains(logs.String(), "boom") {
		t.Errorf("panic not logged: %s", logs.String())
	}
	// The handler keeps serving.
	f.mu.Lock()
	f.panicMsg = ""
	f.mu.Unlock()
	if w := do(t, h, "POST", "/v1/query", `{"query":"RETURN 1"}`); w.Code != 200 {
		t.Fatalf("after panic: status %d", w.Code)
	}
}

func TestSessions(t *testing.T) {
	f := &fakeEngine{}
	h := newTestHandler(t, f, Options{})
	w := do(t, h, "POST", "/v1/sessions", "")
	if w.Code != 200 {
		t.Fatalf("open: %d %s", w.Code, w.Body)
	}
	var got struct{ Session string }
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Session != "s1" {
		t.Fatalf("open body %s (%v)", w.Body, err)
	}
	if w := do(t, h, "DELETE", "/v1/sessions/s1", ""); w.Code != 204 {
		t.Fatalf("close: %d %s", w.Code, w.Body)
	}
	if w := do(t, h, "DELETE", "/v1/sessions/s1", ""); w.Code != 404 {
		t.Fatalf("second close: %d", w.Code)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	var mu sync.Mutex
	var readyErr error
	h := newTestHandler(t, &fakeEngine{}, Options{Ready: func() error {
		mu.Lock()
		defer mu.Unlock()
		return readyErr
	}})
	if w := do(t, h, "GET", "/healthz", ""); w.Code != 200 {
		t.Fatalf("healthz %d", w.Code)
	}
	if w := do(t, h, "GET", "/readyz", ""); w.Code != 200 {
		t.Fatalf("readyz %d", w.Code)
	}
	mu.Lock()
	readyErr = herald.Errorf(herald.CodeShuttingDown, "stopping")
	mu.Unlock()
	w := do(t, h, "GET", "/readyz", "")
	if w.Code != 503 {
		t.Fatalf("readyz while stopping: %d", w.Code)
	}
	if r := decodeReadiness(t, w); r.Status != "not ready" || r.Error == nil || r.Error.Code != herald.CodeShuttingDown {
		t.Fatalf("body %+v", r)
	}
	if w := do(t, h, "GET", "/healthz", ""); w.Code != 200 {
		t.Fatalf("healthz while stopping %d", w.Code)
	}
}

type fakeSource []herald.Metric

func (f fakeSource) Metrics() []herald.Metric { return f }

func TestMetrics(t *testing.T) {
	h := newTestHandler(t, &fakeEngine{}, Options{Metrics: []herald.MetricSource{fakeSource{
		{Name: "herald_test_level", Help: "A level.", Value: 3},
		{Name: "herald_test_total", Help: "A total.", Counter: true, Value: 12},
		{Name: "herald_test_ready", Help: "Per group.", Value: 5, Labels: []herald.Label{{Name: "group", Value: "billing"}, {Name: "type", Value: "Job"}}},
		{Name: "herald_test_ready", Help: "Per group.", Value: 2, Labels: []herald.Label{{Name: "group", Value: "_other"}, {Name: "type", Value: ""}}},
	}}})
	do(t, h, "POST", "/v1/query", `{"query":"RETURN 1"}`)
	do(t, h, "POST", "/v1/query", `{"query":""}`)
	do(t, h, "GET", "/nowhere", "")
	w := do(t, h, "GET", "/metrics", "")
	if w.Code != 200 {
		t.Fatalf("metrics %d", w.Code)
	}
	body := w.Body.String()
	for _, want := range []string{
		`herald_http_requests_total{code="200",route="query"} 1`,
		`herald_http_requests_total{code="400",route="query"} 1`,
		`herald_http_requests_total{code="404",route="other"} 1`,
		`herald_http_request_duration_seconds_count{code="200",route="query"} 1`,
		`herald_commit_seq 7`,
		`herald_tick 7`,
		"# TYPE herald_test_level gauge\nherald_test_level 3",
		"# TYPE herald_test_total counter\nherald_test_total 12",
		// Series of one name, told apart by their labels.
		`herald_test_ready{group="_other",type=""} 2`,
		`herald_test_ready{group="billing",type="Job"} 5`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestRequestLog(t *testing.T) {
	var logs bytes.Buffer
	h := New(fakeNode(&fakeEngine{}), Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	do(t, h, "POST", "/v1/query", `{"query":""}`)
	var rec map[string]any
	if err := json.Unmarshal(logs.Bytes(), &rec); err != nil {
		t.Fatalf("log line %q: %v", logs.String(), err)
	}
	if rec["msg"] != "http request" || rec["route"] != "query" || rec["status"] != float64(400) || rec["code"] != "E4002" {
		t.Fatalf("log record %v", rec)
	}
}

// A Bytes value in a row is {"$bytes": "<base64>"}; a parameter in that form is Bytes,
// and one that is not base64, or with another key beside "$bytes", is refused; any
// other object is a Map.
func TestQueryBytes(t *testing.T) {
	hello := herald.Bytes([]byte("hello"))
	f := &fakeEngine{resp: &herald.Response{Results: []herald.Result{{
		Columns: []string{"b", "s"},
		Rows:    [][]herald.Value{{hello, herald.String("aGVsbG8=")}},
	}}, Seq: 1, Tick: 1}}
	h := newTestHandler(t, f, Options{})
	w := do(t, h, "POST", "/v1/query", `{"query":"RETURN $b","params":{"b":{"$bytes":"aGVsbG8="}}}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	want := `{"results":[{"columns":["b","s"],"rows":[[{"$bytes":"aGVsbG8="},"aGVsbG8="]],"stats":{"rows_scanned":0}}],"seq":1,"tick":1}` + "\n"
	if got := w.Body.String(); got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
	if b := f.params["b"]; b.Kind() != herald.KindBytes || !b.Equal(hello) {
		t.Errorf("parameter $b = %s (%s)", b, b.Kind())
	}
	for _, params := range []string{`{"b":{"$bytes":"!!"}}`, `{"b":{"$bytes":"aGVsbG8"}}`, `{"b":{"$bytes":"aGVsbG8=","x":1}}`, `{"b":[{"$bytes":1}]}`} {
		w := do(t, h, "POST", "/v1/query", `{"query":"RETURN $b","params":`+params+`}`)
		if d := decodeError(t, w); w.Code != 400 || d.Code != herald.CodeMalformedRequest {
			t.Errorf("params %s: status %d, %+v", params, w.Code, d)
		}
	}
	w = do(t, h, "POST", "/v1/query", `{"query":"RETURN $b","params":{"b":{"bytes":"aGVsbG8=","n":{"k":[1]}}}}`)
	if w.Code != 200 {
		t.Fatalf("an object parameter: status %d: %s", w.Code, w.Body)
	}
	if b := f.params["b"]; b.Kind() != herald.KindMap || b.String() != `{bytes: "aGVsbG8=", n: {k: [1]}}` {
		t.Errorf("parameter $b = %s (%s), want a Map", b, b.Kind())
	}
}

// A follower's refusal that names the leader redirects the request there, method and
// body kept, with the error besides; one that names none answers 503.
func TestNotLeaderRedirects(t *testing.T) {
	f := &fakeEngine{err: broker.NotLeaderError("http://leader:7420", "a write")}
	h := newTestHandler(t, f, Options{})
	rec := do(t, h, http.MethodPost, "/v1/query?x=1", `{"query": "SPAWN j: Job"}`)
	if rec.Code != http.StatusTemporaryRedirect || rec.Header().Get("Location") != "http://leader:7420/v1/query?x=1" {
		t.Fatalf("status %d, location %q", rec.Code, rec.Header().Get("Location"))
	}
	if d := decodeError(t, rec); d.Code != herald.CodeNotLeader || d.Leader != "http://leader:7420" {
		t.Fatalf("body %+v", d)
	}
	f.err = broker.NotLeaderError("", "a write")
	rec = do(t, h, http.MethodPost, "/v1/query", `{"query": "SPAWN j: Job"}`)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Location") != "" {
		t.Fatalf("without a leader: status %d, location %q", rec.Code, rec.Header().Get("Location"))
	}
}

// decodeReadiness decodes a /readyz answer, refusing fields it does not know.
func decodeReadiness(t *testing.T, w *httptest.ResponseRecorder) readiness {
	t.Helper()
	var r readiness
	dec := json.NewDecoder(w.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("readiness body does not decode: %v", err)
	}
	return r
}

// /readyz names the node's role and the leader; with ?role= it answers 200 only on a
// ready node of that role, and 503 saying the role it has on one of the other (no
// redirect, no error code, not logged as an error), so a load balancer can tell the
// leader from the followers. Not being ready wins over the role; a role that is
// neither leader nor follower is 400 E4001.
func TestReadinessByRole(t *testing.T) {
	var mu sync.Mutex
	role, leader := broker.RoleFollower, "http://leader:7420"
	var readyErr error
	var logs bytes.Buffer
	h := New(fakeNode(&fakeEngine{}), Options{
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Ready: func() error {
			mu.Lock()
			defer mu.Unlock()
			return readyErr
		},
		Role: func() (string, string) {
			mu.Lock()
			defer mu.Unlock()
			return role, leader
		},
	})
	check := func(method, path string, status int, want readiness) {
		t.Helper()
		w := do(t, h, method, path, "")
		if w.Code != status {
			t.Fatalf("%s %s: status %d, want %d: %s", method, path, w.Code, status, w.Body)
		}
		if loc := w.Header().Get("Location"); loc != "" {
			t.Fatalf("%s %s: redirected to %s", method, path, loc)
		}
		if method == http.MethodHead {
			return
		}
		got := decodeReadiness(t, w)
		if got.Status != want.Status || got.Role != want.Role || got.Leader != want.Leader || (got.Error == nil) != (want.Error == nil) ||
			(got.Error != nil && got.Error.Code != want.Error.Code) {
			t.Fatalf("%s %s: body %+v (error %+v), want %+v (error %+v)", method, path, got, got.Error, want, want.Error)
		}
	}
	follower := readiness{Status: "ready", Role: broker.RoleFollower, Leader: "http://leader:7420"}
	check("GET", "/readyz", 200, follower)
	check("GET", "/readyz?role=follower", 200, follower)
	check("GET", "/readyz?role=leader", 503, follower)
	check("HEAD", "/readyz?role=leader", 503, follower)
	if logs.Len() != 0 {
		t.Fatalf("routine probes logged at info or above:\n%s", logs.String())
	}

	mu.Lock()
	role, leader = broker.RoleLeader, "http://me:7420"
	mu.Unlock()
	lead := readiness{Status: "ready", Role: broker.RoleLeader, Leader: "http://me:7420"}
	check("GET", "/readyz?role=leader", 200, lead)
	check("HEAD", "/readyz?role=leader", 200, lead)
	check("GET", "/readyz?role=follower", 503, lead)

	for _, bad := range []string{"primary", "", "Leader"} {
		w := do(t, h, "GET", "/readyz?role="+bad, "")
		if d := decodeError(t, w); w.Code != 400 || d.Code != herald.CodeMalformedRequest || !strings.Contains(d.Message, "leader") {
			t.Fatalf("role %q: status %d, %+v", bad, w.Code, d)
		}
	}

	mu.Lock()
	readyErr = herald.Errorf(herald.CodeShuttingDown, "stopping")
	mu.Unlock()
	notReady := readiness{Status: "not ready", Role: broker.RoleLeader, Leader: "http://me:7420", Error: &ErrorDetail{Code: herald.CodeShuttingDown}}
	check("GET", "/readyz?role=leader", 503, notReady)
	check("GET", "/readyz", 503, notReady)
	if !strings.Contains(logs.String(), `"code":"E5003"`) {
		t.Fatalf("a node that is not ready is not logged with its code:\n%s", logs.String())
	}

	// Without Options.Role the node leads alone.
	solo := newTestHandler(t, &fakeEngine{}, Options{})
	w := do(t, solo, "GET", "/readyz?role=leader", "")
	if r := decodeReadiness(t, w); w.Code != 200 || r.Role != broker.RoleLeader {
		t.Fatalf("a node on its own: %d %+v", w.Code, r)
	}
	if w := do(t, solo, "GET", "/readyz?role=follower", ""); w.Code != 503 {
		t.Fatalf("a node on its own, asked for a follower: %d", w.Code)
	}
}
