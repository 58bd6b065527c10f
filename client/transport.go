package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/api/convert"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
)

// transport carries the client's calls to a server over the herald.v1.Herald Connect
// service: binary protobuf on one HTTP/2 connection (unencrypted HTTP/2 for http://
// servers), unary calls for queries and sessions, and streams for publishing,
// consuming and watching. Only the health check is a plain GET.
type transport struct {
	hc       *http.Client
	failover time.Duration // how long a call keeps trying other nodes (failover.go)
	clock    herald.Clock

	mu  sync.Mutex
	eps []*endpoint // the addresses given to Dial, then leaders learned of
	cur *endpoint   // where calls go: the leader, as last learned
}

// endpoint is one server address and the clients of its services.
type endpoint struct {
	base    string
	rpc     heraldv1connect.HeraldClient
	queues  heraldv1connect.QueuesClient // the queue RPC
	watches watchMux                     // the watch-mode streams' shared call
}

// newHTTPClient returns the HTTP client of a new Client: HTTP/2 only, without TLS for
// http:// servers, since the streams need it.
func newHTTPClient(base string, tc *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var p http.Protocols
	if strings.HasPrefix(base, "https://") {
		p.SetHTTP2(true)
		p.SetHTTP1(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	tr.Protocols = &p
	tr.MaxIdleConnsPerHost = 16
	tr.DialContext = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	switch {
	case tc != nil:
		tr.TLSClientConfig = tc.Clone()
	case tr.TLSClientConfig == nil:
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}
}

func newTransport(bases []string, hc *http.Client, failover time.Duration, clk herald.Clock) *transport {
	t := &transport{hc: hc, failover: failover, clock: clk}
	for _, b := range bases {
		t.eps = append(t.eps, t.newEndpoint(b))
	}
	t.cur = t.eps[0]
	return t
}

func (t *transport) newEndpoint(base string) *endpoint {
	ep := &endpoint{base: base, rpc: heraldv1connect.NewHeraldClient(t.hc, base, connect.WithReadMaxBytes(64<<20), connect.WithCodec(convert.Codec{}))}
	ep.queues = heraldv1connect.NewQueuesClient(t.hc, base, connect.WithReadMaxBytes(64<<20))
	ep.watches.ep = ep
	return ep
}

func (t *transport) health(ctx context.Context, ep *endpoint) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.base+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return herald.Errorf(herald.CodeInternal, "HTTP %s: %s", resp.Status, strings.TrimSpace(string(raw)))
	}
	if resp.ProtoMajor < 2 {
		// The streams (publish, subscribe, watch) are bidirectional: HTTP/1.1 cannot
		// carry them, and the first publish would fail with 505.
		return herald.Errorf(herald.CodeClientSetup, "the HTTP client spoke %s to the server; the Go client needs HTTP/2 — over TLS, a transport with HTTP/2 enabled; without TLS, one with Protocols.SetUnencryptedHTTP2(true) (leave WithHTTPClient out to get one)", resp.Proto)
	}
	return nil
}

// exec runs query text (or the prepared statement named, when statement is set).
func (t *transport) exec(ctx context.Context, session, query, statement string, params map[string]any) (*Response, error) {
	wp, err := wireParams(params)
	if err != nil {
		return nil, err
	}
	var resp *connect.Response[heraldv1.ExecResponse]
	err = t.call(ctx, false, func(ep *endpoint) (err error) {
		resp, err = ep.rpc.Exec(ctx, connect.NewRequest(&heraldv1.ExecRequest{Query: query, Statement: statement, Params: wp, Session: session}))
		return fromConnect(err)
	})
	if err != nil {
		return nil, err
	}
	return decodeResponse(resp.Msg)
}

func (t *transport) prepare(ctx context.Context, query string) (string, error) {
	var resp *connect.Response[heraldv1.PrepareResponse]
	err := t.call(ctx, true, func(ep *endpoint) (err error) {
		resp, err = ep.rpc.Prepare(ctx, connect.NewRequest(&heraldv1.PrepareRequest{Query: query}))
		return fromConnect(err)
	})
	if err != nil {
		return "", err
	}
	return resp.Msg.GetStatement(), nil
}

func (t *transport) openSession(ctx context.Context) (string, error) {
	var resp *connect.Response[heraldv1.OpenSessionResponse]
	err := t.call(ctx, false, func(ep *endpoint) (err error) {
		resp, err = ep.rpc.OpenSession(ctx, connect.NewRequest(&heraldv1.OpenSessionRequest{}))
		return fromConnect(err)
	})
	if err != nil {
		return "", err
	}
	if resp.Msg.GetSession() == "" {
		return "", errors.New("client: the server answered without a session id")
	}
	return resp.Msg.GetSession(), nil
}

func (t *transport) closeSession(ctx context.Context, id string) error {
	_, err := t.ep().rpc.CloseSession(ctx, connect.NewRequest(&heraldv1.CloseSessionRequest{Session: id}))
	return fromConnect(err)
}

func (t *transport) close() { t.hc.CloseIdleConnections() }

// decodeResponse turns an Exec answer into a Response of plain Go values.
func decodeResponse(m *heraldv1.ExecResponse) (*Response, error) {
	out := &Response{Seq: m.GetSeq(), Tick: m.GetTick(), Results: make([]Result, len(m.GetResults()))}
	for i, r := range m.GetResults() {
		rows := make([][]any, len(r.GetRows()))
		for j, row := range r.GetRows() {
			vals := make([]any, len(row.GetValues()))
			for k, w := range row.GetValues() {
				v, err := convert.FromWire(w)
				if err != nil {
					return nil, fmt.Errorf("client: bad value in the answer: %w", err)
				}
				vals[k] = plain(v)
			}
			rows[j] = vals
		}
		cols := r.GetColumns()
		if cols == nil {
			cols = []string{}
		}
		st := r.GetStats()
		out.Results[i] = Result{Columns: cols, Rows: rows, Stats: Stats{
			NodesCreated: int(st.GetNodesCreated()), NodesDeleted: int(st.GetNodesDeleted()),
			EdgesCreated: int(st.GetEdgesCreated()), EdgesDeleted: int(st.GetEdgesDeleted()),
			AttrsSet: int(st.GetAttributesSet()), TypesDeclared: int(st.GetTypesDeclared()),
			RowsScanned: int(st.GetRowsScanned()), Plan: st.GetPlan(),
		}}
	}
	return out, nil
}

// plain turns a value into the plain Go values the client hands out: nil, bool, int64,
// float64, string, []any, map[string]any; timestamps as RFC 3339 text and durations as
// Go duration text, as the JSON API writes them.
func plain(v herald.Value) any { return v.Interface() }

// plainMap returns a match in its plain form (see plain) as a map: a node, an edge or a
// RETURN row; null is nil, and any other value is kept under the key "value".
func plainMap(x any) map[string]any {
	if x == nil {
		return nil
	}
	if m, ok := x.(map[string]any); ok {
		return m
	}
	return map[string]any{"value": x}
}

// matchMap decodes a match or prev that a stream sends in either form (binary_match or
// a wire value) into the map the client hands out.
func matchMap(bin []byte, w *heraldv1.Value) (map[string]any, error) {
	x, err := convert.EventPlain(bin, w)
	if err != nil {
		return nil, err
	}
	return plainMap(x), nil
}

// wireParams converts parameters to typed wire values.
func wireParams(params map[string]any) (map[string]*heraldv1.Value, error) {
	if len(params) == 0 {
		return nil, nil
	}
	out := make(map[string]*heraldv1.Value, len(params))
	for name, x := range params {
		v, err := herald.ValueOf(x)
		if err != nil {
			return nil, &herald.Error{Code: herald.CodeInvalidArgument, Message: fmt.Sprintf("client: parameter $%s: %v", name, err), Err: err}
		}
		out[name] = convert.ToWire(v)
	}
	return out, nil
}

// fromConnect turns a failed call's error back into the *herald.Error the server raised
// (from its ErrorDetail, or the herald-code metadata); other errors (the connection)
// pass through.
func fromConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	var he *herald.Error
	for _, d := range ce.Details() {
		msg, derr := d.Value()
		if derr != nil {
			continue
		}
		if ed, ok := msg.(*heraldv1.ErrorDetail); ok && ed.GetCode() != "" {
			he = detailError(ed)
			break
		}
	}
	code, leader := metaCode(ce)
	if he == nil && code != "" {
		he = &herald.Error{Code: herald.Code(code), Message: ce.Message()}
	}
	if he == nil {
		return err
	}
	if he.Code == herald.CodeNotLeader && leader != "" {
		he.Err = &notLeader{leader: leader}
	}
	return he
}

// metaMu serialises reads of a connect error's metadata. Meta allocates the map on
// first use, and connect hands one shared *connect.Error to every stream that ends on
// a final envelope with protocol flags, so two subscriptions ending at once would
// otherwise both write it.
var metaMu sync.Mutex

// metaCode returns the herald-code and herald-leader headers that an error carries, if
// any.
func metaCode(ce *connect.Error) (code, leader string) {
	metaMu.Lock()
	defer metaMu.Unlock()
	return ce.Meta().Get("herald-code"), ce.Meta().Get("herald-leader")
}

// detailError rebuilds a *herald.Error from the wire's ErrorDetail.
func detailError(ed *heraldv1.ErrorDetail) *herald.Error {
	return &herald.Error{Code: herald.Code(ed.GetCode()), Message: ed.GetMessage(), Line: int(ed.GetLine()), Column: int(ed.GetColumn())}
}

func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	_ = body.Close()
}

// WithBearer returns a copy of hc that sends "Authorization: Bearer token" with every
// request.
func WithBearer(hc *http.Client, token string) *http.Client {
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c := *hc
	c.Transport = bearer{base: base, header: "Bearer " + token}
	return &c
}

type bearer struct {
	base   http.RoundTripper
	header string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.header)
	return b.base.RoundTrip(r)
}
