package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/internal/clock"
)

// fakeStream is a delivery.Stream fed by the test through events.
type fakeStream struct {
	events    chan herald.Event
	done      chan struct{}
	closeOnce sync.Once
	closed    chan struct{} // closed by Close
	notify    atomic.Pointer[func()]
}

func (s *fakeStream) SetNotify(fn func()) { s.notify.Store(&fn) }

// send puts ev in the stream's channel and calls the transport's notify callback, as a
// watch service's stream does.
func (s *fakeStream) send(ev herald.Event) {
	s.events <- ev
	if fn := s.notify.Load(); fn != nil {
		(*fn)()
	}
}

func newFakeStream() *fakeStream {
	return &fakeStream{events: make(chan herald.Event, 16), done: make(chan struct{}), closed: make(chan struct{})}
}

func (s *fakeStream) ID() string                  { return "st1" }
func (s *fakeStream) Events() <-chan herald.Event { return s.events }
func (s *fakeStream) Done() <-chan struct{}       { return s.done }
func (s *fakeStream) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		close(s.done)
	})
}

// fakeDelivery answers Consume with its stream or error and records the call.
type fakeDelivery struct {
	mu      sync.Mutex
	stream  *fakeStream
	err     error
	session string
	query   string
	params  map[string]herald.Value
	settled []broker.Settle
}

func (f *fakeDelivery) Consume(ctx context.Context, sessionID, query string, params map[string]herald.Value) (herald.Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.session, f.query, f.params = sessionID, query, params
	if f.err != nil {
		return nil, f.err
	}
	return f.stream, nil
}

// SettleMany records the batch; ids starting with "bad" are unknown, an extension ends
// at epoch + by.
func (f *fakeDelivery) SettleMany(ctx context.Context, items []broker.Settle) ([]broker.SettleResult, uint64, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settled = append(f.settled, items...)
	out := make([]broker.SettleResult, len(items))
	for i, it := range items {
		if strings.HasPrefix(it.DeliveryID, "bad") {
			out[i].Err = herald.Errorf(herald.CodeInvalidDeliveryID, "delivery %q is unknown", it.DeliveryID)
		} else if it.Action == broker.ActExtend {
			out[i].Deadline = epoch.Add(it.By)
		}
	}
	return out, 42, 40
}

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

const consumeQuery = `WATCH j: Job WHERE j.status = "pending" [mode: consume] RETURN j`

func watchURL(base, query, params, session string) string {
	v := url.Values{"query": {query}}
	if params != "" {
		v.Set("params", params)
	}
	if session != "" {
		v.Set("session", session)
	}
	return base + "/v1/watch?" + v.Encode()
}

// openWatch starts a watch stream and returns a line reader over its body.
func openWatch(t *testing.T, ctx context.Context, u string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the stream: %v (got %q)", err, line)
	}
	return strings.TrimSuffix(line, "\n")
}

// readEvent reads one SSE block: the lines up to the blank line that ends it.
func readEvent(t *testing.T, r *bufio.Reader) []string {
	t.Helper()
	var lines []string
	for {
		l := readLine(t, r)
		if l == "" {
			return lines
		}
		lines = append(lines, l)
	}
}

func TestWatchStreamsEvents(t *testing.T) {
	st := newFakeStream()
	del := &fakeDelivery{stream: st}
	h := newTestHandler(t, &fakeEngine{}, Options{Clock: clock.NewManual(epoch)}, del)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	resp, r := openWatch(t, context.Background(), watchURL(srv.URL, consumeQuery, `{"n": 3, "s": "x"}`, "sess1"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	del.mu.Lock()
	if del.query != consumeQuery || del.session != "sess1" || del.params["n"].AsInt() != 3 || del.params["s"].AsString() != "x" {
		t.Fatalf("Consume got session=%q query=%q params=%v", del.session, del.query, del.params)
	}
	del.mu.Unlock()

	match := herald.Map([]string{"id", "_type", "status"}, []herald.Value{herald.String("j1"), herald.String("Job"), herald.String("pending")})
	st.events <- herald.Event{Type: herald.EventConsumed, Match: match, DeliveryID: "d1", Attempt: 1, Seq: 5, Tick: 4}
	got := readEvent(t, r)
	want := []string{
		"event: consumed",
		`data: {"type":"consumed","match":{"id":"j1","_type":"Job","status":"pending"},"delivery_id":"d1","attempt":1,"seq":5,"tick":4}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	st.events <- herald.Event{Type: herald.EventTimeout, DeliveryID: "d1", Attempt: 1, Seq: 6, Tick: 5,
		Error: herald.Errorf(herald.CodeAckTimeout, "lease expired")}
	got = readEvent(t, r)
	want = []string{
		"event: timeout",
		`data: {"type":"timeout","delivery_id":"d1","attempt":1,"seq":6,"tick":5,"code":"E8003","message":"lease expired"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestWatchPings(t *testing.T) {
	st := newFakeStream()
	clk := clock.NewManual(epoch)
	h := newTestHandler(t, &fakeEngine{}, Options{Clock: clk}, &fakeDelivery{stream: st})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	_, r := openWatch(t, context.Background(), watchURL(srv.URL, consumeQuery, "", ""))
	// The timer is armed before the headers are sent, and re-armed before each ping.
	for i := 0; i < 2; i++ {
		clk.Advance(DefaultPingInterval)
		if got := readEvent(t, r); len(got) != 1 || got[0] != ": ping" {
			t.Fatalf("ping %d: got %q", i, got)
		}
	}
}

func TestWatchClientDisconnectClosesStream(t *testing.T) {
	st := newFakeStream()
	h := newTestHandler(t, &fakeEngine{}, Options{Clock: clock.NewManual(epoch)}, &fakeDelivery{stream: st})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithCancel(context.Background())
	resp, _ := openWatch(t, ctx, watchURL(srv.URL, consumeQuery, "", ""))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	cancel()
	<-st.closed // the handler saw the disconnect and released the stream
}

func TestWatchCloseStreams(t *testing.T) {
	st := newFakeStream()
	h := newTestHandler(t, &fakeEngine{}, Options{Clock: clock.NewManual(epoch)}, &fakeDelivery{stream: st})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	_, r := openWatch(t, context.Background(), watchURL(srv.URL, consumeQuery, "", ""))
	h.CloseStreams()
	<-st.closed
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("stream still open after CloseStreams")
	}
}

func TestWatchStreamEndsWithErrorEvent(t *testing.T) {
	st := newFakeStream()
	h := newTestHandler(t, &fakeEngine{}, Options{Clock: clock.NewManual(epoch)}, &fakeDelivery{stream: st})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	_, r := openWatch(t, context.Background(), watchURL(srv.URL, consumeQuery, "", ""))
	st.events <- herald.Event{Type: herald.EventError, Seq: 9, Tick: 9, Error: herald.Errorf(herald.CodeShuttingDown, "stopping")}
	got := readEvent(t, r)
	want := `data: {"type":"error","seq":9,"tick":9,"code":"E5003","message":"stopping"}`
	if len(got) != 2 || got[0] != "event: error" || got[1] != want {
		t.Fatalf("got %q", got)
	}
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("stream still open after an error event")
	}
	<-st.closed
}

func TestWatchDrainsBufferedEventsWhenStreamEnds(t *testing.T) {
	st := newFakeStream()
	h := newTestHandler(t, &fakeEngine{}, Options{Clock: clock.NewManual(epoch)}, &fakeDelivery{stream: st})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	_, r := openWatch(t, context.Background(), watchURL(srv.URL, consumeQuery, "", ""))
	st.events <- herald.Event{Type: herald.EventConsumed, Match: herald.Int(1), DeliveryID: "d1", Attempt: 1, Seq: 1, Tick: 1}
	st.events <- herald.Event{Type: herald.EventConsumed, Match: herald.Int(2), DeliveryID: "d2", Attempt: 1, Seq: 2, Tick: 2}
	st.Close()
	for _, id := range []string{"d1", "d2"} {
		got := readEvent(t, r)
		var ev map[string]any
		if len(got) != 2 || json.Unmarshal([]byte(strings.TrimPrefix(got[1], "data: ")), &ev) != nil || ev["delivery_id"] != id {
			t.Fatalf("want %s, got %q", id, got)
		}
	}
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("stream still open after it ended")
	}
}

func TestWatchErrorsBeforeTheStream(t *testing.T) {
	cases := []struct {
		name   string
		del    *fakeDelivery
		target string
		status int
		code   herald.Code
	}{
		{"empty query", &fakeDelivery{}, "/v1/watch", 400, herald.CodeEmptyQuery},
		{"bad params", &fakeDelivery{}, "/v1/watch?query=WATCH&params=%5B1%5D", 400, herald.CodeMalformedRequest},
		{"bad bytes param", &fakeDelivery{}, "/v1/watch?query=WATCH&params=" + url.QueryEscape(`{"a":{"$bytes":1}}`), 400, herald.CodeMalformedRequest},
		{"consume fails", &fakeDelivery{err: herald.Errorf(herald.CodeSyntax, "expected WATCH").At(1, 1)}, "/v1/watch?query=MATCH", 400, herald.CodeSyntax},
		{"not consume mode", &fakeDelivery{err: herald.Errorf(herald.CodeInvalidQuery, "not a consume watch")}, "/v1/watch?query=x", 400, herald.CodeInvalidQuery},
		{"no delivery", nil, "/v1/watch?query=x", 501, herald.CodeNotImplemented},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newTestHandler(t, &fakeEngine{}, Options{}, c.del)
			rec := do(t, h, http.MethodGet, c.target, "")
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.status, rec.Body)
			}
			var body ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body.Error.Code != c.code {
				t.Fatalf("code %s, want %s", body.Error.Code, c.code)
			}
		})
	}
	h := newTestHandler(t, &fakeEngine{}, Options{}, &fakeDelivery{})
	if rec := do(t, h, http.MethodPost, "/v1/watch?query=x", ""); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: status %d", rec.Code)
	}
}
