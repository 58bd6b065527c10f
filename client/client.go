package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"go.opentelemetry.io/otel/trace"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/internal/tracing"
)

// Option configures Dial.
type Option func(*options)

type options struct {
	hc      *http.Client
	tls     *tls.Config
	token   string
	timeout time.Duration
	log     *slog.Logger
	codec   Codec
	clock   herald.Clock
	tp      trace.TracerProvider

	failover    time.Duration
	failoverSet bool
}

// WithToken sends a bearer token (herald token create) with every request, for a
// server started with --auth.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithTLSConfig sets the TLS configuration of the default HTTP client for an https://
// server: the CA that signed its certificate (RootCAs) and, for a server that requires
// client certificates, this client's (Certificates). LoadTLSConfig builds one from
// files. It does not apply with WithHTTPClient.
func WithTLSConfig(c *tls.Config) Option { return func(o *options) { o.tls = c } }

// LoadTLSConfig builds a TLS configuration from PEM files: caFile (empty: the system's
// roots) verifies the server; certFile and keyFile (both or neither) are the client's
// certificate for a server that requires one.
func LoadTLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, setupError(err, "CA")
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, setupError(nil, "CA %s: no PEM certificate in it", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, setupError(nil, "a client certificate needs both its certificate and its key file")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, setupError(err, "certificate")
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// WithHTTPClient sets the HTTP client used for every call. It must speak HTTP/2 (for an
// http:// server, unencrypted HTTP/2 with prior knowledge: http.Protocols with only
// UnencryptedHTTP2 set), since publishing, subscriptions and watches are streams, and
// its Timeout must be zero (or longer than any stream lives); use WithTimeout to bound
// the other calls. The default is such a client of its own.
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.hc = hc } }

// WithTimeout bounds each request other than a watch stream (queries, settlements,
// sessions, the health check), on top of the caller's context. 0, the default, adds no
// bound.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithLogger sets the logger of the client and its subscriptions, which report there
// what they cannot return: a failed automatic settlement, a recovered panic. The default
// is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithCodec sets the codec that Publish turns a struct into attributes with and
// Message.Decode reads a match with; the default is JSON.
func WithCodec(c Codec) Option { return func(o *options) { o.codec = c } }

// WithClock sets the clock the client reads: the time a delayed publish becomes
// available (WithDelay), the interval of the subscriptions' failure reports, and a
// watch's wait between reconnect attempts. The default is the real clock; tests give a
// manual one.
func WithClock(c herald.Clock) Option { return func(o *options) { o.clock = c } }

// WithTracerProvider sets the OpenTelemetry tracer provider of the client's spans: a
// producer span for each publish, whose trace context the message carries to its
// consumers, and a consumer span for each delivery a subscription handles, the child
// of its publisher's span (see docs/tracing.md). The default is OpenTelemetry's global
// provider, which records nothing until the program sets one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tp = tp }
}

// Client is a connection to one Herald server. It is safe for concurrent use.
type Client struct {
	tr      *transport
	timeout time.Duration
	log     *slog.Logger
	codec   Codec
	clock   herald.Clock
	trc     trace.Tracer // the spans of publishes and deliveries (tracing)

	pub publisher // coalesces publishes onto one stream (publish.go)

	mu     sync.Mutex
	closed bool
	subs   map[*Subscription]struct{}
}

// Dial returns a client for the server at url (e.g. "http://127.0.0.1:7420") after
// checking that it answers its health endpoint. For several nodes on one PostgreSQL
// store, url lists them, comma-separated ("http://a:7420,http://b:7420"): Dial needs
// one of them to answer, and the client follows the leader from then on (failover.go).
func Dial(ctx context.Context, url string, opts ...Option) (*Client, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.codec == nil {
		o.codec = JSON
	}
	if o.clock == nil {
		o.clock = clock.Real()
	}
	if !o.failoverSet {
		o.failover = DefaultFailoverTimeout
	}
	if o.failover < 0 {
		return nil, setupError(nil, "failover timeout %v: want 0 or more", o.failover)
	}
	bases, err := splitAddresses(url)
	if err != nil {
		return nil, err
	}
	if o.hc == nil {
		o.hc = newHTTPClient(bases[0], o.tls)
	}
	if o.token != "" {
		o.hc = WithBearer(o.hc, o.token)
	}
	c := &Client{
		tr:      newTransport(bases, o.hc, o.failover, o.clock),
		timeout: o.timeout,
		log:     o.log,
		codec:   o.codec,
		clock:   o.clock,
		trc:     tracing.Tracer(o.tp),
		subs:    make(map[*Subscription]struct{}),
	}
	c.pub.c = c
	hctx, cancel := c.bound(ctx)
	defer cancel()
	var errs []error
	for _, ep := range c.tr.eps {
		err := c.tr.health(hctx, ep)
		if err == nil {
			c.tr.cur = ep
			return c, nil
		}
		if herald.CodeOf(err) == herald.CodeClientSetup {
			errs = []error{err}
			break
		}
		if len(c.tr.eps) == 1 {
			errs = append(errs, err)
		} else {
			errs = append(errs, fmt.Errorf("%s: %w", ep.base, err))
		}
	}
	c.tr.close()
	return nil, fmt.Errorf("client: dial %s: %w", url, errors.Join(errs...))
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

// Drain stops the client gracefully: every subscription drains as Close does (no new
// message, running handlers finish and are settled), publishes under way are answered,
// then the client closes. ctx bounds the wait: past it, the subscriptions still
// running are cut off (their unsettled messages are redelivered) and Drain returns
// ctx's error. After Drain the client is closed.
func (c *Client) Drain(ctx context.Context) error {
	c.mu.Lock()
	subs := make([]*Subscription, 0, len(c.subs))
	for s := range c.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	errs := make(chan error, len(subs))
	for _, s := range subs {
		go func() { errs <- s.Close(ctx) }()
	}
	var first error
	for range subs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if err := c.pub.drain(ctx); err != nil && first == nil {
		first = err
	}
	if err := c.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// Close stops every subscription of the client without waiting for its handlers (call
// Subscription.Close first, or Drain, to drain them) and releases idle connections.
// Calls after Close return ErrClosed. Close is idempotent.
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
	c.pub.close()
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

// Exec runs query, one or more statements, with params bound to its $parameters.
// Parameter values are nil, bool, integers, floats, strings, time.Time (a Timestamp),
// time.Duration and slices of these. An error the server reports comes back as a
// *herald.Error with its code, message and, for errors in the query text, line and
// column.
func (c *Client) Exec(ctx context.Context, query string, params map[string]any) (*Response, error) {
	return c.exec(ctx, "", query, params)
}

func (c *Client) exec(ctx context.Context, session, query string, params map[string]any) (*Response, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	return c.tr.exec(ctx, session, query, "", params)
}

// Prepared is a statement the server has parsed once: Exec runs it with new parameters
// without sending its text again. It survives only as long as the server does; Exec
// prepares it again by itself when the server has forgotten it.
type Prepared struct {
	c     *Client
	query string
	mu    sync.Mutex
	name  string
}

// Prepare has the server parse and check query once, for many runs with parameters.
func (c *Client) Prepare(ctx context.Context, query string) (*Prepared, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	p := &Prepared{c: c, query: query}
	if _, err := p.prepare(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Prepared) prepare(ctx context.Context) (string, error) {
	ctx, cancel := p.c.bound(ctx)
	defer cancel()
	name, err := p.c.tr.prepare(ctx, p.query)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	p.name = name
	p.mu.Unlock()
	return name, nil
}

// Exec runs the prepared statement with params (see Client.Exec).
func (p *Prepared) Exec(ctx context.Context, params map[string]any) (*Response, error) {
	return p.exec(ctx, "", params)
}

func (p *Prepared) exec(ctx context.Context, session string, params map[string]any) (*Response, error) {
	if p.c.isClosed() {
		return nil, ErrClosed
	}
	p.mu.Lock()
	name := p.name
	p.mu.Unlock()
	bctx, cancel := p.c.bound(ctx)
	resp, err := p.c.tr.exec(bctx, session, "", name, params)
	cancel()
	if herald.CodeOf(err) == herald.CodeUnknownStatement {
		// The server restarted (or dropped it): prepare it again and retry once.
		if name, err = p.prepare(ctx); err != nil {
			return nil, err
		}
		bctx, cancel := p.c.bound(ctx)
		defer cancel()
		return p.c.tr.exec(bctx, session, "", name, params)
	}
	return resp, err
}

// PublishOption configures Publish.
type PublishOption func(*publishOptions)

type publishOptions struct {
	id       string
	session  *Session
	delay    time.Duration
	priority *int64
	fairness *string
	ctx      context.Context // WithContext: the trace PublishAsync joins
}

// WithContext gives PublishAsync, which has no context of its own, the context whose
// trace the publish joins: its producer span is a child of ctx's span, and the message
// carries that trace to its consumers. Publish uses its own context and ignores it.
func WithContext(ctx context.Context) PublishOption {
	return func(o *publishOptions) { o.ctx = ctx }
}

// WithID gives the published node an explicit id instead of a generated one; a node
// with that id must not exist yet (E2004 otherwise).
func WithID(id string) PublishOption { return func(o *publishOptions) { o.id = id } }

// InSession publishes within s, e.g. inside a transaction s has begun.
func InSession(s *Session) PublishOption { return func(o *publishOptions) { o.session = s } }

// The attributes the publish options set, and that a ConsumerConfig reads when told
// to: AvailableAt: AttrAvailableAt, OrderBy: ByPriority, Fairness: AttrFairnessKey.
// They are the names the queue RPC gives its messages' attributes too.
const (
	AttrAvailableAt = "available_at"
	AttrPriority    = "priority"
	AttrFairnessKey = "fairness_key"
)

// WithDelay holds the message back for d: it sets the attribute available_at to the
// client clock's now plus d, and a consumer whose WATCH has `available_at:
// m.available_at` (ConsumerConfig.AvailableAt) receives it no earlier. A consumer
// without that option receives it at once.
func WithDelay(d time.Duration) PublishOption { return func(o *publishOptions) { o.delay = d } }

// WithPriority sets the attribute priority, which a consumer ordering by it
// (ConsumerConfig.OrderBy: ByPriority, `ordering: attribute(m.priority ASC)`) serves
// lowest first: 0 is the highest, as in the queues.
func WithPriority(p int64) PublishOption { return func(o *publishOptions) { o.priority = &p } }

// WithFairnessKey sets the attribute fairness_key, by which a consumer with
// ConsumerConfig.Fairness (`fairness: m.fairness_key`) shares its deliveries out
// between keys in turn (deficit round robin).
func WithFairnessKey(k string) PublishOption { return func(o *publishOptions) { o.fairness = &k } }

// Publish creates a node of type typ from body and returns its id once the server has
// made it durable: a message for every consume watch whose pattern it matches. body
// is its attributes: a map[string]any of Herald values (see Exec's parameters, plus
// herald.Value), or a struct (or anything else the client's codec takes: JSON unless
// WithCodec says otherwise), whose fields become the attributes; nil has none. The
// options WithDelay, WithPriority and WithFairnessKey add the attributes they name,
// over body's own.
//
// It travels on the client's publish stream as a type and typed values, never as
// query text, and publishes made meanwhile from other goroutines share its frame and
// its commit. typ and the attribute names must be plain identifiers. In a session
// (InSession) it runs as a SPAWN statement in the session's open transaction instead.
func (c *Client) Publish(ctx context.Context, typ string, body any, opts ...PublishOption) (string, error) {
	var o publishOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.session == nil {
		o.ctx = ctx
		return c.publishAsync(typ, body, &o).Wait(ctx)
	}
	span, traceparent := tracing.StartPublish(ctx, c.trc, typ)
	id, err := c.publishInSession(ctx, typ, body, &o, traceparent)
	tracing.EndPublish(span, id, 0, err)
	return id, err
}

func (c *Client) publishInSession(ctx context.Context, typ string, body any, o *publishOptions, traceparent string) (string, error) {
	attrs, err := c.attrsOf(body, o)
	if err != nil {
		return "", err
	}
	if traceparent != "" {
		if _, set := attrs[herald.AttrTrace]; !set {
			attrs = maps.Clone(attrs)
			if attrs == nil {
				attrs = map[string]any{}
			}
			attrs[herald.AttrTrace] = traceparent
		}
	}
	q, params, err := spawnQuery(typ, attrs, o.id)
	if err != nil {
		return "", err
	}
	resp, err := c.exec(ctx, o.session.id, q, params)
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

// attrsOf returns the attributes of a publish: body's, through the codec unless it is
// a map of values already, and those the options set. A codec's "id" is the node's id
// (unless WithID gave one), and "_type" is dropped: both come back in a whole node's
// match, and neither is an attribute.
func (c *Client) attrsOf(body any, o *publishOptions) (map[string]any, error) {
	var attrs map[string]any
	switch b := body.(type) {
	case nil:
	case map[string]any:
		attrs = b
	default:
		vals, err := c.codec.Marshal(body)
		if err != nil {
			return nil, err
		}
		attrs = make(map[string]any, len(vals)+3)
		for k, v := range vals {
			switch {
			case k == "_type":
			case k == "id" && v.Kind() == herald.KindString:
				if o.id == "" {
					o.id = v.AsString()
				}
			default:
				attrs[k] = v
			}
		}
	}
	if o.delay == 0 && o.priority == nil && o.fairness == nil {
		return attrs, nil
	}
	if _, ok := body.(map[string]any); ok || attrs == nil {
		attrs = maps.Clone(attrs) // the caller's map stays as it was
		if attrs == nil {
			attrs = map[string]any{}
		}
	}
	if o.delay != 0 {
		attrs[AttrAvailableAt] = c.clock.Now().Add(o.delay)
	}
	if o.priority != nil {
		attrs[AttrPriority] = *o.priority
	}
	if o.fairness != nil {
		attrs[AttrFairnessKey] = *o.fairness
	}
	return attrs, nil
}

// spawnQuery builds the SPAWN statement of Publish: identifiers are checked and
// spliced, values become parameters $p0, $p1, … in attribute-name order.
func spawnQuery(typ string, attrs map[string]any, id string) (string, map[string]any, error) {
	if !isIdent(typ) {
		return "", nil, invalid("publish: type %q is not an identifier", typ)
	}
	target := "m"
	if id != "" {
		if !isIdent(id) {
			return "", nil, invalid("publish: id %q must be letters, digits and _", id)
		}
		target = "#" + id
	}
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		if !isIdent(name) {
			return "", nil, invalid("publish: attribute %q is not an identifier", name)
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
