package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
)

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("client: closed")

// Option configures Dial.
type Option func(*options)

type options struct {
	hc      *http.Client
	timeout time.Duration
	log     *slog.Logger
}

// WithHTTPClient sets the HTTP client used for every request. Its Timeout must be zero
// (or longer than any subscription lives), since watch streams are long requests; use
// WithTimeout to bound the other calls. The default is a new client on
// http.DefaultTransport.
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.hc = hc } }

// WithTimeout bounds each request other than a watch stream (queries, settlements,
// sessions, the health check), on top of the caller's context. 0, the default, adds no
// bound.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithLogger sets the logger of the client and its subscriptions, which report there
// what they cannot return: a failed automatic settlement, a recovered panic. The default
// is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// Client is a connection to one Herald server. It is safe for concurrent use.
type Client struct {
	tr      transport
	timeout time.Duration
	log     *slog.Logger

	settler settler // coalesces the settlements of messages (settle.go)

	mu     sync.Mutex
	closed bool
	subs   map[*Subscription]struct{}
}

// Dial returns a client for the server at url (e.g. "http://127.0.0.1:7420") after
// checking that it answers its health endpoint.
func Dial(ctx context.Context, url string, opts ...Option) (*Client, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.hc == nil {
		o.hc = &http.Client{}
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	base := strings.TrimRight(url, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("client: url %q: want http:// or https://", url)
	}
	c := &Client{
		tr:      &httpTransport{base: base, hc: o.hc},
		timeout: o.timeout,
		log:     o.log,
		subs:    make(map[*Subscription]struct{}),
	}
	c.settler.c = c
	hctx, cancel := c.bound(ctx)
	defer cancel()
	if err := c.tr.health(hctx); err != nil {
		c.tr.close()
		return nil, fmt.Errorf("client: dial %s: %w", base, err)
	}
	return c, nil
}

// bound applies the request timeout to ctx.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout > 0 {
		return context.WithTimeout(ctx, c.timeout)
	}
	return context.WithCancel(ctx)
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close stops every subscription of the client without waiting for its handlers (call
// Subscription.Close first to drain them) and releases idle connections. Calls after
// Close return ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	subs := make([]*Subscription, 0, len(c.subs))
	for s := range c.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	for _, s := range subs {
		s.abort()
	}
	c.settler.wait()
	c.tr.close()
	return nil
}

// Response is the answer to Exec: one Result per statement, and the position of the
// store after the request.
type Response struct {
	Results []Result
	Seq     uint64 // change sequence number after the request
	Tick    uint64 // logical clock after the request
}

// Result is what one statement returned.
type Result struct {
	Columns []string
	// Rows hold JSON values: nil, bool, int64 (integral numbers), float64, string,
	// []any, and map[string]any for nodes and edges.
	Rows  [][]any
	Stats Stats
}

// Stats counts what a statement did.
type Stats struct {
	NodesCreated  int    `json:"nodes_created"`
	NodesDeleted  int    `json:"nodes_deleted"`
	EdgesCreated  int    `json:"edges_created"`
	EdgesDeleted  int    `json:"edges_deleted"`
	AttrsSet      int    `json:"attributes_set"`
	TypesDeclared int    `json:"types_declared"`
	RowsScanned   int    `json:"rows_scanned"`
	Plan          string `json:"plan"`
}

// Last returns the result of the last statement, or an empty Result.
func (r *Response) Last() Result {
	if r == nil || len(r.Results) == 0 {
		return Result{}
	}
	return r.Results[len(r.Results)-1]
}

// wireResponse is the JSON answer of POST /v1/query.
type wireResponse struct {
	Results []struct {
		Columns []string `json:"columns"`
		Rows    [][]any  `json:"rows"`
		Stats   Stats    `json:"stats"`
	} `json:"results"`
	Seq  uint64 `json:"seq"`
	Tick uint64 `json:"tick"`
}

func (w *wireResponse) decode() *Response {
	out := &Response{Seq: w.Seq, Tick: w.Tick, Results: make([]Result, len(w.Results))}
	for i, r := range w.Results {
		rows := make([][]any, len(r.Rows))
		for j, row := range r.Rows {
			vals := make([]any, len(row))
			for k, v := range row {
				vals[k] = plain(v)
			}
			rows[j] = vals
		}
		cols := r.Columns
		if cols == nil {
			cols = []string{}
		}
		out.Results[i] = Result{Columns: cols, Rows: rows, Stats: r.Stats}
	}
	return out
}

// plain turns the json.Number values of a UseNumber decoding into int64 (when integral
// and in range) or float64, everywhere inside v.
func plain(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	case []any:
		for i, e := range t {
			t[i] = plain(e)
		}
	case map[string]any:
		for k, e := range t {
			t[k] = plain(e)
		}
	}
	return v
}

// Exec runs query, one or more statements, with params bound to its $parameters.
// Parameter values are JSON values: nil, bool, numbers, strings and lists of them. An
// error the server reports comes back as a *herald.Error with its code, message and,
// for errors in the query text, line and column.
func (c *Client) Exec(ctx context.Context, query string, params map[string]any) (*Response, error) {
	return c.exec(ctx, "", query, params)
}

func (c *Client) exec(ctx context.Context, session, query string, params map[string]any) (*Response, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	return c.tr.query(ctx, queryRequest{Query: query, Params: params, Session: session})
}

// PublishOption configures Publish.
type PublishOption func(*publishOptions)

type publishOptions struct {
	id      string
	session *Session
}

// WithID gives the published node an explicit id instead of a generated one; a node
// with that id must not exist yet (E2004 otherwise).
func WithID(id string) PublishOption { return func(o *publishOptions) { o.id = id } }

// InSession publishes within s, e.g. inside a transaction s has begun.
func InSession(s *Session) PublishOption { return func(o *publishOptions) { o.session = s } }

// Publish creates a node of type typ with the attributes attrs and returns its id: a
// message for every consume watch whose pattern it matches. Attribute values travel as
// query parameters, never as query text; typ and the attribute names must be plain
// identifiers.
func (c *Client) Publish(ctx context.Context, typ string, attrs map[string]any, opts ...PublishOption) (string, error) {
	var o publishOptions
	for _, opt := range opts {
		opt(&o)
	}
	q, params, err := spawnQuery(typ, attrs, o.id)
	if err != nil {
		return "", err
	}
	session := ""
	if o.session != nil {
		session = o.session.id
	}
	resp, err := c.exec(ctx, session, q, params)
	if err != nil {
		return "", err
	}
	last := resp.Last()
	if len(last.Rows) != 1 || len(last.Rows[0]) != 1 {
		return "", fmt.Errorf("client: publish: unexpected answer %v", last.Rows)
	}
	id, ok := last.Rows[0][0].(string)
	if !ok {
		return "", fmt.Errorf("client: publish: the id %v is not a string", last.Rows[0][0])
	}
	return id, nil
}

// spawnQuery builds the SPAWN statement of Publish: identifiers are checked and
// spliced, values become parameters $p0, $p1, … in attribute-name order.
func spawnQuery(typ string, attrs map[string]any, id string) (string, map[string]any, error) {
	if !isIdent(typ) {
		return "", nil, fmt.Errorf("client: publish: type %q is not an identifier", typ)
	}
	target := "m"
	if id != "" {
		if !isIdent(id) {
			return "", nil, fmt.Errorf("client: publish: id %q must be letters, digits and _", id)
		}
		target = "#" + id
	}
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		if !isIdent(name) {
			return "", nil, fmt.Errorf("client: publish: attribute %q is not an identifier", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "SPAWN %s: %s", target, typ)
	params := make(map[string]any, len(names))
	if len(names) > 0 {
		b.WriteString(" {")
		for i, name := range names {
			if i > 0 {
				b.WriteByte(',')
			}
			p := fmt.Sprintf("p%d", i)
			fmt.Fprintf(&b, " %s = $%s", name, p)
			params[p] = attrs[name]
		}
		b.WriteString(" }")
	}
	fmt.Fprintf(&b, " RETURNING %s.id", target)
	return b.String(), params, nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

// Session is a server session: variables bound by one request (SPAWN j: …) stay bound
// for the next, and a transaction begun in one request continues in the next. Close it
// when done.
type Session struct {
	c  *Client
	id string
}

// OpenSession opens a server session.
func (c *Client) OpenSession(ctx context.Context) (*Session, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	id, err := c.tr.openSession(ctx)
	if err != nil {
		return nil, err
	}
	return &Session{c: c, id: id}, nil
}

// ID returns the session's id.
func (s *Session) ID() string { return s.id }

// Exec runs query within the session (see Client.Exec).
func (s *Session) Exec(ctx context.Context, query string, params map[string]any) (*Response, error) {
	return s.c.exec(ctx, s.id, query, params)
}

// Close ends the session on the server.
func (s *Session) Close(ctx context.Context) error {
	if s.c.isClosed() {
		return ErrClosed
	}
	ctx, cancel := s.c.bound(ctx)
	defer cancel()
	return s.c.tr.closeSession(ctx, s.id)
}
