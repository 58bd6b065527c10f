package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/server"
)

// fakeBroker answers the query API with canned JSON, opens and closes sessions as the
// RPC service does, and records what it was sent.
type fakeBroker struct {
	mu       sync.Mutex
	queries  []string
	sessions []string
	opened   int
	closed   []string
}

func (b *fakeBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case r.Method == "GET" && r.URL.Path == "/healthz":
		io.WriteString(w, `{"status":"ok"}`)
	case r.Method == "POST" && r.URL.Path == "/herald.v1.Herald/OpenSession":
		b.opened++
		writeProto(w, &heraldv1.OpenSessionResponse{Session: "sess-1"})
	case r.Method == "POST" && r.URL.Path == "/herald.v1.Herald/CloseSession":
		var req heraldv1.CloseSessionRequest
		body, _ := io.ReadAll(r.Body)
		_ = proto.Unmarshal(body, &req)
		b.closed = append(b.closed, req.GetSession())
		writeProto(w, &heraldv1.CloseSessionResponse{})
	case r.Method == "POST" && r.URL.Path == "/v1/query":
		var req struct{ Query, Session string }
		json.NewDecoder(r.Body).Decode(&req)
		b.queries = append(b.queries, req.Query)
		b.sessions = append(b.sessions, req.Session)
		if strings.Contains(req.Query, "BROKEN") {
			col := strings.Index(req.Query, "BROKEN") + 1
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"code":"E1001","name":"SYNTAX_ERROR","message":"unexpected BROKEN","line":1,"column":`+itoa(col)+`}}`)
			return
		}
		io.WriteString(w, `{"results":[{"columns":["n"],"rows":[[1]],"stats":{"rows_scanned":1}}],"seq":4,"tick":4}`)
	default:
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"code":"E4007","name":"NOT_FOUND","message":"no"}}`)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// writeProto answers a unary call of the Connect protocol with m.
func writeProto(w http.ResponseWriter, m proto.Message) {
	b, _ := proto.Marshal(m)
	w.Header().Set("Content-Type", "application/proto")
	w.Write(b)
}

// serveFake serves b over HTTP/1.1 and unencrypted HTTP/2, as a broker does.
func serveFake(t *testing.T, b http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(b)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func run(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = Run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), err
}

func TestQueryExecute(t *testing.T) {
	b := &fakeBroker{}
	srv := serveFake(t, b)
	out, errOut, err := run(t, "", "query", "--addr", srv.URL, "-e", "MATCH x: X RETURN 1")
	if err != nil {
		t.Fatalf("err %v, stderr %s", err, errOut)
	}
	want := " n\n---\n 1\n(1 row; rows scanned: 1)\nseq 4, tick 4\n"
	if out != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}
	if b.opened != 0 || b.sessions[0] != "" {
		t.Fatalf("-e used a session: opened %d, %v", b.opened, b.sessions)
	}
}

func TestQueryExecuteError(t *testing.T) {
	srv := serveFake(t, &fakeBroker{})
	out, errOut, err := run(t, "", "query", "--addr", srv.URL, "-e", "MATCH BROKEN")
	if ExitCode(err) != 1 {
		t.Fatalf("exit code %d (%v)", ExitCode(err), err)
	}
	want := "ERROR E1001 SYNTAX_ERROR at 1:7: unexpected BROKEN\n 1 | MATCH BROKEN\n   |       ^\n"
	if errOut != want || out != "" {
		t.Fatalf("stderr %q, stdout %q", errOut, out)
	}
}

func TestQueryJSON(t *testing.T) {
	srv := serveFake(t, &fakeBroker{})
	out, _, err := run(t, "", "query", "--addr", strings.TrimPrefix(srv.URL, "http://"), "--json", "-e", "RETURN 1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, `{"results":[`) || !strings.HasSuffix(out, "}\n") {
		t.Fatalf("stdout %q", out)
	}
	out, _, err = run(t, "", "query", "--addr", srv.URL, "--json", "-e", "BROKEN")
	if ExitCode(err) != 1 || !strings.HasPrefix(out, `{"error":{"code":"E1001"`) {
		t.Fatalf("json error: %q (%v)", out, err)
	}
}

func TestQueryScriptFromStdin(t *testing.T) {
	b := &fakeBroker{}
	srv := serveFake(t, b)
	script := "-- a comment\nBEGIN;\nSPAWN a: A {\n  n = \"x;y\"\n};\nCOMMIT;\nMATCH a: A RETURN a.n\n"
	out, errOut, err := run(t, script, "query", "--addr", srv.URL)
	if err != nil {
		t.Fatalf("err %v, stderr %s", err, errOut)
	}
	want := []string{"-- a comment\nBEGIN;\n", "SPAWN a: A {\n  n = \"x;y\"\n};\n", "COMMIT;\n", "MATCH a: A RETURN a.n\n"}
	if strings.Join(b.queries, "|") != strings.Join(want, "|") {
		t.Fatalf("queries %q, want %q", b.queries, want)
	}
	for _, s := range b.sessions {
		if s != "sess-1" {
			t.Fatalf("statement outside the session: %v", b.sessions)
		}
	}
	if b.opened != 1 || len(b.closed) != 1 || b.closed[0] != "sess-1" {
		t.Fatalf("session lifecycle: opened %d closed %v", b.opened, b.closed)
	}
	if strings.Count(out, "seq 4, tick 4") != 4 {
		t.Fatalf("stdout %q", out)
	}
}

func TestQueryScriptStopsAtError(t *testing.T) {
	b := &fakeBroker{}
	srv := serveFake(t, b)
	_, errOut, err := run(t, "RETURN 1;\nBROKEN;\nRETURN 2;\n", "query", "--addr", srv.URL)
	if ExitCode(err) != 1 || !strings.Contains(errOut, "E1001") {
		t.Fatalf("exit %d, stderr %q", ExitCode(err), errOut)
	}
	if len(b.queries) != 2 || len(b.closed) != 1 {
		t.Fatalf("queries %q closed %v", b.queries, b.closed)
	}
}

func TestQueryUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	_, errOut, err := run(t, "RETURN 1;", "query", "--addr", addr, "--timeout", "5s")
	if ExitCode(err) != 1 || !strings.Contains(errOut, "cannot open a session") {
		t.Fatalf("exit %d, stderr %q", ExitCode(err), errOut)
	}
}

func TestVersionText(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2025-01-01T00:00:00Z"},
	}}
	got := versionText("", bi, "go1.26.8", "linux/amd64")
	want := "herald v1.2.3\ncommit: abc123 (modified)\ncommit time: 2025-01-01T00:00:00Z\ngo: go1.26.8 linux/amd64\n"
	if got != want {
		t.Fatalf("got %q", got)
	}
	if got := versionText("v9", nil, "go1", "x/y"); got != "herald v9\ncommit: unknown\ngo: go1 x/y\n" {
		t.Fatalf("got %q", got)
	}
	out, _, err := run(t, "", "version")
	if err != nil || !strings.HasPrefix(out, "herald ") || !strings.Contains(out, "go: go") {
		t.Fatalf("version: %q %v", out, err)
	}
}

func TestParseTick(t *testing.T) {
	cases := []struct {
		in   string
		mode server.TickMode
		d    time.Duration
		ok   bool
	}{
		{"commit", server.TickCommit, 0, true},
		{"manual", server.TickManual, 0, true},
		{"interval:100ms", server.TickInterval, 100 * time.Millisecond, true},
		{"interval:0s", 0, 0, false},
		{"interval:soon", 0, 0, false},
		{"hourly", 0, 0, false},
	}
	for _, c := range cases {
		mode, d, err := parseTick(c.in)
		if (err == nil) != c.ok || (c.ok && (mode != c.mode || d != c.d)) {
			t.Errorf("parseTick(%q) = %v, %v, %v", c.in, mode, d, err)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--no-such-flag"},
		{"serve", "--tick", "hourly"},
		{"serve", "--log-format", "xml"},
		{"serve", "--log-level", "loud"},
		{"serve", "--max-body", "0"},
	} {
		_, errOut, err := run(t, "", args...)
		if ExitCode(err) != 2 || !strings.HasPrefix(errOut, "herald: ") {
			t.Errorf("%v: exit %d, stderr %q", args, ExitCode(err), errOut)
		}
	}
	if _, _, err := run(t, "", "nonsense"); ExitCode(err) == 0 {
		t.Error("unknown command succeeded")
	}
}

func TestHelp(t *testing.T) {
	for _, cmd := range []string{"serve", "query", "version"} {
		out, _, err := run(t, "", cmd, "--help")
		if err != nil || !strings.Contains(out, "Examples:") || !strings.Contains(out, "herald "+cmd) {
			t.Errorf("%s --help: %v\n%s", cmd, err, out)
		}
	}
	out, _, _ := run(t, "", "--help")
	for _, cmd := range []string{"serve", "query", "version"} {
		if !strings.Contains(out, cmd) {
			t.Errorf("root help lacks %s", cmd)
		}
	}
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	l, err := newLogger(&buf, "warn", "json")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("shown", "k", 1)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec["msg"] != "shown" {
		t.Fatalf("log %q (%v)", buf.String(), err)
	}
}

// herald serve keeps a bounded change log unless told otherwise: with the old default
// of 0 the log kept every change set the broker ever made.
func TestServeRetentionDefault(t *testing.T) {
	fl := newServeCmd().Flags().Lookup("retention")
	if fl == nil || fl.DefValue != "100000" {
		t.Fatalf("--retention default = %v, want 100000", fl)
	}
}
