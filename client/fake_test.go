package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/api/convert"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
)

// fakeServer serves the herald.v1.Herald RPCs the client uses, scripted by the test:
// Exec (statements go to answer), the sessions, Subscribe streams fed by the test (whose
// settlements are recorded as the statements they stand for and checked for double
// settlement), Watch streams fed by the test, and Publish.
type fakeServer struct {
	heraldv1connect.UnimplementedHeraldHandler
	t   testing.TB
	srv *httptest.Server

	stmts     chan string      // settlements (as statements) and queries, in arrival order
	streams   chan *fakeStream // every Subscribe stream opened
	watches   chan *fakeWatch  // every Watch stream opened
	published chan *heraldv1.PublishMessage

	mu       sync.Mutex
	settled  map[string]bool
	answer   func(q string, params map[string]any) (*heraldv1.ExecResponse, error)
	requests []fakeRequest
	batches  []int         // sizes of the settlement frames
	gate     chan struct{} // when set, settlement frames wait until it is closed
	refuse   []error       // the next Subscribe or Watch calls fail with these
	nextID   int
	follower string // when set, Exec, Publish and Subscribe answer NOT_LEADER naming it

	// binaryAttrs makes Publish say, in its headers, that it reads attrs_binary (set
	// before the client dials).
	binaryAttrs bool
}

type fakeRequest struct {
	Query, Statement, Session string
	Params                    map[string]any
}

// fakeStream is one Subscribe call: the test sends deliveries and timeouts on it.
type fakeStream struct {
	query             string
	params            map[string]any
	credit, maxCredit uint32
	credits           chan uint32
	out               chan *heraldv1.SubscribeResponse // closing it ends the call
	gone              chan struct{}                    // closed when the call has ended
}

// fakeWatch is one Watch call: the test sends events on it.
type fakeWatch struct {
	query, session string
	params         map[string]any
	after          uint64
	out            chan any // *heraldv1.WatchEvent to send, or an error to end the call with; closing it drops the connection
	gone           chan struct{}
}

func newFakeServer(t testing.TB) *fakeServer {
	f := &fakeServer{
		t:         t,
		stmts:     make(chan string, 1000),
		streams:   make(chan *fakeStream, 100),
		watches:   make(chan *fakeWatch, 100),
		published: make(chan *heraldv1.PublishMessage, 1000),
		settled:   make(map[string]bool),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	path, h := heraldv1connect.NewHeraldHandler(f)
	mux.Handle(path, h)
	f.srv = httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	f.srv.Config.Protocols = &p
	f.srv.Start()
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

// fakeError is the error the real server returns for e: the RPC code of the error table,
// the herald-code metadata and an ErrorDetail.
func fakeError(e *herald.Error) error {
	var code connect.Code
	if code.UnmarshalText([]byte(e.Code.Info().RPC)) != nil {
		code = connect.CodeInternal
	}
	ce := connect.NewError(code, errors.New(e.Message))
	ce.Meta().Set("herald-code", string(e.Code))
	if d, err := connect.NewErrorDetail(&heraldv1.ErrorDetail{Code: string(e.Code), Name: e.Code.Info().Name, Message: e.Message,
		Line: int32(e.Line), Column: int32(e.Column)}); err == nil {
		ce.AddDetail(d)
	}
	return ce
}

func plainParams(in map[string]*heraldv1.Value) map[string]any {
	if len(in) == 0 {
		return nil
	}
	out := map[string]any{}
	for k, w := range in {
		v, _ := convert.FromWire(w)
		out[k] = v.Interface()
	}
	return out
}

func (f *fakeServer) Exec(ctx context.Context, req *connect.Request[heraldv1.ExecRequest]) (*connect.Response[heraldv1.ExecResponse], error) {
	m := req.Msg
	params := plainParams(m.GetParams())
	if err := f.notLeader(); err != nil {
		f.stmts <- "refused: " + m.GetQuery()
		return nil, err
	}
	f.mu.Lock()
	f.requests = append(f.requests, fakeRequest{Query: m.GetQuery(), Statement: m.GetStatement(), Session: m.GetSession(), Params: params})
	answer := f.answer
	f.mu.Unlock()
	f.stmts <- m.GetQuery()
	if answer == nil {
		return connect.NewResponse(&heraldv1.ExecResponse{Seq: 1, Tick: 1}), nil
	}
	resp, err := answer(m.GetQuery(), params)
	if err != nil {
		var he *herald.Error
		if errors.As(err, &he) {
			return nil, fakeError(he)
		}
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

func (f *fakeServer) OpenSession(context.Context, *connect.Request[heraldv1.OpenSessionRequest]) (*connect.Response[heraldv1.OpenSessionResponse], error) {
	return connect.NewResponse(&heraldv1.OpenSessionResponse{Session: "s1"}), nil
}

func (f *fakeServer) CloseSession(_ context.Context, req *connect.Request[heraldv1.CloseSessionRequest]) (*connect.Response[heraldv1.CloseSessionResponse], error) {
	if req.Msg.GetSession() != "s1" {
		return nil, fakeError(herald.Errorf(herald.CodeNoSession, "unknown session"))
	}
	return connect.NewResponse(&heraldv1.CloseSessionResponse{}), nil
}

// notLeader is a follower's refusal naming f.follower, as the real server sends it;
// nil while f leads.
func (f *fakeServer) notLeader() error {
	f.mu.Lock()
	leader := f.follower
	f.mu.Unlock()
	if leader == "" {
		return nil
	}
	ce := fakeError(herald.Errorf(herald.CodeNotLeader, "writes go to the leader, at %s", leader)).(*connect.Error)
	ce.Meta().Set("herald-leader", leader)
	return ce
}

func (f *fakeServer) refused() error {
	if err := f.notLeader(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.refuse) == 0 {
		return nil
	}
	err := f.refuse[0]
	f.refuse = f.refuse[1:]
	var he *herald.Error
	if errors.As(err, &he) {
		return fakeError(he)
	}
	return err
}

func (f *fakeServer) Subscribe(ctx context.Context, stream *connect.BidiStream[heraldv1.SubscribeRequest, heraldv1.SubscribeResponse]) error {
	first, err := stream.Receive()
	if err != nil {
		return err
	}
	if err := f.refused(); err != nil {
		return err
	}
	open := first.GetOpen()
	st := &fakeStream{query: open.GetQuery(), params: plainParams(open.GetParams()), credit: open.GetCredit(), maxCredit: open.GetMaxCredit(),
		credits: make(chan uint32, 16), out: make(chan *heraldv1.SubscribeResponse, 100), gone: make(chan struct{})}
	defer close(st.gone)
	if err := stream.Send(&heraldv1.SubscribeResponse{}); err != nil {
		return err
	}
	f.streams <- st
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan *heraldv1.SubscribeResponse, 100)
	go func() {
		defer cancel()
		for {
			req, err := stream.Receive()
			if err != nil {
				return
			}
			if n := req.GetCredit(); n > 0 {
				st.credits <- n
			}
			if len(req.GetSettle()) > 0 {
				results <- f.settle(req.GetSettle())
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-results:
			if err := stream.Send(r); err != nil {
				return err
			}
		case r, ok := <-st.out:
			if !ok {
				return nil
			}
			if err := stream.Send(r); err != nil {
				return err
			}
		}
	}
}

// settle records a frame of settlements as the statements they stand for and answers
// each: E8004 for a delivery settled before.
func (f *fakeServer) settle(in []*heraldv1.Settlement) *heraldv1.SubscribeResponse {
	f.mu.Lock()
	gate := f.gate
	f.batches = append(f.batches, len(in))
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	out := &heraldv1.SubscribeResponse{}
	for _, s := range in {
		id := strconv.Quote(s.GetDeliveryId())
		var stmt string
		switch s.GetAction() {
		case heraldv1.Settlement_ACTION_ACK:
			stmt = "ACK " + id
		case heraldv1.Settlement_ACTION_REJECT:
			stmt = "NACK " + id + " [no_retry]"
		case heraldv1.Settlement_ACTION_NACK:
			stmt = "NACK " + id
			if d := s.GetDelay(); d != nil {
				stmt += " [delay: " + durationLit(d.AsDuration()) + "]"
			}
		case heraldv1.Settlement_ACTION_EXTEND:
			stmt = "EXTEND " + id
			if d := s.GetBy(); d != nil {
				stmt += " [by: " + durationLit(d.AsDuration()) + "]"
			}
		}
		res := &heraldv1.SettleResult{DeliveryId: s.GetDeliveryId(), Ok: true}
		if s.GetAction() != heraldv1.Settlement_ACTION_EXTEND {
			f.mu.Lock()
			again := f.settled[s.GetDeliveryId()]
			f.settled[s.GetDeliveryId()] = true
			f.mu.Unlock()
			if again {
				res = &heraldv1.SettleResult{DeliveryId: s.GetDeliveryId(), Error: &heraldv1.ErrorDetail{Code: "E8004", Name: "INVALID_DELIVERY_ID", Message: "delivery " + s.GetDeliveryId() + " is settled"}}
				out.Settled = append(out.Settled, res)
				continue
			}
		}
		f.stmts <- stmt
		out.Settled = append(out.Settled, res)
	}
	return out
}

// durationLit writes d as the query language does: whole seconds, else milliseconds.
func durationLit(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

func (f *fakeServer) Watch(ctx context.Context, req *connect.Request[heraldv1.WatchRequest], out *connect.ServerStream[heraldv1.WatchResponse]) error {
	if err := f.refused(); err != nil {
		return err
	}
	m := req.Msg
	w := &fakeWatch{query: m.GetQuery(), session: m.GetSession(), params: plainParams(m.GetParams()), after: m.GetAfter(),
		out: make(chan any, 64), gone: make(chan struct{})}
	defer close(w.gone)
	if err := out.Send(&heraldv1.WatchResponse{}); err != nil {
		return err
	}
	f.watches <- w
	for {
		select {
		case <-ctx.Done():
			return nil
		case x, ok := <-w.out:
			if !ok {
				return fakeError(herald.Errorf(herald.CodeShuttingDown, "the connection dropped")) // as a proxy or a stopping server would
			}
			if err, isErr := x.(error); isErr {
				return err
			}
			if err := out.Send(&heraldv1.WatchResponse{Events: []*heraldv1.WatchEvent{x.(*heraldv1.WatchEvent)}}); err != nil {
				return err
			}
		}
	}
}

func (f *fakeServer) Publish(ctx context.Context, stream *connect.BidiStream[heraldv1.PublishRequest, heraldv1.PublishResponse]) error {
	if f.binaryAttrs {
		stream.ResponseHeader().Set(convert.HeaderBinaryAttrs, "1")
	}
	for {
		req, err := stream.Receive()
		if err != nil {
			return nil
		}
		if err := f.notLeader(); err != nil {
			return err
		}
		resp := &heraldv1.PublishResponse{}
		for _, m := range req.GetMessages() {
			f.published <- m
			f.mu.Lock()
			f.nextID++
			id := fmt.Sprintf("n_%d", f.nextID)
			f.mu.Unlock()
			if m.GetId() != "" {
				id = m.GetId()
			}
			resp.Acks = append(resp.Acks, &heraldv1.PublishAck{Ref: m.GetRef(), Id: id, Seq: 7, Tick: 7})
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// nextStream waits for the next Subscribe stream the client opens.
func (f *fakeServer) nextStream(t testing.TB) *fakeStream {
	t.Helper()
	return recv(t, f.streams)
}

// nextWatch waits for the next Watch stream the client opens.
func (f *fakeServer) nextWatch(t testing.TB) *fakeWatch {
	t.Helper()
	return recv(t, f.watches)
}

// nextStmt waits for the next statement the server receives.
func (f *fakeServer) nextStmt(t testing.TB) string {
	t.Helper()
	return recv(t, f.stmts)
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
	match := herald.Map([]string{"n"}, []herald.Value{herald.Int(int64(n))})
	st.out <- &heraldv1.SubscribeResponse{Deliveries: []*heraldv1.Delivery{{DeliveryId: id, Attempt: int32(attempt), Match: convert.ToWire(match),
		Seq: uint64(10 + n), Tick: uint64(20 + n), Deadline: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()}}}
}

func (st *fakeStream) timeout(id string) {
	st.out <- &heraldv1.SubscribeResponse{Events: []*heraldv1.WatchEvent{{Type: "timeout", DeliveryId: id, Code: "E8003", Message: "lease expired"}}}
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

// fail ends the call with the server's error e.
func (w *fakeWatch) fail(e *herald.Error) { w.out <- fakeError(e) }

// send sends one event, written as the JSON API writes it, marked as the last of its
// position.
func (w *fakeWatch) send(data string) {
	var raw struct {
		Type    string          `json:"type"`
		Match   json.RawMessage `json:"match"`
		Prev    json.RawMessage `json:"prev"`
		Count   int32           `json:"count"`
		Seq     uint64          `json:"seq"`
		Tick    uint64          `json:"tick"`
		Code    string          `json:"code"`
		Message string          `json:"message"`
	}
	if err := json.Unmarshal([]byte(data), &raw); err != nil {
		panic(err)
	}
	ev := &heraldv1.WatchEvent{Type: raw.Type, Count: raw.Count, Seq: raw.Seq, Tick: raw.Tick, Code: raw.Code, Message: raw.Message, Last: true}
	ev.Match, ev.Prev = jsonWire(raw.Match), jsonWire(raw.Prev)
	w.out <- ev
}

// jsonWire turns a JSON value into a wire value (objects into maps).
func jsonWire(raw json.RawMessage) *heraldv1.Value {
	if len(raw) == 0 {
		return nil
	}
	var x any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		panic(err)
	}
	return convert.ToWire(jsonValue(x))
}

func jsonValue(x any) herald.Value {
	switch t := x.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		vals := make([]herald.Value, 0, len(t))
		for k, e := range t {
			keys, vals = append(keys, k), append(vals, jsonValue(e))
		}
		return herald.Map(keys, vals)
	case []any:
		vs := make([]herald.Value, len(t))
		for i, e := range t {
			vs[i] = jsonValue(e)
		}
		return herald.List(vs...)
	}
	v, err := herald.FromJSON(x)
	if err != nil {
		panic(err)
	}
	return v
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
