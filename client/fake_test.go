package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
)

// fakeServer speaks the part of Herald's HTTP protocol the client uses: /healthz,
// POST /v1/query (settlements are recorded and checked for double settlement; other
// statements go to answer), the session endpoints, and GET /v1/watch as server-sent
// events fed by the test.
type fakeServer struct {
	t   testing.TB
	srv *httptest.Server

	stmts   chan string      // settlement statements and other queries, in arrival order
	streams chan *fakeStream // every watch stream opened

	mu       sync.Mutex
	settled  map[string]bool
	watchErr *herald.Error                                    // answer to GET /v1/watch instead of a stream
	answer   func(q string, params map[string]any) (int, any) // answer to other queries
	requests []queryRequest
	batches  []int         // sizes of the POST /v1/settle requests
	noSettle bool          // answer POST /v1/settle with 404, as a server from before it
	gate     chan struct{} // when set, POST /v1/settle waits until it is closed
}

type fakeStream struct {
	query  string
	params string
	events chan string   // JSON payloads; closing it ends the stream
	gone   chan struct{} // closed when the client has disconnected or the stream ended
}

var settleRE = regexp.MustCompile(`^(ACK|NACK|EXTEND) "([A-Za-z0-9_.~-]+)"(?: \[(.+)\])?$`)

func newFakeServer(t testing.TB) *fakeServer {
	f := &fakeServer{
		t:       t,
		stmts:   make(chan string, 1000),
		streams: make(chan *fakeStream, 100),
		settled: make(map[string]bool),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeFake(w, 200, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("POST /v1/query", f.query)
	mux.HandleFunc("POST /v1/settle", f.settle)
	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		writeFake(w, 200, map[string]string{"session": "s1"})
	})
	mux.HandleFunc("DELETE /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "s1" {
			writeFakeError(w, herald.Errorf(herald.CodeSession, "unknown session"))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/watch", f.watch)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) url() string { return f.srv.URL }

func (f *fakeServer) dial(t testing.TB) *Client {
	c, err := Dial(context.Background(), f.url(), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (f *fakeServer) query(w http.ResponseWriter, r *http.Request) {
	var req queryRequest
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		writeFakeError(w, herald.Errorf(herald.CodeMalformedRequest, "%v", err))
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	answer := f.answer
	f.mu.Unlock()
	if m := settleRE.FindStringSubmatch(req.Query); m != nil {
		if m[1] != "EXTEND" {
			f.mu.Lock()
			again := f.settled[m[2]]
			f.settled[m[2]] = true
			f.mu.Unlock()
			if again {
				writeFakeError(w, herald.Errorf(herald.CodeInvalidDeliveryID, "delivery %s is settled", m[2]))
				return
			}
		}
		f.stmts <- req.Query
		writeFake(w, 200, map[string]any{"results": []any{map[string]any{"columns": []string{}, "rows": []any{}, "stats": map[string]any{}}}, "seq": 1, "tick": 1})
		return
	}
	f.stmts <- req.Query
	if answer == nil {
		writeFake(w, 200, map[string]any{"results": []any{}, "seq": 1, "tick": 1})
		return
	}
	status, body := answer(req.Query, req.Params)
	if e, ok := body.(*herald.Error); ok {
		writeFakeError(w, e)
		return
	}
	writeFake(w, status, body)
}

// settle answers POST /v1/settle: each settlement is recorded as the statement it
// stands for (so tests check both ways of settling alike) and checked for double
// settlement.
func (f *fakeServer) settle(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	off, gate := f.noSettle, f.gate
	f.mu.Unlock()
	if off {
		http.NotFound(w, r)
		return
	}
	if gate != nil {
		<-gate
	}
	var req settleRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeFakeError(w, herald.Errorf(herald.CodeMalformedRequest, "%v", err))
		return
	}
	f.mu.Lock()
	f.batches = append(f.batches, len(req.Settlements))
	f.mu.Unlock()
	var results []map[string]any
	for _, it := range req.Settlements {
		id := fmt.Sprintf("%q", it.DeliveryID)
		var stmt string
		switch it.Action {
		case "ack":
			stmt = "ACK " + id
		case "reject":
			stmt = "NACK " + id + " [no_retry]"
		case "nack":
			stmt = "NACK " + id
			if it.Delay != "" {
				stmt += " [delay: " + it.Delay + "]"
			}
		case "extend":
			stmt = "EXTEND " + id
			if it.By != "" {
				stmt += " [by: " + it.By + "]"
			}
		default:
			writeFakeError(w, herald.Errorf(herald.CodeMalformedRequest, "action %q", it.Action))
			return
		}
		res := map[string]any{"delivery_id": it.DeliveryID, "ok": true}
		if it.Action != "extend" {
			f.mu.Lock()
			again := f.settled[it.DeliveryID]
			f.settled[it.DeliveryID] = true
			f.mu.Unlock()
			if again {
				res = map[string]any{"delivery_id": it.DeliveryID, "ok": false,
					"error": map[string]any{"code": "E8004", "name": "INVALID_DELIVERY_ID", "message": "delivery " + it.DeliveryID + " is settled"}}
				results = append(results, res)
				continue
			}
		}
		f.stmts <- stmt
		results = append(results, res)
	}
	writeFake(w, 200, map[string]any{"results": results, "seq": 1, "tick": 1})
}

func (f *fakeServer) watch(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	werr := f.watchErr
	f.mu.Unlock()
	if werr != nil {
		writeFakeError(w, werr)
		return
	}
	st := &fakeStream{
		query:  r.URL.Query().Get("query"),
		params: r.URL.Query().Get("params"),
		events: make(chan string, 100),
		gone:   make(chan struct{}),
	}
	defer close(st.gone)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	rc := http.NewResponseController(w)
	_, _ = io.WriteString(w, ": hello\n\n")
	_ = rc.Flush()
	f.streams <- st
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-st.events:
			if !ok {
				return
			}
			var head struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal([]byte(ev), &head)
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", head.Type, ev); err != nil {
				return
			}
			_ = rc.Flush()
		}
	}
}

func writeFake(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeFakeError(w http.ResponseWriter, e *herald.Error) {
	info := e.Code.Info()
	body := map[string]any{"code": e.Code, "name": info.Name, "message": e.Message}
	if e.Line > 0 {
		body["line"], body["column"] = e.Line, e.Column
	}
	writeFake(w, info.HTTP, map[string]any{"error": body})
}

// nextStream waits for the next watch stream the client opens.
func (f *fakeServer) nextStream(t testing.TB) *fakeStream {
	t.Helper()
	select {
	case st := <-f.streams:
		return st
	case <-time.After(10 * time.Second):
		t.Fatal("no watch stream opened")
		return nil
	}
}

// nextStmt waits for the next statement the server receives.
func (f *fakeServer) nextStmt(t testing.TB) string {
	t.Helper()
	select {
	case s := <-f.stmts:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no statement arrived")
		return ""
	}
}

// drainStmts returns the statements received so far without waiting.
func (f *fakeServer) drainStmts() []string {
	var out []string
	for {
		select {
		case s := <-f.stmts:
			out = append(out, s)
		default:
			return out
		}
	}
}

// consumed sends a delivery of {"n": n} with id and attempt.
func (st *fakeStream) consumed(id string, n, attempt int) {
	st.events <- fmt.Sprintf(`{"type":"consumed","match":{"n":%d},"delivery_id":%q,"attempt":%d,"seq":%d,"tick":%d,"deadline":"2030-01-02T03:04:05Z"}`, n, id, attempt, 10+n, 20+n)
}

func (st *fakeStream) timeout(id string) {
	st.events <- fmt.Sprintf(`{"type":"timeout","delivery_id":%q,"seq":0,"tick":0,"code":"E8003","message":"lease expired"}`, id)
}

// waitGone waits until the client has closed the stream.
func (st *fakeStream) waitGone(t testing.TB) {
	t.Helper()
	select {
	case <-st.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not close the stream")
	}
}

// recv waits for a value on ch.
func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting")
		var zero T
		return zero
	}
}
