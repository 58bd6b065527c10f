package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/herald-mq/herald"
)

// transport carries the client's requests to a server. The HTTP/JSON transport below is
// the one in use; a Connect transport can implement the same methods without touching
// the rest of the package.
type transport interface {
	health(ctx context.Context) error
	query(ctx context.Context, req queryRequest) (*Response, error)
	// settle posts a batch of settlements (POST /v1/settle).
	settle(ctx context.Context, req settleRequest, out *settleAnswer) error
	openSession(ctx context.Context) (string, error)
	closeSession(ctx context.Context, id string) error
	// watch starts a consume stream. It returns once the server has accepted the
	// statement, so errors in it are reported here.
	watch(ctx context.Context, statement string, params map[string]any) (eventStream, error)
	// openStream starts a stream for any WATCH statement, with a session and a resume
	// position. An answer other than 200 is a *statusError.
	openStream(ctx context.Context, r streamRequest) (eventStream, error)
	close()
}

// eventStream is one open watch stream.
type eventStream interface {
	// next blocks for the next event; it returns io.EOF when the server ended the stream.
	next() (event, error)
	// close ends the stream; next then returns an error.
	close()
}

// queryRequest is the body of POST /v1/query.
type queryRequest struct {
	Query   string         `json:"query"`
	Params  map[string]any `json:"params,omitempty"`
	Session string         `json:"session,omitempty"`
}

// streamRequest is what GET /v1/watch takes.
type streamRequest struct {
	statement string
	params    map[string]any
	session   string
	after     uint64 // > 0: resume after this position (sent as Last-Event-ID)
}

// statusError is a refused stream request: the HTTP status and the error of its body.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// event is one message of a watch stream, as the server sends it.
type event struct {
	Type       string          `json:"type"`
	Match      json.RawMessage `json:"match"`
	Prev       json.RawMessage `json:"prev"`
	Count      int             `json:"count"`
	DeliveryID string          `json:"delivery_id"`
	Attempt    int             `json:"attempt"`
	Seq        uint64          `json:"seq"`
	Tick       uint64          `json:"tick"`
	Deadline   string          `json:"deadline"`
	Code       herald.Code     `json:"code"`
	Message    string          `json:"message"`
	// ID is the SSE id line of the event: set on the last event of a watch-mode position.
	ID string `json:"-"`
}

// Event types of a consume stream.
const (
	eventConsumed = "consumed"
	eventTimeout  = "timeout"
	eventError    = "error"
)

// httpTransport speaks Herald's HTTP/JSON API: POST /v1/query, the session endpoints,
// and server-sent events from GET /v1/watch.
type httpTransport struct {
	base string
	hc   *http.Client
}

func (t *httpTransport) health(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return errorFromBody(resp)
	}
	return nil
}

func (t *httpTransport) query(ctx context.Context, q queryRequest) (*Response, error) {
	var out wireResponse
	if err := t.postJSON(ctx, "/v1/query", q, &out); err != nil {
		return nil, err
	}
	return out.decode(), nil
}

// errNoSettle says the server has no POST /v1/settle (it answered 404 or 405): it is
// older than batch settlement, and settlements go as statements instead.
var errNoSettle = errors.New("client: the server has no settlement endpoint")

func (t *httpTransport) settle(ctx context.Context, req settleRequest, out *settleAnswer) error {
	status, err := t.post(ctx, "/v1/settle", req, out)
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		return errNoSettle
	}
	return err
}

func (t *httpTransport) openSession(ctx context.Context) (string, error) {
	var out struct {
		Session string `json:"session"`
	}
	if err := t.postJSON(ctx, "/v1/sessions", struct{}{}, &out); err != nil {
		return "", err
	}
	if out.Session == "" {
		return "", errors.New("client: the server answered without a session id")
	}
	return out.Session, nil
}

func (t *httpTransport) closeSession(ctx context.Context, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, t.base+"/v1/sessions/"+url.PathEscape(id), nil)
	if err != nil {
		return err
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if resp.StatusCode/100 != 2 {
		return errorFromBody(resp)
	}
	return nil
}

func (t *httpTransport) postJSON(ctx context.Context, path string, in, out any) error {
	_, err := t.post(ctx, path, in, out)
	return err
}

// post posts in as JSON and decodes a 200 answer into out; it also returns the HTTP
// status (0 when no answer came).
func (t *httpTransport) post(ctx context.Context, path string, in, out any) (int, error) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(in); err != nil {
		return 0, fmt.Errorf("client: encoding the request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+path, &body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, errorFromBody(resp)
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("client: decoding the answer: %w", err)
	}
	return resp.StatusCode, nil
}

func (t *httpTransport) watch(ctx context.Context, statement string, params map[string]any) (eventStream, error) {
	st, err := t.openStream(ctx, streamRequest{statement: statement, params: params})
	if se, ok := err.(*statusError); ok {
		return nil, se.err
	}
	return st, err
}

func (t *httpTransport) openStream(ctx context.Context, r streamRequest) (eventStream, error) {
	q := url.Values{"query": {r.statement}}
	if len(r.params) > 0 {
		raw, err := json.Marshal(r.params)
		if err != nil {
			return nil, fmt.Errorf("client: encoding the parameters: %w", err)
		}
		q.Set("params", string(raw))
	}
	if r.session != "" {
		q.Set("session", r.session)
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/v1/watch?"+q.Encode(), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if r.after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(r.after, 10))
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer drain(resp.Body)
		return nil, &statusError{status: resp.StatusCode, err: errorFromBody(resp)}
	}
	return &sseStream{body: resp.Body, r: bufio.NewReader(resp.Body), cancel: cancel}, nil
}

func (t *httpTransport) close() { t.hc.CloseIdleConnections() }

// sseStream reads server-sent events: "data:" lines up to a blank line make one event;
// comments (":") and the event, id and retry fields are skipped, since every event
// names its type in its JSON.
type sseStream struct {
	body   io.ReadCloser
	r      *bufio.Reader
	cancel context.CancelFunc
}

// maxEventBytes bounds one event, so a broken server cannot exhaust memory.
const maxEventBytes = 16 << 20

func (s *sseStream) next() (event, error) {
	var data []byte
	var id string
	for {
		line, err := s.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole.
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(buf) < maxEventBytes {
				line, err = s.r.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return event{}, errors.New("client: stream event too large")
			}
			return event{}, err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if len(data) == 0 {
				continue
			}
			var ev event
			if err := json.Unmarshal(data, &ev); err != nil {
				return event{}, fmt.Errorf("client: bad stream event %q: %w", truncate(data), err)
			}
			ev.ID = id
			return ev, nil
		case bytes.HasPrefix(line, []byte("id:")):
			id = string(bytes.TrimSpace(line[3:]))
		case line[0] == ':':
			// comment or keep-alive
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[5:], []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			if len(data)+len(v) > maxEventBytes {
				return event{}, errors.New("client: stream event too large")
			}
			data = append(data, v...)
		}
	}
}

func (s *sseStream) close() {
	s.cancel()
	_ = s.body.Close()
}

// errorBody is the JSON shape of the server's error answers.
type errorBody struct {
	Error struct {
		Code    herald.Code `json:"code"`
		Name    string      `json:"name"`
		Message string      `json:"message"`
		Line    int         `json:"line"`
		Column  int         `json:"column"`
	} `json:"error"`
}

// errorFromBody turns an error answer back into the *herald.Error the server raised.
// An answer that is not Herald's error JSON (a proxy's page, say) becomes INTERNAL with
// the HTTP status in its message.
func errorFromBody(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb errorBody
	if err := json.Unmarshal(raw, &eb); err == nil && eb.Error.Code != "" {
		return &herald.Error{Code: eb.Error.Code, Message: eb.Error.Message, Line: eb.Error.Line, Column: eb.Error.Column}
	}
	return herald.Errorf(herald.CodeInternal, "HTTP %s: %s", resp.Status, strings.TrimSpace(truncate(raw)))
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	_ = body.Close()
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
