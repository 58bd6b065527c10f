package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/broker/brokertest"
	"github.com/herald-mq/herald/heraldtest"
	"github.com/herald-mq/herald/rpcapi"
)

// scriptWatcher answers every watch with the same events, the last of which is an
// error event, and records the requests. It sits behind the real RPC service, so the
// command talks to it as to a server.
type scriptWatcher struct {
	events []herald.Event
	mu     sync.Mutex
	reqs   []watchReq
}

type watchReq struct {
	session, query string
	params         map[string]herald.Value
	after          uint64
}

func (s *scriptWatcher) Open(ctx context.Context, req broker.StreamRequest) (broker.Stream, error) {
	if consumeMode(req.Query) {
		return nil, herald.Errorf(herald.CodeInvalidQuery, "a consume-mode WATCH is served by the Subscribe stream")
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, watchReq{req.SessionID, req.Query, req.Params, req.After})
	s.mu.Unlock()
	st := &scriptStream{events: make(chan herald.Event, len(s.events)), done: make(chan struct{})}
	for _, ev := range s.events {
		st.events <- ev
	}
	close(st.events)
	return st, nil
}

type scriptStream struct {
	events chan herald.Event
	done   chan struct{}
	once   sync.Once
}

func (s *scriptStream) ID() string                  { return "script" }
func (s *scriptStream) Events() <-chan herald.Event { return s.events }
func (s *scriptStream) Done() <-chan struct{}       { return s.done }
func (s *scriptStream) Close()                      { s.once.Do(func() { close(s.done) }) }
func (s *scriptStream) Mode() broker.Mode           { return broker.ModeWatch }
func (s *scriptStream) SetNotify(func())            {}
func (s *scriptStream) SetCredit(int) error         { return nil }
func (s *scriptStream) Take(dst []herald.Event, max int) ([]herald.Event, bool) {
	return broker.TakeReady(s.events, dst, max)
}

// serveScript serves the RPC service over a fake node whose streams w opens.
func serveScript(t *testing.T, w *scriptWatcher) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, `{"status":"ok"}`) })
	mux.Handle(rpcapi.New(&brokertest.Broker{OpenFunc: w.Open}, rpcapi.Options{}).Handler())
	srv := httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func node(title string) herald.Value {
	return herald.Map([]string{"id", "_type", "title"}, []herald.Value{herald.String("t1"), herald.String("Task"), herald.String(title)})
}

var scriptedEvents = []herald.Event{
	{Type: "initial", Match: node("a"), Seq: 3, Tick: 3, Last: true},
	{Type: "changed", Match: node("z"), Prev: node("a"), Seq: 4, Tick: 5, Last: true},
	{Type: "gap", Count: 2, Seq: 6, Tick: 7, Last: true},
	{Type: "error", Code: "E8005", Message: "the watch buffer is full", Seq: 6, Tick: 7},
}

var scriptedJSON = []string{
	`{"type":"initial","match":{"id":"t1","_type":"Task","title":"a"},"seq":3,"tick":3}`,
	`{"type":"changed","match":{"id":"t1","_type":"Task","title":"z"},"prev":{"id":"t1","_type":"Task","title":"a"},"seq":4,"tick":5}`,
	`{"type":"gap","count":2,"seq":6,"tick":7}`,
}

func TestWatchCommandLines(t *testing.T) {
	b := &scriptWatcher{events: scriptedEvents}
	url := serveScript(t, b)
	out, errOut, err := run(t, "", "watch", "--addr", strings.TrimPrefix(url, "http://"), "--after", "2", "--session", "s9",
		"--params", `{"s":"done"}`, `WATCH t: Task WHERE t.status = $s RETURN t`)
	want := `initial seq=3 tick=3 {"_type":"Task","id":"t1","title":"a"}
changed seq=4 tick=5 {"_type":"Task","id":"t1","title":"z"} prev={"_type":"Task","id":"t1","title":"a"}
gap seq=6 tick=7 count=2
`
	if out != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}
	if ExitCode(err) != 1 || !strings.Contains(errOut, "E8005") || !strings.Contains(errOut, "the watch buffer is full") {
		t.Fatalf("exit %d (%v), stderr %q", ExitCode(err), err, errOut)
	}
	if len(b.reqs) != 1 {
		t.Fatalf("%d watch requests; an error event must not reconnect", len(b.reqs))
	}
	r := b.reqs[0]
	if r.after != 2 || r.session != "s9" || len(r.params) != 1 || r.params["s"].AsString() != "done" {
		t.Fatalf("request: %+v", r)
	}
}

func TestWatchCommandJSON(t *testing.T) {
	url := serveScript(t, &scriptWatcher{events: scriptedEvents})
	out, _, err := run(t, "", "watch", "--json", "--addr", url, `WATCH t: Task RETURN t`)
	if ExitCode(err) != 1 {
		t.Fatalf("exit %d: %v", ExitCode(err), err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(scriptedEvents) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(scriptedEvents), out)
	}
	if last := lines[len(lines)-1]; last != `{"code":"E8005","message":"the watch buffer is full","type":"error"}` {
		t.Fatalf("error line %s", last)
	}
	for i, line := range lines[:len(lines)-1] {
		var got, want any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("line %d is not JSON: %q", i+1, line)
		}
		json.Unmarshal([]byte(scriptedJSON[i]), &want)
		// "last" marks the final event of a position (the one with an SSE id); the
		// scripted events do not spell it out.
		delete(got.(map[string]any), "last")
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("line %d: %s\nwant %s", i+1, line, scriptedJSON[i])
		}
	}
}

func TestWatchCommandUsage(t *testing.T) {
	if _, _, err := run(t, "", "watch"); ExitCode(err) != 2 {
		t.Fatalf("no statement: exit %d", ExitCode(err))
	}
	if _, _, err := run(t, "", "watch", "--params", "[1]", "WATCH t: Task RETURN t"); ExitCode(err) != 2 {
		t.Fatalf("bad --params: exit %d", ExitCode(err))
	}
	out, _, err := run(t, "", "watch", "--help")
	if err != nil || !strings.Contains(out, "herald watch --json") || !strings.Contains(out, "--after") {
		t.Fatalf("help: %v\n%s", err, out)
	}
	// A consume-mode statement is refused before it reaches the server, with the
	// command that serves it.
	if _, errOut, err := run(t, "", "watch", "--addr", "http://127.0.0.1:1", "WATCH j: Job [mode: consume] RETURN j"); ExitCode(err) != 2 || !strings.Contains(errOut, "herald consume") {
		t.Fatalf("consume statement: exit %d, %q", ExitCode(err), errOut)
	}
}

// lineWriter hands each complete line written to it to a channel.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line) // incomplete: keep it
			return len(p), nil
		}
		w.lines <- strings.TrimSuffix(line, "\n")
	}
}

// The real server: the command prints initial, added, changed and removed as they
// happen, and stops cleanly when interrupted.
func TestWatchCommandAgainstServer(t *testing.T) {
	srv := heraldtest.NewServer(t)
	srv.Exec(`SPAWN #t1: Task { status = "done", title = "a" }; SPAWN #t2: Task { status = "todo", title = "b" }`, nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout := &lineWriter{lines: make(chan string, 100)}
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"watch", "--addr", srv.URL(), `WATCH t: Task WHERE t.status = "done" [delivery: reliable] RETURN t.title`},
			strings.NewReader(""), stdout, &stderr)
	}()
	expect := func(prefix, rest string) string {
		t.Helper()
		select {
		case line := <-stdout.lines:
			if !strings.HasPrefix(line, prefix+" seq=") || !strings.HasSuffix(line, rest) {
				t.Fatalf("line %q, want %s … %s", line, prefix, rest)
			}
			return line
		case err := <-done:
			t.Fatalf("the command ended: %v; stderr %s", err, stderr.String())
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s line", prefix)
		}
		return ""
	}
	expect("initial", `{"t.title":"a"}`)
	srv.Exec(`MATCH t: Task WHERE t.id = "t2" SET t.status = "done"`, nil)
	expect("added", `{"t.title":"b"}`)
	srv.Exec(`MATCH t: Task WHERE t.id = "t1" SET t.title = "z"`, nil)
	expect("changed", `{"t.title":"z"} prev={"t.title":"a"}`)
	srv.Exec(`KILL #t2`, nil)
	line := expect("removed", `{"t.title":"b"}`)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("interrupted: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not stop when interrupted")
	}
	seq := strings.Fields(strings.TrimPrefix(line, "removed seq="))[0]
	if want := "stopped after seq " + seq + " (resume with --after " + seq + ")\n"; stderr.String() != want {
		t.Fatalf("stderr %q, want %q", stderr.String(), want)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
