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

	"github.com/herald-mq/herald/heraldtest"
)

// sseScript is a broker that answers every watch with the same events, the last of
// which is an error event, and records the requests.
type sseScript struct {
	events []string // JSON payloads
	mu     sync.Mutex
	reqs   []*http.Request
}

func (s *sseScript) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz":
		io.WriteString(w, `{"status":"ok"}`)
	case "/v1/watch":
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range s.events {
			var head struct {
				Type string
				Seq  uint64
			}
			json.Unmarshal([]byte(ev), &head)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", head.Seq, head.Type, ev)
		}
	default:
		http.NotFound(w, r)
	}
}

var scriptedEvents = []string{
	`{"type":"initial","match":{"id":"t1","_type":"Task","title":"a"},"seq":3,"tick":3}`,
	`{"type":"changed","match":{"id":"t1","_type":"Task","title":"z"},"prev":{"id":"t1","_type":"Task","title":"a"},"seq":4,"tick":5}`,
	`{"type":"gap","count":2,"seq":6,"tick":7}`,
	`{"type":"error","code":"E8005","message":"the watch buffer is full","seq":6,"tick":7}`,
}

func TestWatchCommandLines(t *testing.T) {
	b := &sseScript{events: scriptedEvents}
	srv := httptest.NewServer(b)
	defer srv.Close()
	out, errOut, err := run(t, "", "watch", "--addr", strings.TrimPrefix(srv.URL, "http://"), "--after", "2", "--session", "s9",
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
	if r.Header.Get("Last-Event-ID") != "2" || r.URL.Query().Get("session") != "s9" || r.URL.Query().Get("params") != `{"s":"done"}` {
		t.Fatalf("request: %v %v", r.URL, r.Header)
	}
}

func TestWatchCommandJSON(t *testing.T) {
	srv := httptest.NewServer(&sseScript{events: scriptedEvents})
	defer srv.Close()
	out, _, err := run(t, "", "watch", "--json", "--addr", srv.URL, `WATCH t: Task RETURN t`)
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
		json.Unmarshal([]byte(scriptedEvents[i]), &want)
		// "last" marks the final event of a position (the one with an SSE id); the
		// scripted events do not spell it out.
		delete(got.(map[string]any), "last")
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("line %d: %s\nwant %s", i+1, line, scriptedEvents[i])
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
	srv := httptest.NewServer(&sseScript{})
	defer srv.Close()
	if _, errOut, err := run(t, "", "watch", "--addr", srv.URL, "WATCH j: Job [mode: consume] RETURN j"); ExitCode(err) != 1 || !strings.Contains(errOut, "Subscribe") {
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
