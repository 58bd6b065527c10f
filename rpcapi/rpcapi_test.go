package rpcapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
	"github.com/herald-mq/herald/broker"
)

type fakeEngine struct {
	mu      sync.Mutex
	query   string
	session string
	params  map[string]herald.Value
	resp    *herald.Response
	err     error
	closed  []string
	// publish, when set, serves PublishAsync.
	publish func(msgs []herald.Publication) ([]herald.Published, func(context.Context) error, error)
}

func (f *fakeEngine) Exec(ctx context.Context, sessionID, query string, params map[string]herald.Value) (*herald.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.query, f.session, f.params = query, sessionID, params
	if f.err != nil {
		return nil, f.err
	}
	return f.resp, nil
}

func (f *fakeEngine) OpenSession(context.Context) (string, error) { return "s1", nil }

func (f *fakeEngine) Prepare(_ context.Context, query string) (broker.Prepared, error) {
	return broker.Prepared{Name: "p1", Query: query}, nil
}

func (f *fakeEngine) Unprepare(_ context.Context, name string) bool { return name == "p1" }

func (f *fakeEngine) ExecPrepared(ctx context.Context, sessionID, name string, params map[string]herald.Value) (*herald.Response, error) {
	if name != "p1" {
		return nil, herald.Errorf(herald.CodeUnknownStatement, "no prepared statement %q", name)
	}
	return f.Exec(ctx, sessionID, "prepared", params)
}

func (f *fakeEngine) PublishAsync(_ context.Context, sessionID string, msgs []herald.Publication) ([]herald.Published, func(context.Context) error, error) {
	if f.publish != nil {
		return f.publish(msgs)
	}
	return nil, nil, herald.Errorf(herald.CodeNotImplemented, "the fake engine does not publish")
}

func (f *fakeEngine) Position() (uint64, uint64) { return 7, 7 }

func (f *fakeEngine) CloseSession(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id != "s1" {
		return herald.Errorf(herald.CodeNoSession, "unknown session %q", id)
	}
	f.closed = append(f.closed, id)
	return nil
}

type fakeStream struct {
	events    chan herald.Event
	done      chan struct{}
	closeOnce sync.Once
	closed    chan struct{}
}

func newFakeStream() *fakeStream {
	return &fakeStream{events: make(chan herald.Event, 16), done: make(chan struct{}), closed: make(chan struct{})}
}

func (s *fakeStream) SetCredit(n int) error       { return nil }
func (s *fakeStream) ID() string                  { return "st1" }
func (s *fakeStream) Events() <-chan herald.Event { return s.events }
func (s *fakeStream) Done() <-chan struct{}       { return s.done }
func (s *fakeStream) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		close(s.done)
	})
}

type fakeDelivery struct {
	mu       sync.Mutex
	stream   *fakeStream
	err      error // answer of every call
	session  string
	query    string
	params   map[string]herald.Value
	id       string
	nack     nackOptions
	by       time.Duration
	deadline time.Time
	settled  []broker.Settle
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

// nackOptions is what a NACK asked for.
type nackOptions struct {
	NoRetry bool
	Delay   time.Duration
}

// SettleMany records the batch (and, for one settlement, its id, NACK options and
// EXTEND by); with f.err every settlement fails with it, otherwise ids starting with
// "bad" are unknown and an extension ends at f.deadline.
func (f *fakeDelivery) SettleMany(ctx context.Context, items []broker.Settle) ([]broker.SettleResult, uint64, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settled = append(f.settled, items...)
	if len(items) == 1 {
		it := items[0]
		f.id = it.DeliveryID
		switch it.Action {
		case broker.ActNack, broker.ActReject:
			f.nack = nackOptions{NoRetry: it.Action == broker.ActReject, Delay: it.Delay}
		case broker.ActExtend:
			f.by = it.By
		}
	}
	out := make([]broker.SettleResult, len(items))
	for i, it := range items {
		switch {
		case f.err != nil:
			out[i].Err = f.err
		case strings.HasPrefix(it.DeliveryID, "bad"):
			out[i].Err = herald.Errorf(herald.CodeInvalidDeliveryID, "delivery %q is unknown", it.DeliveryID)
		case it.Action == broker.ActExtend:
			out[i].Deadline = f.deadline
		}
	}
	return out, 42, 41
}

// serve starts the service over HTTP/1.1 and returns a Connect-protocol client.
func serve(t *testing.T, eng *fakeEngine, del *fakeDelivery) (heraldv1connect.HeraldClient, *Service) {
	t.Helper()
	svc := New(fakeNode(eng, del, nil), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	mux := http.NewServeMux()
	mux.Handle(svc.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return heraldv1connect.NewHeraldClient(srv.Client(), srv.URL), svc
}

// heraldError turns a client-side Connect error back into a *herald.Error, as the Go
// client does: from the ErrorDetail, else from the herald-code metadata.
func heraldError(t *testing.T, err error) *herald.Error {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("not a connect error: %v", err)
	}
	if ce.Meta().Get(HeaderCode) == "" {
		t.Fatalf("no %s metadata on %v", HeaderCode, err)
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			t.Fatal(derr)
		}
		if ed, ok := v.(*heraldv1.ErrorDetail); ok {
			if ed.GetCode() != ce.Meta().Get(HeaderCode) {
				t.Fatalf("detail code %s, metadata %s", ed.GetCode(), ce.Meta().Get(HeaderCode))
			}
			if ed.GetName() != herald.Code(ed.GetCode()).Name() {
				t.Fatalf("detail name %s for %s", ed.GetName(), ed.GetCode())
			}
			return &herald.Error{Code: herald.Code(ed.GetCode()), Message: ed.GetMessage(), Line: int(ed.GetLine()), Column: int(ed.GetColumn())}
		}
	}
	t.Fatalf("no ErrorDetail on %v", err)
	return nil
}

func TestQuery(t *testing.T) {
	node := herald.Map([]string{"id", "_type", "n"}, []herald.Value{herald.String("j1"), herald.String("Job"), herald.Int(3)})
	eng := &fakeEngine{resp: &herald.Response{
		Seq: 9, Tick: 8,
		Results: []herald.Result{{
			Columns: []string{"j", "tags", "ok"},
			Rows:    [][]herald.Value{{node, herald.List(herald.String("a")), herald.Null}},
			Stats:   herald.Stats{RowsScanned: 4, Plan: "scan Job", NodesCreated: 1},
		}},
	}}
	c, _ := serve(t, eng, nil)
	p, _ := structpb.NewValue(2.0)
	resp, err := c.Query(context.Background(), connect.NewRequest(&heraldv1.QueryRequest{
		Query: "MATCH j: Job WHERE j.n > $n RETURN j", Session: "s1", Params: map[string]*structpb.Value{"n": p},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if eng.query != "MATCH j: Job WHERE j.n > $n RETURN j" || eng.session != "s1" || !eng.params["n"].Equal(herald.Int(2)) || eng.params["n"].Kind() != herald.KindInt {
		t.Fatalf("engine got query=%q session=%q params=%v", eng.query, eng.session, eng.params)
	}
	m := resp.Msg
	if m.GetSeq() != 9 || m.GetTick() != 8 || len(m.GetResults()) != 1 {
		t.Fatalf("response %v", m)
	}
	r := m.GetResults()[0]
	if len(r.GetColumns()) != 3 || r.GetStats().GetRowsScanned() != 4 || r.GetStats().GetPlan() != "scan Job" || r.GetStats().GetNodesCreated() != 1 {
		t.Fatalf("result %v", r)
	}
	row := r.GetRows()[0].AsSlice()
	want := []any{map[string]any{"id": "j1", "_type": "Job", "n": 3.0}, []any{"a"}, nil}
	if len(row) != 3 || row[0].(map[string]any)["n"] != want[0].(map[string]any)["n"] || row[1].([]any)[0] != "a" || row[2] != nil {
		t.Fatalf("row %v", row)
	}
}

func TestQueryErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		req  *heraldv1.QueryRequest
		rpc  connect.Code
		code herald.Code
		line int
	}{
		{"syntax", herald.Errorf(herald.CodeSyntax, "expected identifier").At(1, 7), nil, connect.CodeInvalidArgument, herald.CodeSyntax, 1},
		{"not found", herald.Errorf(herald.CodeNodeNotFound, "no #x"), nil, connect.CodeNotFound, herald.CodeNodeNotFound, 0},
		{"conflict", herald.Errorf(herald.CodeTxConflict, "retry"), nil, connect.CodeAborted, herald.CodeTxConflict, 0},
		{"foreign", errors.New("boom"), nil, connect.CodeInternal, herald.CodeInternal, 0},
		{"empty", nil, &heraldv1.QueryRequest{Query: "  "}, connect.CodeInvalidArgument, herald.CodeEmptyQuery, 0},
		{"bad bytes param", nil, &heraldv1.QueryRequest{Query: "RETURN $a", Params: map[string]*structpb.Value{
			"a": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"$bytes": structpb.NewStringValue("aGVsbG8="), "b": structpb.NewBoolValue(true)}}),
		}}, connect.CodeInvalidArgument, herald.CodeMalformedRequest, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl, _ := serve(t, &fakeEngine{err: c.err}, nil)
			req := c.req
			if req == nil {
				req = &heraldv1.QueryRequest{Query: "MATCH"}
			}
			_, err := cl.Query(context.Background(), connect.NewRequest(req))
			if connect.CodeOf(err) != c.rpc {
				t.Fatalf("rpc code %v, want %v (%v)", connect.CodeOf(err), c.rpc, err)
			}
			he := heraldError(t, err)
			if he.Code != c.code || he.Line != c.line {
				t.Fatalf("herald error %+v, want %s at line %d", he, c.code, c.line)
			}
			if c.line > 0 && he.Column != 7 {
				t.Fatalf("column %d", he.Column)
			}
		})
	}
}

func TestSessions(t *testing.T) {
	eng := &fakeEngine{}
	c, _ := serve(t, eng, nil)
	open, err := c.OpenSession(context.Background(), connect.NewRequest(&heraldv1.OpenSessionRequest{}))
	if err != nil || open.Msg.GetSession() != "s1" {
		t.Fatalf("open: %v %v", open, err)
	}
	if _, err := c.CloseSession(context.Background(), connect.NewRequest(&heraldv1.CloseSessionRequest{Session: "s1"})); err != nil {
		t.Fatal(err)
	}
	_, err = c.CloseSession(context.Background(), connect.NewRequest(&heraldv1.CloseSessionRequest{Session: "nope"}))
	if he := heraldError(t, err); he.Code != herald.CodeNoSession || connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("close unknown: %v", err)
	}
}

func TestConsumeStreamsEvents(t *testing.T) {
	st := newFakeStream()
	del := &fakeDelivery{stream: st}
	c, _ := serve(t, &fakeEngine{}, del)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, _ := structpb.NewValue("pending")
	stream, err := c.Consume(ctx, connect.NewRequest(&heraldv1.ConsumeRequest{
		Query: "WATCH j: Job [mode: consume] RETURN j", Session: "s1", Params: map[string]*structpb.Value{"s": p},
	}))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Date(2025, 1, 1, 0, 0, 30, 0, time.UTC)
	st.events <- herald.Event{Type: herald.EventConsumed, Match: herald.Map([]string{"id"}, []herald.Value{herald.String("j1")}),
		DeliveryID: "d1", Attempt: 2, Seq: 5, Tick: 4, Deadline: deadline}
	st.events <- herald.Event{Type: herald.EventTimeout, DeliveryID: "d0", Attempt: 1, Seq: 6, Tick: 5,
		Error: herald.Errorf(herald.CodeAckTimeout, "lease expired")}

	if !stream.Receive() {
		t.Fatalf("no event: %v", stream.Err())
	}
	ev := stream.Msg()
	if ev.GetType() != "consumed" || ev.GetDeliveryId() != "d1" || ev.GetAttempt() != 2 || ev.GetSeq() != 5 || ev.GetTick() != 4 ||
		ev.GetMatch().GetStructValue().GetFields()["id"].GetStringValue() != "j1" || !ev.GetDeadline().AsTime().Equal(deadline) {
		t.Fatalf("consumed event %v", ev)
	}
	del.mu.Lock()
	if del.query != "WATCH j: Job [mode: consume] RETURN j" || del.session != "s1" || del.params["s"].AsString() != "pending" {
		t.Fatalf("Consume got %q %q %v", del.query, del.session, del.params)
	}
	del.mu.Unlock()
	if !stream.Receive() {
		t.Fatalf("no timeout event: %v", stream.Err())
	}
	ev = stream.Msg()
	if ev.GetType() != "timeout" || ev.GetCode() != "E8003" || ev.GetMessage() != "lease expired" || ev.GetMatch() != nil {
		t.Fatalf("timeout event %v", ev)
	}

	// An error event ends the call with that error.
	st.events <- herald.Event{Type: herald.EventError, Error: herald.Errorf(herald.CodeWatchBufferOverflow, "buffer full")}
	if stream.Receive() {
		t.Fatalf("unexpected event %v", stream.Msg())
	}
	if he := heraldError(t, stream.Err()); he.Code != herald.CodeWatchBufferOverflow || connect.CodeOf(stream.Err()) != connect.CodeResourceExhausted {
		t.Fatalf("stream error %v", stream.Err())
	}
	<-st.closed
}

func TestConsumeClientCancelClosesStream(t *testing.T) {
	st := newFakeStream()
	c, _ := serve(t, &fakeEngine{}, &fakeDelivery{stream: st})
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Consume(ctx, connect.NewRequest(&heraldv1.ConsumeRequest{Query: "WATCH j: Job [mode: consume] RETURN j"}))
	if err != nil {
		t.Fatal(err)
	}
	st.events <- herald.Event{Type: herald.EventConsumed, Match: herald.Int(1), DeliveryID: "d1", Attempt: 1}
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	cancel()
	<-st.closed // the handler saw the caller leave and released the leases
	_ = stream.Close()
}

func TestConsumeEndsWithStream(t *testing.T) {
	st := newFakeStream()
	c, _ := serve(t, &fakeEngine{}, &fakeDelivery{stream: st})
	stream, err := c.Consume(context.Background(), connect.NewRequest(&heraldv1.ConsumeRequest{Query: "WATCH j: Job [mode: consume] RETURN j"}))
	if err != nil {
		t.Fatal(err)
	}
	st.events <- herald.Event{Type: herald.EventConsumed, Match: herald.Int(1), DeliveryID: "d1", Attempt: 1}
	st.Close()
	if !stream.Receive() || stream.Msg().GetDeliveryId() != "d1" {
		t.Fatalf("buffered event lost: %v", stream.Err())
	}
	if stream.Receive() || stream.Err() != nil {
		t.Fatalf("stream did not end cleanly: %v", stream.Err())
	}
}

func TestConsumeCloseStreams(t *testing.T) {
	st := newFakeStream()
	c, svc := serve(t, &fakeEngine{}, &fakeDelivery{stream: st})
	stream, err := c.Consume(context.Background(), connect.NewRequest(&heraldv1.ConsumeRequest{Query: "WATCH j: Job [mode: consume] RETURN j"}))
	if err != nil {
		t.Fatal(err)
	}
	// Whether the handler is already streaming or not yet started, it ends at once.
	svc.CloseStreams()
	<-st.closed
	if stream.Receive() {
		t.Fatal("event after CloseStreams")
	}
	if he := heraldError(t, stream.Err()); he.Code != herald.CodeShuttingDown {
		t.Fatalf("stream error %v", stream.Err())
	}
}

func TestConsumeErrorsBeforeTheStream(t *testing.T) {
	cases := []struct {
		name string
		del  *fakeDelivery
		req  *heraldv1.ConsumeRequest
		rpc  connect.Code
		code herald.Code
	}{
		{"no delivery", nil, &heraldv1.ConsumeRequest{Query: "WATCH"}, connect.CodeUnimplemented, herald.CodeNotImplemented},
		{"empty", &fakeDelivery{}, &heraldv1.ConsumeRequest{}, connect.CodeInvalidArgument, herald.CodeEmptyQuery},
		{"refused", &fakeDelivery{err: herald.Errorf(herald.CodeWatchLimitExceeded, "too many")}, &heraldv1.ConsumeRequest{Query: "WATCH"}, connect.CodeResourceExhausted, herald.CodeWatchLimitExceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl, _ := serve(t, &fakeEngine{}, c.del)
			stream, err := cl.Consume(context.Background(), connect.NewRequest(c.req))
			if err == nil {
				if stream.Receive() {
					t.Fatal("unexpected event")
				}
				err = stream.Err()
			}
			if connect.CodeOf(err) != c.rpc {
				t.Fatalf("rpc code %v, want %v (%v)", connect.CodeOf(err), c.rpc, err)
			}
			if he := heraldError(t, err); he.Code != c.code {
				t.Fatalf("code %s, want %s", he.Code, c.code)
			}
		})
	}
}

func TestSettlement(t *testing.T) {
	deadline := time.Date(2025, 1, 1, 0, 1, 0, 0, time.UTC)
	del := &fakeDelivery{deadline: deadline}
	c, _ := serve(t, &fakeEngine{}, del)
	ctx := context.Background()

	if _, err := c.Ack(ctx, connect.NewRequest(&heraldv1.AckRequest{DeliveryId: "d1"})); err != nil || del.id != "d1" {
		t.Fatalf("ack: %v id=%q", err, del.id)
	}
	if _, err := c.Nack(ctx, connect.NewRequest(&heraldv1.NackRequest{DeliveryId: "d2", NoRetry: true, Delay: durationpb.New(5 * time.Second)})); err != nil {
		t.Fatal(err)
	}
	if del.id != "d2" || !del.nack.NoRetry || del.nack.Delay != 5*time.Second {
		t.Fatalf("nack got %q %+v", del.id, del.nack)
	}
	if _, err := c.Nack(ctx, connect.NewRequest(&heraldv1.NackRequest{DeliveryId: "d3"})); err != nil || del.nack != (nackOptions{}) {
		t.Fatalf("plain nack: %v %+v", err, del.nack)
	}
	resp, err := c.Extend(ctx, connect.NewRequest(&heraldv1.ExtendRequest{DeliveryId: "d4", By: durationpb.New(time.Minute)}))
	if err != nil || del.id != "d4" || del.by != time.Minute || !resp.Msg.GetDeadline().AsTime().Equal(deadline) {
		t.Fatalf("extend: %v id=%q by=%v resp=%v", err, del.id, del.by, resp)
	}
	if _, err := c.Extend(ctx, connect.NewRequest(&heraldv1.ExtendRequest{DeliveryId: "d5"})); err != nil || del.by != 0 {
		t.Fatalf("extend without by: %v by=%v", err, del.by)
	}

	_, err = c.Nack(ctx, connect.NewRequest(&heraldv1.NackRequest{DeliveryId: "d6", Delay: durationpb.New(-time.Second)}))
	if he := heraldError(t, err); he.Code != herald.CodeMalformedRequest {
		t.Fatalf("negative delay: %v", err)
	}

	del.err = herald.Errorf(herald.CodeInvalidDeliveryID, "unknown delivery")
	_, err = c.Ack(ctx, connect.NewRequest(&heraldv1.AckRequest{DeliveryId: "d1"}))
	if he := heraldError(t, err); he.Code != herald.CodeInvalidDeliveryID || connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("stale ack: %v", err)
	}
	del.err = herald.Errorf(herald.CodeDeadLetterFailed, "no #failed_jobs")
	_, err = c.Nack(ctx, connect.NewRequest(&heraldv1.NackRequest{DeliveryId: "d1", NoRetry: true}))
	if he := heraldError(t, err); he.Code != herald.CodeDeadLetterFailed || connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("dead letter failure: %v", err)
	}

	cl, _ := serve(t, &fakeEngine{}, nil)
	_, err = cl.Ack(ctx, connect.NewRequest(&heraldv1.AckRequest{DeliveryId: "d1"}))
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("ack without delivery: %v", err)
	}
}

// TestGRPC runs a unary call and a stream over the gRPC protocol on HTTP/2.
func TestGRPC(t *testing.T) {
	st := newFakeStream()
	svc := New(fakeNode(&fakeEngine{resp: &herald.Response{Seq: 1, Tick: 1}}, &fakeDelivery{stream: st}, nil), Options{})
	srv := h2Server(t, svc)
	c := heraldv1connect.NewHeraldClient(srv.Client(), srv.URL, connect.WithGRPC())

	resp, err := c.Query(context.Background(), connect.NewRequest(&heraldv1.QueryRequest{Query: "TICK"}))
	if err != nil || resp.Msg.GetSeq() != 1 {
		t.Fatalf("query: %v %v", resp, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.Consume(ctx, connect.NewRequest(&heraldv1.ConsumeRequest{Query: "WATCH j: Job [mode: consume] RETURN j"}))
	if err != nil {
		t.Fatal(err)
	}
	st.events <- herald.Event{Type: herald.EventConsumed, Match: herald.Int(7), DeliveryID: "d1", Attempt: 1}
	if !stream.Receive() || stream.Msg().GetMatch().GetNumberValue() != 7 {
		t.Fatalf("grpc stream: %v", stream.Err())
	}
	cancel()
	<-st.closed
}

type fakeWatcher struct {
	mu      sync.Mutex
	stream  *fakeStream
	err     error
	session string
	query   string
	params  map[string]herald.Value
	after   uint64
	opened  int
}

func (f *fakeWatcher) Open(ctx context.Context, sessionID, query string, params map[string]herald.Value, after uint64) (herald.Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened++
	f.session, f.query, f.params, f.after = sessionID, query, params, after
	if f.err != nil {
		return nil, f.err
	}
	return f.stream, nil
}

func serveBoth(t *testing.T, del *fakeDelivery, wat watcher) (heraldv1connect.HeraldClient, *Service) {
	t.Helper()
	svc := New(fakeNode(&fakeEngine{}, del, wat), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	mux := http.NewServeMux()
	mux.Handle(svc.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return heraldv1connect.NewHeraldClient(srv.Client(), srv.URL), svc
}

func task(id, title string) herald.Value {
	return herald.Map([]string{"id", "title"}, []herald.Value{herald.String(id), herald.String(title)})
}

func TestConsumeWatchMode(t *testing.T) {
	st := newFakeStream()
	del := &fakeDelivery{stream: newFakeStream()}
	wat := &fakeWatcher{stream: st}
	c, _ := serveBoth(t, del, wat)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, _ := structpb.NewValue("done")
	const stmt = `WATCH t: Task WHERE t.status = $s [delivery: best_effort] RETURN t`
	stream, err := c.Consume(ctx, connect.NewRequest(&heraldv1.ConsumeRequest{
		Query: stmt, Session: "s1", After: 41, Params: map[string]*structpb.Value{"s": p},
	}))
	if err != nil {
		t.Fatal(err)
	}
	st.events <- herald.Event{Type: herald.EventInitial, Match: task("t1", "a"), Seq: 40, Tick: 40}
	st.events <- herald.Event{Type: herald.EventAdded, Match: task("t2", "b"), Seq: 42, Tick: 42}
	st.events <- herald.Event{Type: herald.EventChanged, Match: task("t1", "z"), Prev: task("t1", "a"), Seq: 43, Tick: 43}
	st.events <- herald.Event{Type: herald.EventGap, Count: 7, Seq: 50, Tick: 50}
	st.events <- herald.Event{Type: herald.EventRemoved, Match: task("t2", "b"), Seq: 51, Tick: 51}
	st.events <- herald.Event{Type: herald.EventHeartbeat, Seq: 60, Tick: 60}

	recv := func() *heraldv1.Event {
		t.Helper()
		if !stream.Receive() {
			t.Fatalf("no event: %v", stream.Err())
		}
		return stream.Msg()
	}
	title := func(v *structpb.Value) string { return v.GetStructValue().GetFields()["title"].GetStringValue() }

	ev := recv()
	if ev.GetType() != "initial" || title(ev.GetMatch()) != "a" || ev.GetPrev() != nil || ev.GetSeq() != 40 || ev.GetDeliveryId() != "" {
		t.Fatalf("initial %v", ev)
	}
	wat.mu.Lock()
	if wat.query != stmt || wat.session != "s1" || wat.after != 41 || wat.params["s"].AsString() != "done" {
		t.Fatalf("Open got %q %q after=%d %v", wat.query, wat.session, wat.after, wat.params)
	}
	wat.mu.Unlock()
	del.mu.Lock()
	if del.query != "" {
		t.Fatalf("a watch-mode statement reached the consume engine: %q", del.query)
	}
	del.mu.Unlock()

	if ev = recv(); ev.GetType() != "added" || title(ev.GetMatch()) != "b" || ev.GetSeq() != 42 {
		t.Fatalf("added %v", ev)
	}
	if ev = recv(); ev.GetType() != "changed" || title(ev.GetMatch()) != "z" || title(ev.GetPrev()) != "a" || ev.GetTick() != 43 {
		t.Fatalf("changed %v", ev)
	}
	if ev = recv(); ev.GetType() != "gap" || ev.GetCount() != 7 || ev.GetMatch() != nil || ev.GetSeq() != 50 {
		t.Fatalf("gap %v", ev)
	}
	if ev = recv(); ev.GetType() != "removed" || title(ev.GetMatch()) != "b" || ev.GetPrev() != nil {
		t.Fatalf("removed %v", ev)
	}
	if ev = recv(); ev.GetType() != "heartbeat" || ev.GetSeq() != 60 || ev.GetMatch() != nil || ev.GetCount() != 0 {
		t.Fatalf("heartbeat %v", ev)
	}
	cancel()
	<-st.closed
}

// A changed event whose values were or became null still carries both, as null.
func TestConsumeWatchModeNullValues(t *testing.T) {
	st := newFakeStream()
	c, _ := serveBoth(t, nil, &fakeWatcher{stream: st})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.Consume(ctx, connect.NewRequest(&heraldv1.ConsumeRequest{Query: "WATCH t: Task RETURN t.title"}))
	if err != nil {
		t.Fatal(err)
	}
	st.events <- herald.Event{Type: herald.EventChanged, Match: herald.Null, Prev: herald.String("a"), Seq: 3, Tick: 3}
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	ev := stream.Msg()
	if _, ok := ev.GetMatch().GetKind().(*structpb.Value_NullValue); !ok || ev.GetPrev().GetStringValue() != "a" {
		t.Fatalf("changed to null: %v", ev)
	}
}

func TestConsumeWatchModeErrorEvent(t *testing.T) {
	st := newFakeStream()
	c, _ := serveBoth(t, nil, &fakeWatcher{stream: st})
	stream, err := c.Consume(context.Background(), connect.NewRequest(&heraldv1.ConsumeRequest{Query: "WATCH t: Task RETURN t"}))
	if err != nil {
		t.Fatal(err)
	}
	st.events <- herald.Event{Type: herald.EventAdded, Match: task("t1", "a"), Seq: 2, Tick: 2}
	st.events <- herald.Event{Type: herald.EventError, Error: herald.Errorf(herald.CodeWatchLimitExceeded, "buffer overflow")}
	if !stream.Receive() || stream.Msg().GetType() != "added" {
		t.Fatalf("added: %v", stream.Err())
	}
	if stream.Receive() {
		t.Fatalf("event after the error: %v", stream.Msg())
	}
	if he := heraldError(t, stream.Err()); he.Code != herald.CodeWatchLimitExceeded || he.Message != "buffer overflow" ||
		connect.CodeOf(stream.Err()) != connect.CodeResourceExhausted {
		t.Fatalf("stream error %v", stream.Err())
	}
	<-st.closed
}

func TestConsumeWatchModeErrorsBeforeTheStream(t *testing.T) {
	cases := []struct {
		name string
		del  *fakeDelivery
		wat  watcher
		req  *heraldv1.ConsumeRequest
		rpc  connect.Code
		code herald.Code
	}{
		{"no watch service", &fakeDelivery{}, nil, &heraldv1.ConsumeRequest{Query: "WATCH t: Task RETURN t"}, connect.CodeUnimplemented, herald.CodeNotImplemented},
		{"no delivery, consume mode", nil, &fakeWatcher{}, &heraldv1.ConsumeRequest{Query: "WATCH t: Task [mode: consume] RETURN t"}, connect.CodeUnimplemented, herald.CodeNotImplemented},
		{"refused", nil, &fakeWatcher{err: herald.Errorf(herald.CodeWatchLimitExceeded, "too many")}, &heraldv1.ConsumeRequest{Query: "WATCH t: Task RETURN t", After: 9}, connect.CodeResourceExhausted, herald.CodeWatchLimitExceeded},
		{"invalid", nil, &fakeWatcher{err: herald.Errorf(herald.CodeInvalidQuery, "ack_timeout is a consume-mode option")}, &heraldv1.ConsumeRequest{Query: "WATCH t: Task [ack_timeout: 1s] RETURN t"}, connect.CodeInvalidArgument, herald.CodeInvalidQuery},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl, _ := serveBoth(t, c.del, c.wat)
			stream, err := cl.Consume(context.Background(), connect.NewRequest(c.req))
			if err == nil {
				if stream.Receive() {
					t.Fatal("unexpected event")
				}
				err = stream.Err()
			}
			if connect.CodeOf(err) != c.rpc {
				t.Fatalf("rpc code %v, want %v (%v)", connect.CodeOf(err), c.rpc, err)
			}
			if he := heraldError(t, err); he.Code != c.code {
				t.Fatalf("code %s, want %s", he.Code, c.code)
			}
		})
	}
}

func TestConsumeWatchModeCloseStreams(t *testing.T) {
	st := newFakeStream()
	c, svc := serveBoth(t, nil, &fakeWatcher{stream: st})
	stream, err := c.Consume(context.Background(), connect.NewRequest(&heraldv1.ConsumeRequest{Query: "WATCH t: Task RETURN t"}))
	if err != nil {
		t.Fatal(err)
	}
	svc.CloseStreams()
	<-st.closed
	if stream.Receive() {
		t.Fatal("event after CloseStreams")
	}
	if he := heraldError(t, stream.Err()); he.Code != herald.CodeShuttingDown {
		t.Fatalf("stream error %v", stream.Err())
	}
}

// The JSON-shaped Query RPC writes Bytes as the JSON API does, {"$bytes": "<base64>"},
// and reads that form back from a parameter.
func TestQueryBytes(t *testing.T) {
	hello := herald.Bytes([]byte("hello"))
	eng := &fakeEngine{resp: &herald.Response{Results: []herald.Result{{
		Columns: []string{"b", "l", "m"},
		Rows:    [][]herald.Value{{hello, herald.List(hello), herald.Map([]string{"body"}, []herald.Value{hello})}},
	}}}}
	c, _ := serve(t, eng, nil)
	p, err := structpb.NewValue(map[string]any{"$bytes": "aGVsbG8="})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Query(context.Background(), connect.NewRequest(&heraldv1.QueryRequest{
		Query: "RETURN $b", Params: map[string]*structpb.Value{"b": p},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := eng.params["b"]; got.Kind() != herald.KindBytes || !got.Equal(hello) {
		t.Fatalf("parameter $b = %s (%s), want %s", got, got.Kind(), hello)
	}
	tagged := map[string]any{"$bytes": "aGVsbG8="}
	want := []any{tagged, []any{tagged}, map[string]any{"body": tagged}}
	if row := resp.Msg.GetResults()[0].GetRows()[0].AsSlice(); !reflect.DeepEqual(row, want) {
		t.Fatalf("row %#v, want %#v", row, want)
	}
}

// A follower's refusal carries the leader's address in the herald-leader metadata.
func TestNotLeaderNamesTheLeader(t *testing.T) {
	c, _ := serve(t, &fakeEngine{err: broker.NotLeaderError("http://leader:7420", "a write")}, nil)
	_, err := c.Query(context.Background(), connect.NewRequest(&heraldv1.QueryRequest{Query: "SPAWN j: Job"}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable || ce.Meta().Get(HeaderLeader) != "http://leader:7420" {
		t.Fatalf("error %v", err)
	}
	if he := heraldError(t, err); he.Code != herald.CodeNotLeader {
		t.Fatalf("code %s", he.Code)
	}
}
