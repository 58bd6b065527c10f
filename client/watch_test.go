package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// sseFake serves /healthz and GET /v1/watch. Each watch request is handed to the test
// as an sseConn; the test writes raw SSE text to it, and closing its out channel drops
// the connection. refuse answers the next requests with an error status instead.
type sseFake struct {
	srv    *httptest.Server
	conns  chan *sseConn
	refuse chan refusal
}

type refusal struct {
	status int
	body   string
}

type sseConn struct {
	query, params, session, lastEventID string
	out                                 chan string   // SSE text to write; close to drop
	gone                                chan struct{} // closed when the handler returned
}

func newSSEFake(t *testing.T) *sseFake {
	f := &sseFake{conns: make(chan *sseConn, 16), refuse: make(chan refusal, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"status":"ok"}`) })
	mux.HandleFunc("GET /v1/watch", func(w http.ResponseWriter, r *http.Request) {
		select {
		case rf := <-f.refuse:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rf.status)
			io.WriteString(w, rf.body)
			return
		default:
		}
		q := r.URL.Query()
		c := &sseConn{query: q.Get("query"), params: q.Get("params"), session: q.Get("session"),
			lastEventID: r.Header.Get("Last-Event-ID"), out: make(chan string, 64), gone: make(chan struct{})}
		defer close(c.gone)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		f.conns <- c
		for {
			select {
			case <-r.Context().Done():
				return
			case s, ok := <-c.out:
				if !ok {
					return
				}
				if _, err := io.WriteString(w, s); err != nil {
					return
				}
				_ = rc.Flush()
			}
		}
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *sseFake) dial(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), f.srv.URL, client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (f *sseFake) next(t *testing.T) *sseConn {
	t.Helper()
	select {
	case c := <-f.conns:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no watch connection")
		return nil
	}
}

// send writes one event the way the server does: id, event and data lines.
func (c *sseConn) send(seq uint64, data string) {
	var typ struct{ Type string }
	_ = json.Unmarshal([]byte(data), &typ)
	c.out <- fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", seq, typ.Type, data)
}

func nextEvent(t *testing.T, w *client.Watch) client.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ev
}

const taskWatch = `WATCH t: Task WHERE t.status = $s [delivery: reliable] RETURN t`

func TestWatchDecodesEvents(t *testing.T) {
	f := newSSEFake(t)
	c := f.dial(t)
	w, err := c.Watch(context.Background(), taskWatch, client.WithParams(map[string]any{"s": "done"}), client.WithSession("s1"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	conn := f.next(t)
	if conn.query != taskWatch || conn.params != `{"s":"done"}` || conn.session != "s1" || conn.lastEventID != "" {
		t.Fatalf("request: %+v", conn)
	}
	conn.out <- ": ping\n\n"
	conn.send(3, `{"type":"initial","match":{"id":"t1","_type":"Task","n":1,"x":1.5},"seq":3,"tick":3}`)
	conn.send(4, `{"type":"changed","match":{"id":"t1","n":2},"prev":{"id":"t1","n":1},"seq":4,"tick":4}`)
	conn.send(9, `{"type":"gap","count":5,"seq":9,"tick":9}`)
	conn.send(9, `{"type":"reset","code":"E6001","message":"too old","seq":9,"tick":9}`)
	conn.send(10, `{"type":"heartbeat","seq":10,"tick":12}`)
	conn.send(11, `{"type":"added","match":7,"seq":11,"tick":13}`)

	if w.Position() != 0 {
		t.Fatalf("position before any event: %d", w.Position())
	}
	ev := nextEvent(t, w)
	if ev.Type != herald.EventInitial || ev.Seq != 3 || ev.Tick != 3 || ev.Match["id"] != "t1" || ev.Match["n"] != int64(1) || ev.Match["x"] != 1.5 || ev.Prev != nil {
		t.Fatalf("initial: %+v", ev)
	}
	if w.Position() != 3 {
		t.Fatalf("position %d, want 3", w.Position())
	}
	if ev = nextEvent(t, w); ev.Type != herald.EventChanged || ev.Match["n"] != int64(2) || ev.Prev["n"] != int64(1) {
		t.Fatalf("changed: %+v", ev)
	}
	if ev = nextEvent(t, w); ev.Type != herald.EventGap || ev.Count != 5 || ev.Seq != 9 {
		t.Fatalf("gap: %+v", ev)
	}
	if ev = nextEvent(t, w); ev.Type != herald.EventReset || ev.Code != herald.CodeCompacted || ev.Message != "too old" {
		t.Fatalf("reset: %+v", ev)
	}
	if ev = nextEvent(t, w); ev.Type != herald.EventHeartbeat || ev.Seq != 10 || ev.Tick != 12 {
		t.Fatalf("heartbeat: %+v", ev)
	}
	if ev = nextEvent(t, w); ev.Type != herald.EventAdded || ev.Match["value"] != int64(7) {
		t.Fatalf("added with a scalar match: %+v", ev)
	}
	if w.Position() != 11 {
		t.Fatalf("position %d, want 11", w.Position())
	}
}

// A dropped connection is reopened with Last-Event-ID set to the last position, and the
// stream goes on where it was.
func TestWatchReconnectsAfterADrop(t *testing.T) {
	f := newSSEFake(t)
	c := f.dial(t)
	w, err := c.Watch(context.Background(), taskWatch, client.ResumeAfter(2), client.WithSession("s1"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	conn := f.next(t)
	if conn.lastEventID != "2" || w.Position() != 2 {
		t.Fatalf("ResumeAfter(2): Last-Event-ID %q, position %d", conn.lastEventID, w.Position())
	}
	conn.send(5, `{"type":"added","match":{"id":"a"},"seq":5,"tick":5}`)
	conn.send(6, `{"type":"removed","match":{"id":"b"},"seq":6,"tick":6}`)
	if ev := nextEvent(t, w); ev.Seq != 5 {
		t.Fatalf("%+v", ev)
	}
	if ev := nextEvent(t, w); ev.Seq != 6 {
		t.Fatalf("%+v", ev)
	}
	close(conn.out) // the connection drops

	conn2 := f.next(t)
	if conn2.lastEventID != "6" || conn2.session != "s1" || conn2.query != taskWatch {
		t.Fatalf("reconnect: %+v", conn2)
	}
	conn2.send(7, `{"type":"added","match":{"id":"c"},"seq":7,"tick":7}`)
	if ev := nextEvent(t, w); ev.Seq != 7 || ev.Match["id"] != "c" {
		t.Fatalf("after reconnect: %+v", ev)
	}

	// The server is briefly unavailable: the watch tries again.
	f.refuse <- refusal{503, `{"error":{"code":"E5003","name":"SHUTTING_DOWN","message":"stopping"}}`}
	close(conn2.out)
	conn3 := f.next(t)
	if conn3.lastEventID != "7" {
		t.Fatalf("second reconnect: Last-Event-ID %q", conn3.lastEventID)
	}
	conn3.send(8, `{"type":"added","match":{"id":"d"},"seq":8,"tick":8}`)
	if ev := nextEvent(t, w); ev.Seq != 8 {
		t.Fatalf("after the second reconnect: %+v", ev)
	}

	// An error the server means (not a passing one) ends the watch.
	f.refuse <- refusal{400, `{"error":{"code":"E4006","name":"NOT_IMPLEMENTED","message":"no resume for joins"}}`}
	close(conn3.out)
	_, err = w.Next(context.Background())
	if herald.CodeOf(err) != herald.CodeNotImplemented {
		t.Fatalf("refused reconnect: %v", err)
	}
}

func TestWatchWithoutReconnect(t *testing.T) {
	f := newSSEFake(t)
	c := f.dial(t)
	w, err := c.Watch(context.Background(), taskWatch, client.WithReconnect(0))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	conn := f.next(t)
	conn.send(1, `{"type":"initial","match":{"id":"a"},"seq":1,"tick":1}`)
	close(conn.out)
	if ev := nextEvent(t, w); ev.Seq != 1 {
		t.Fatalf("%+v", ev)
	}
	_, err = w.Next(context.Background())
	if err == nil || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "connection lost") {
		t.Fatalf("drop without reconnect: %v", err)
	}
	select {
	case c := <-f.conns:
		t.Fatalf("reconnected: %+v", c)
	default:
	}
}

func TestWatchErrorEventEndsTheWatch(t *testing.T) {
	f := newSSEFake(t)
	c := f.dial(t)
	w, err := c.Watch(context.Background(), taskWatch)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	conn := f.next(t)
	conn.send(1, `{"type":"added","match":{"id":"a"},"seq":1,"tick":1}`)
	conn.out <- "event: error\ndata: {\"type\":\"error\",\"code\":\"E8005\",\"message\":\"buffer full\",\"seq\":1,\"tick\":1}\n\n"
	if ev := nextEvent(t, w); ev.Seq != 1 {
		t.Fatalf("%+v", ev)
	}
	for range 2 { // the error stays
		_, err := w.Next(context.Background())
		var he *herald.Error
		if !errors.As(err, &he) || he.Code != "E8005" || he.Message != "buffer full" {
			t.Fatalf("error event: %v", err)
		}
	}
	<-w.Done()
	select {
	case c := <-f.conns:
		t.Fatalf("reconnected after an error event: %+v", c)
	default:
	}
}

func TestWatchClose(t *testing.T) {
	f := newSSEFake(t)
	c := f.dial(t)
	w, err := c.Watch(context.Background(), taskWatch)
	if err != nil {
		t.Fatal(err)
	}
	conn := f.next(t)
	got := make(chan error, 1)
	go func() {
		_, err := w.Next(context.Background())
		got <- err
	}()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, io.EOF) {
		t.Fatalf("Next during Close: %v", err)
	}
	if _, err := w.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after Close: %v", err)
	}
	_ = w.Close() // idempotent
	select {
	case <-conn.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the server still holds the connection")
	}
	select {
	case c := <-f.conns:
		t.Fatalf("reconnected after Close: %+v", c)
	default:
	}

	// Next's own context bounds only that call.
	w2, err := c.Watch(context.Background(), taskWatch)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	f.next(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w2.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: %v", err)
	}
}

func TestWatchAll(t *testing.T) {
	f := newSSEFake(t)
	c := f.dial(t)
	w, err := c.Watch(context.Background(), taskWatch)
	if err != nil {
		t.Fatal(err)
	}
	conn := f.next(t)
	for i := uint64(1); i <= 3; i++ {
		conn.send(i, fmt.Sprintf(`{"type":"added","match":{"id":"t%d"},"seq":%d,"tick":%d}`, i, i, i))
	}
	var seqs []uint64
	var last error
	for ev, err := range w.All(context.Background()) {
		if err != nil {
			last = err
			continue // the error is the last pair
		}
		seqs = append(seqs, ev.Seq)
		if len(seqs) == 3 {
			conn.out <- "event: error\ndata: {\"type\":\"error\",\"code\":\"E8005\",\"message\":\"full\"}\n\n"
		}
	}
	if fmt.Sprint(seqs) != "[1 2 3]" || herald.CodeOf(last) != "E8005" {
		t.Fatalf("All: %v, then %v", seqs, last)
	}

	// After Close, All just stops.
	w2, err := c.Watch(context.Background(), taskWatch)
	if err != nil {
		t.Fatal(err)
	}
	f.next(t)
	w2.Close()
	for ev, err := range w2.All(context.Background()) {
		t.Fatalf("All after Close yielded %+v, %v", ev, err)
	}
}

func TestWatchRefusals(t *testing.T) {
	f := newSSEFake(t)
	c := f.dial(t)
	ctx := context.Background()
	if _, err := c.Watch(ctx, `WATCH j: Job [mode: consume] RETURN j`); err == nil || !strings.Contains(err.Error(), "Subscribe") {
		t.Fatalf("consume statement: %v", err)
	}
	if _, err := c.Watch(ctx, `MATCH j: Job RETURN j`); err == nil {
		t.Fatal("a MATCH statement was accepted")
	}
	if _, err := c.Watch(ctx, taskWatch, client.WithPolicy(client.Manual)); err == nil {
		t.Fatal("a Subscribe option was accepted")
	}
	if _, err := c.Watch(ctx, taskWatch, client.WithReconnect(-1)); err == nil {
		t.Fatal("a negative reconnect was accepted")
	}
	f.refuse <- refusal{400, `{"error":{"code":"E1001","name":"SYNTAX_ERROR","message":"bad","line":1,"column":3}}`}
	_, err := c.Watch(ctx, taskWatch)
	var he *herald.Error
	if !errors.As(err, &he) || he.Code != "E1001" || he.Line != 1 {
		t.Fatalf("refused statement: %v", err)
	}
}

// The real server: initial, added, changed (with prev) and removed, then a resume from
// a position.
func TestWatchAgainstServer(t *testing.T) {
	srv := heraldtest.NewServer(t)
	srv.Exec(`SPAWN #t1: Task { status = "done", title = "a" }; SPAWN #t2: Task { status = "todo", title = "b" }`, nil)
	c := srv.Client()
	ctx := context.Background()
	w, err := c.Watch(ctx, taskWatch, client.WithParams(map[string]any{"s": "done"}))
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Close()
	if ev := nextEvent(t, w); ev.Type != herald.EventInitial || ev.Match["id"] != "t1" {
		t.Fatalf("initial: %+v", ev)
	}
	srv.Exec(`MATCH t: Task WHERE t.id = "t2" SET t.status = "done"`, nil)
	if ev := nextEvent(t, w); ev.Type != herald.EventAdded || ev.Match["id"] != "t2" {
		t.Fatalf("added: %+v", ev)
	}
	srv.Exec(`MATCH t: Task WHERE t.id = "t1" SET t.title = "z"`, nil)
	ev := nextEvent(t, w)
	if ev.Type != herald.EventChanged || ev.Match["title"] != "z" || ev.Prev["title"] != "a" {
		t.Fatalf("changed: %+v", ev)
	}
	if w.Position() != ev.Seq {
		t.Fatalf("position %d, want %d", w.Position(), ev.Seq)
	}
	srv.Exec(`KILL #t2`, nil)
	if ev := nextEvent(t, w); ev.Type != herald.EventRemoved || ev.Match["id"] != "t2" {
		t.Fatalf("removed: %+v", ev)
	}
	pos := w.Position()
	w.Close()

	// What happens while nobody watches arrives on resume, and nothing before it.
	srv.Exec(`MATCH t: Task WHERE t.id = "t1" SET t.status = "todo"`, nil)
	srv.Exec(`SPAWN #t3: Task { status = "done", title = "c" }`, nil)
	w2, err := c.Watch(ctx, taskWatch, client.WithParams(map[string]any{"s": "done"}), client.ResumeAfter(pos))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if ev := nextEvent(t, w2); ev.Type != herald.EventRemoved || ev.Match["id"] != "t1" || ev.Seq <= pos {
		t.Fatalf("resumed: %+v", ev)
	}
	if ev := nextEvent(t, w2); ev.Type != herald.EventAdded || ev.Match["id"] != "t3" {
		t.Fatalf("resumed: %+v", ev)
	}
}
