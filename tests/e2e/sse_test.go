package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// eventWait bounds every wait for a stream event in the consume tests. The server is
// expected to answer in milliseconds; the bound only keeps a broken server from hanging
// the test.
const eventWait = 30 * time.Second

// streamClient opens watch streams: no overall timeout, since a stream lives as long
// as its connection.
var streamClient = &http.Client{}

// event is one server-sent event of a consume stream.
type event struct {
	Type       string          `json:"type"`
	Match      json.RawMessage `json:"match"`
	DeliveryID string          `json:"delivery_id"`
	Attempt    int             `json:"attempt"`
	Releases   int             `json:"releases"`
	Seq        uint64          `json:"seq"`
	Tick       uint64          `json:"tick"`
	Deadline   string          `json:"deadline"`
	Code       string          `json:"code"`
	Message    string          `json:"message"`

	name string // the SSE "event:" field
}

// subject is the match of a "RETURN j" watch: the node's id, type and attributes.
func (e event) subject() (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(e.Match, &m); err != nil {
		return nil, fmt.Errorf("match %s: %v", e.Match, err)
	}
	return m, nil
}

// subjectID is the id of the match's node ("" when the match has none).
func (e event) subjectID() string {
	m, err := e.subject()
	if err != nil {
		return ""
	}
	id, _ := m["id"].(string)
	return id
}

// sseStream is one open GET /v1/watch stream. Events arrive on Events; the channel is
// closed when the stream ends, and Err then says why.
type sseStream struct {
	Events <-chan event
	cancel context.CancelFunc
	done   chan struct{}
	err    error // valid once done is closed
}

// openStream starts a consume watch and returns once the server has answered 200, that
// is, once the watch is registered. A non-200 answer is returned as an error holding
// the status and body.
func openStream(ctx context.Context, base, statement string) (*sseStream, error) {
	return openStreamIn(ctx, base, "", statement)
}

// watchURL is the GET /v1/watch address of statement, in a server session when session
// is not empty.
func watchURL(base, session, statement string) string {
	u := base + "/v1/watch?query=" + url.QueryEscape(statement)
	if session != "" {
		u += "&session=" + url.QueryEscape(session)
	}
	return u
}

// openStreamIn is openStream in a server session (`#self` is the session's actor).
func openStreamIn(ctx context.Context, base, session, statement string) (*sseStream, error) {
	return openStreamURL(ctx, watchURL(base, session, statement))
}

// openStreamURL opens the watch stream at u (GET /v1/watch with its parameters).
func openStreamURL(ctx context.Context, u string) (*sseStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := streamClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		cancel()
		return nil, &statusError{Status: resp.StatusCode, Body: string(b)}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("watch stream: Content-Type %q", ct)
	}
	ch := make(chan event)
	s := &sseStream{Events: ch, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(ch)
		defer resp.Body.Close()
		s.err = readEvents(ctx, resp.Body, ch)
	}()
	return s, nil
}

// statusError is a non-200 answer to a watch request.
type statusError struct {
	Status int
	Body   string
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d: %s", e.Status, e.Body) }

// readEvents parses the SSE framing (event: line, data: line, blank line; comments
// start with ':') until the body ends or ctx is done.
func readEvents(ctx context.Context, body io.Reader, ch chan<- event) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var name, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data == "" {
				name = ""
				continue
			}
			var ev event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return fmt.Errorf("event %q: %v", data, err)
			}
			ev.name = name
			name, data = "", ""
			select {
			case ch <- ev:
			case <-ctx.Done():
				return ctx.Err()
			}
		case strings.HasPrefix(line, ":"):
			// a comment (": ping")
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// Close closes the connection (which releases the stream's leases on the server) and
// waits for the reader to stop.
func (s *sseStream) Close() {
	s.cancel()
	<-s.done
}

// Err reports why the stream ended; nil while it is open.
func (s *sseStream) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// mustOpen opens a stream or fails the test; the stream is closed at cleanup.
func mustOpen(t *testing.T, base, statement string) *sseStream {
	t.Helper()
	s, err := openStream(context.Background(), base, statement)
	if err != nil {
		t.Fatalf("open watch %s: %v", statement, err)
	}
	t.Cleanup(s.Close)
	return s
}

// next returns the stream's next event, failing the test if none comes within
// eventWait or the stream ends.
func (s *sseStream) next(t *testing.T) event {
	t.Helper()
	select {
	case ev, ok := <-s.Events:
		if !ok {
			t.Fatalf("the watch stream ended: %v", s.Err())
		}
		return ev
	case <-time.After(eventWait):
		t.Fatalf("no event within %v", eventWait)
	}
	panic("unreachable")
}

// nextConsumed returns the next consumed event, failing on any other kind.
func (s *sseStream) nextConsumed(t *testing.T) event {
	t.Helper()
	ev := s.next(t)
	if ev.Type != "consumed" || ev.name != "consumed" {
		t.Fatalf("got %s event (SSE name %q), want consumed: %+v", ev.Type, ev.name, ev)
	}
	if ev.DeliveryID == "" || ev.Attempt < 1 {
		t.Fatalf("consumed event without delivery id or attempt: %+v", ev)
	}
	return ev
}

// settle posts a settlement statement (ACK "id", NACK "id" [no_retry], …).
func settle(t *testing.T, base, verb, deliveryID, suffix string) *response {
	t.Helper()
	q := fmt.Sprintf("%s %q%s", verb, deliveryID, suffix)
	r, err := query(base, q, nil)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return r
}

// mustSettle settles and fails the test unless the server answered 200.
func mustSettle(t *testing.T, base, verb, deliveryID, suffix string) {
	t.Helper()
	if r := settle(t, base, verb, deliveryID, suffix); r.Status != 200 {
		t.Fatalf("%s %s%s: status %d, error %+v", verb, deliveryID, suffix, r.Status, r.Error)
	}
}

// wantInvalidDelivery settles and fails the test unless the server answered E8004 with
// HTTP 404.
func wantInvalidDelivery(t *testing.T, base, verb, deliveryID, suffix string) {
	t.Helper()
	r := settle(t, base, verb, deliveryID, suffix)
	if r.Status != http.StatusNotFound || r.Error == nil || r.Error.Code != "E8004" || r.Error.Name != "INVALID_DELIVERY_ID" {
		t.Fatalf("%s %s%s: status %d, error %+v; want 404 E8004 INVALID_DELIVERY_ID", verb, deliveryID, suffix, r.Status, r.Error)
	}
}

// strings1 returns the first column of the first result's rows as strings.
func strings1(t *testing.T, r *response) []string {
	t.Helper()
	var out []string
	for _, row := range r.Results[0].Rows {
		var s string
		if err := json.Unmarshal(row[0], &s); err != nil {
			t.Fatalf("row %s: %v", row[0], err)
		}
		out = append(out, s)
	}
	return out
}

// ids returns the ids of the nodes of type typ.
func ids(t *testing.T, base, typ string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, id := range strings1(t, mustQuery(t, base, fmt.Sprintf("MATCH n: %s RETURN n.id", typ))) {
		out[id] = true
	}
	return out
}

// eventually polls cond every 20 ms until it holds, failing the test after eventWait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, eventWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
