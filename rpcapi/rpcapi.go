// Package rpcapi serves the herald.v1.Herald and herald.v1.Queues services over
// Connect, which speaks gRPC, gRPC-Web and the Connect protocol on one HTTP handler.
// Each RPC is a thin translation onto the node's seam (broker.Broker); errors map to
// RPC codes through the root error table.
package rpcapi

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"strings"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/internal/tracing"
)

// Options configures a Service.
type Options struct {
	// Logger receives one record per call ("rpc request", see observe.go) and stream
	// failures. nil means slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes caps request messages; 0 means no limit beyond Connect's own.
	MaxBodyBytes int64
	// WatchLinger is how long a busy watch-mode stream gathers events before its next
	// frame: after a frame, the next one waits until this much time has passed since
	// it, so a stream of a thousand events a second sends tens of frames, not a
	// thousand. The first event after a quiet spell goes out at once. 0 means
	// DefaultWatchLinger; negative, no wait.
	WatchLinger time.Duration
	// Clock times the linger; without one streams do not linger.
	Clock herald.Clock
	// SendSlots bounds how many watch streams encode a frame at once (shared with the
	// HTTP API's event streams); nil means slots of the service's own, half the CPUs.
	SendSlots chan struct{}
	// MaxInflightPublishes caps, per authenticated principal, the published messages
	// not yet durable across its publish streams; past it a frame's messages answer
	// E4015. 0 means DefaultMaxInflightPublishes.
	MaxInflightPublishes int
	// Ready reports whether the server can take calls: grpc.health.v1.Health answers
	// NOT_SERVING while it returns an error (the readiness of /readyz). nil means
	// always ready.
	Ready func() error
	// Observe, when set, is told of every call when it ends (a stream once, at its
	// end): its procedure (OtherProcedure for one this server does not have), its
	// code's name ("ok", "not_found": CodeName) and how long it took. The server
	// counts calls with it.
	Observe func(procedure, code string, elapsed time.Duration)
	// TracerProvider, when set, records spans of the messages that carry a trace
	// context (herald.AttrTrace), children of their publisher's span: the commit of
	// each on the Publish stream (ended once durable), and each lease and settlement
	// of one on a Subscribe stream (docs/tracing.md). nil records none and costs
	// nothing.
	TracerProvider trace.TracerProvider
}

// Service implements heraldv1connect.HeraldHandler. Create it with New.
type Service struct {
	pubs        *inflight // per principal (inflight.go)
	b           broker.Broker
	maxBody     int64
	log         *slog.Logger
	streams     context.Context // done once CloseStreams is called
	stopStreams context.CancelFunc
	// sendSlots bounds how many watch-mode streams encode and send a frame at once, so
	// that a large fan-out takes at most half the CPUs and publishers keep the rest.
	sendSlots chan struct{}
	linger    time.Duration
	clock     herald.Clock
	ready     func() error                                        // Options.Ready
	onCall    func(procedure, code string, elapsed time.Duration) // Options.Observe
	tracer    trace.Tracer                                        // nil: no commit spans
}

// DefaultWatchLinger is Options.WatchLinger's default.
const DefaultWatchLinger = 10 * time.Millisecond

var _ heraldv1connect.HeraldHandler = (*Service)(nil)

// New returns the services over a node.
func New(b broker.Broker, opts Options) *Service {
	s := &Service{b: b, log: opts.Logger, maxBody: opts.MaxBodyBytes, ready: opts.Ready, onCall: opts.Observe}
	if s.ready == nil {
		s.ready = func() error { return nil }
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.pubs = &inflight{max: opts.MaxInflightPublishes, n: map[string]int{}}
	if s.pubs.max <= 0 {
		s.pubs.max = DefaultMaxInflightPublishes
	}
	s.streams, s.stopStreams = context.WithCancel(context.Background())
	s.sendSlots = opts.SendSlots
	if s.sendSlots == nil {
		s.sendSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))
	}
	if opts.TracerProvider != nil {
		s.tracer = tracing.Tracer(opts.TracerProvider)
	}
	s.linger, s.clock = opts.WatchLinger, opts.Clock
	if s.linger == 0 {
		s.linger = DefaultWatchLinger
	}
	if s.clock == nil {
		s.linger = -1
	}
	return s
}

// Handler returns the path prefix the service is served under and its HTTP handler, to
// mount next to the JSON API. It serves gRPC, gRPC-Web and the Connect protocol.
func (s *Service) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	// Responses go uncompressed: gzip on every frame of the message streams costs more
	// CPU than the bytes it saves on the networks a broker runs on (it took half the
	// server's CPU with a thousand watch streams). Compressed requests are still read.
	opts = append([]connect.HandlerOption{connect.WithCompressMinBytes(math.MaxInt32), connect.WithInterceptors(observer{s}, grants{}), withBoundedGzip(s.maxBody)}, opts...)
	if s.maxBody > 0 && s.maxBody <= math.MaxInt32 {
		opts = append([]connect.HandlerOption{connect.WithReadMaxBytes(int(s.maxBody))}, opts...)
	}
	return heraldv1connect.NewHeraldHandler(s, opts...)
}

// CloseStreams ends every open Consume stream (each releases its leases) and makes new
// ones end at once. The server calls it when it starts shutting down.
func (s *Service) CloseStreams() { s.stopStreams() }

// Query runs statements like POST /v1/query.
func (s *Service) Query(ctx context.Context, req *connect.Request[heraldv1.QueryRequest]) (*connect.Response[heraldv1.QueryResponse], error) {
	m := req.Msg
	if strings.TrimSpace(m.GetQuery()) == "" {
		return nil, toConnect(herald.Errorf(herald.CodeEmptyQuery, "the query is empty"))
	}
	params, err := fromProtoParams(m.GetParams())
	if err != nil {
		return nil, toConnect(err)
	}
	resp, err := s.b.Exec(ctx, m.GetSession(), m.GetQuery(), params)
	if err != nil {
		return nil, toConnect(err)
	}
	out, err := toProtoResponse(resp)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(out), nil
}

// OpenSession opens a server-side session.
func (s *Service) OpenSession(ctx context.Context, req *connect.Request[heraldv1.OpenSessionRequest]) (*connect.Response[heraldv1.OpenSessionResponse], error) {
	id, err := s.b.OpenSession(ctx)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.OpenSessionResponse{Session: id}), nil
}

// CloseSession closes a session.
func (s *Service) CloseSession(ctx context.Context, req *connect.Request[heraldv1.CloseSessionRequest]) (*connect.Response[heraldv1.CloseSessionResponse], error) {
	if err := s.b.CloseSession(ctx, req.Msg.GetSession()); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.CloseSessionResponse{}), nil
}

// Consume streams the events of one WATCH until the caller ends the call, the stream
// ends, or the server shuts down. A consume-mode statement goes to the consume engine,
// any other to the watch-mode engine (resuming after req.after). An error event ends
// the call with that error.
func (s *Service) Consume(ctx context.Context, req *connect.Request[heraldv1.ConsumeRequest], out *connect.ServerStream[heraldv1.Event]) error {
	m := req.Msg
	if strings.TrimSpace(m.GetQuery()) == "" {
		return toConnect(herald.Errorf(herald.CodeEmptyQuery, "the query is empty; expected a WATCH statement"))
	}
	params, err := fromProtoParams(m.GetParams())
	if err != nil {
		return toConnect(err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopAfter := context.AfterFunc(s.streams, cancel)
	defer stopAfter()

	st, err := s.b.Open(ctx, broker.StreamRequest{SessionID: m.GetSession(), Query: m.GetQuery(), Params: params, After: m.GetAfter()})
	if err != nil {
		return toConnect(err)
	}
	// Closing ends the watch; in consume mode it releases unsettled leases at once.
	defer st.Close()

	// Send the headers now, so the caller knows the watch is registered before the
	// first delivery.
	if err := out.Send(nil); err != nil {
		return err
	}

	// send passes ev on; done reports that the call ends, with err.
	send := func(ev herald.Event) (done bool, err error) {
		if ev.Type == herald.EventError {
			if ev.Error == nil {
				return true, toConnect(herald.Errorf(herald.Code(ev.Code), "%s", ev.Message))
			}
			return true, toConnect(ev.Error)
		}
		pe, err := toProtoEvent(ev)
		if err != nil {
			s.log.Error("encoding a stream event", "err", err)
			return true, toConnect(err)
		}
		if err := out.Send(pe); err != nil {
			return true, err
		}
		return false, nil
	}

	events := st.Events()
	for {
		select {
		case <-ctx.Done():
			if s.streams.Err() != nil {
				return toConnect(herald.Errorf(herald.CodeShuttingDown, "the server is stopping"))
			}
			return ctx.Err()
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			if done, err := send(ev); done {
				return err
			}
		case <-st.Done():
			// Pass on what the stream buffered before it ended, then end too.
			for {
				select {
				case ev, ok := <-events:
					if !ok {
						return nil
					}
					if done, err := send(ev); done {
						return err
					}
				default:
					return nil
				}
			}
		}
	}
}

// Ack settles a delivery.
func (s *Service) Ack(ctx context.Context, req *connect.Request[heraldv1.AckRequest]) (*connect.Response[heraldv1.AckResponse], error) {
	if _, err := s.settleOne(ctx, broker.Settle{DeliveryID: req.Msg.GetDeliveryId(), Action: broker.ActAck}); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.AckResponse{}), nil
}

// Nack returns a delivery to its queue or dead-letters it.
func (s *Service) Nack(ctx context.Context, req *connect.Request[heraldv1.NackRequest]) (*connect.Response[heraldv1.NackResponse], error) {
	it := broker.Settle{DeliveryID: req.Msg.GetDeliveryId(), Action: broker.ActNack}
	if req.Msg.GetNoRetry() {
		it.Action = broker.ActReject
	}
	if d := req.Msg.GetDelay(); d != nil {
		var err error
		if it.Delay, err = duration("delay", d); err != nil {
			return nil, toConnect(err)
		}
	}
	if _, err := s.settleOne(ctx, it); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.NackResponse{}), nil
}

// Extend pushes a lease's deadline out.
func (s *Service) Extend(ctx context.Context, req *connect.Request[heraldv1.ExtendRequest]) (*connect.Response[heraldv1.ExtendResponse], error) {
	it := broker.Settle{DeliveryID: req.Msg.GetDeliveryId(), Action: broker.ActExtend}
	if d := req.Msg.GetBy(); d != nil {
		var err error
		if it.By, err = duration("by", d); err != nil {
			return nil, toConnect(err)
		}
	}
	res, err := s.settleOne(ctx, it)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.ExtendResponse{Deadline: timestamppb.New(res.Deadline)}), nil
}

// duration converts a protobuf duration that must be valid and not negative.
func duration(field string, d *durationpb.Duration) (time.Duration, error) {
	if err := d.CheckValid(); err != nil {
		return 0, herald.Errorf(herald.CodeMalformedRequest, "%s: %v", field, err)
	}
	v := d.AsDuration()
	if v < 0 {
		return 0, herald.Errorf(herald.CodeMalformedRequest, "%s must not be negative", field)
	}
	return v, nil
}

// Values cross the wire as google.protobuf.Value: numbers are doubles, so an Int beyond
// ±2^53 loses precision (the JSON API keeps it exact); timestamps and durations travel as
// strings, and Bytes as the object {"$bytes": "<base64>"}, as in the JSON API.

func fromProtoParams(in map[string]*structpb.Value) (map[string]herald.Value, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]herald.Value, len(in))
	for name, pv := range in {
		v, err := herald.FromJSON(pv.AsInterface())
		if err != nil {
			return nil, herald.Errorf(herald.CodeMalformedRequest, "parameter $%s: %v", name, err)
		}
		out[name] = v
	}
	return out, nil
}

func toProtoValue(v herald.Value) (*structpb.Value, error) {
	pv, err := structpb.NewValue(jsonPlain(v))
	if err != nil {
		return nil, &herald.Error{Code: herald.CodeInternal, Message: "encoding a value: " + err.Error(), Err: err}
	}
	return pv, nil
}

// jsonPlain is v's plain form (herald.Value.Interface) as the JSON API shows it: Bytes
// in the tagged form {"$bytes": "<base64>"}, which fromProtoParams reads back, rather
// than as a []byte, which structpb would turn into a bare base64 string that no one
// could tell from a String.
func jsonPlain(v herald.Value) any {
	switch v.Kind() {
	case herald.KindBytes:
		return map[string]any{herald.BytesJSONKey: base64.StdEncoding.EncodeToString(v.AsBytes())}
	case herald.KindList:
		l := v.AsList()
		out := make([]any, len(l))
		for i, e := range l {
			out[i] = jsonPlain(e)
		}
		return out
	case herald.KindMap:
		vals := v.MapValues()
		out := make(map[string]any, len(vals))
		for i, k := range v.MapKeys() {
			out[k] = jsonPlain(vals[i])
		}
		return out
	}
	return v.Interface()
}

func toProtoResponse(resp *herald.Response) (*heraldv1.QueryResponse, error) {
	out := &heraldv1.QueryResponse{Seq: resp.Seq, Tick: resp.Tick, Results: make([]*heraldv1.Result, len(resp.Results))}
	for i, res := range resp.Results {
		pr := &heraldv1.Result{
			Columns: res.Columns,
			Rows:    make([]*structpb.ListValue, len(res.Rows)),
			Stats: &heraldv1.Stats{
				NodesCreated:  int64(res.Stats.NodesCreated),
				NodesDeleted:  int64(res.Stats.NodesDeleted),
				EdgesCreated:  int64(res.Stats.EdgesCreated),
				EdgesDeleted:  int64(res.Stats.EdgesDeleted),
				AttributesSet: int64(res.Stats.AttrsSet),
				TypesDeclared: int64(res.Stats.TypesDeclared),
				RowsScanned:   int64(res.Stats.RowsScanned),
				Plan:          res.Stats.Plan,
			},
		}
		for j, row := range res.Rows {
			lv := &structpb.ListValue{Values: make([]*structpb.Value, len(row))}
			for k, v := range row {
				pv, err := toProtoValue(v)
				if err != nil {
					return nil, err
				}
				lv.Values[k] = pv
			}
			pr.Rows[j] = lv
		}
		out.Results[i] = pr
	}
	return out, nil
}

// carriesMatch reports whether events of type t always carry a match, even a null one.
func carriesMatch(t string) bool {
	switch t {
	case herald.EventConsumed, herald.EventInitial, herald.EventAdded, herald.EventRemoved, herald.EventChanged:
		return true
	}
	return false
}

func toProtoEvent(ev herald.Event) (*heraldv1.Event, error) {
	count := ev.Count
	if count > math.MaxInt32 {
		count = math.MaxInt32
	}
	out := &heraldv1.Event{
		Type:       ev.Type,
		DeliveryId: ev.DeliveryID,
		Attempt:    int64(ev.Attempt),
		Seq:        ev.Seq,
		Tick:       ev.Tick,
		Code:       string(ev.Code),
		Message:    ev.Message,
		Count:      int32(count),
		Last:       ev.Last,
	}
	if ev.Error != nil {
		if out.Code == "" {
			out.Code = string(ev.Error.Code)
		}
		if out.Message == "" {
			out.Message = ev.Error.Message
		}
	}
	if carriesMatch(ev.Type) || !ev.Match.IsNull() {
		m, err := toProtoValue(ev.Match)
		if err != nil {
			return nil, err
		}
		out.Match = m
	}
	if ev.Type == herald.EventChanged || !ev.Prev.IsNull() {
		p, err := toProtoValue(ev.Prev)
		if err != nil {
			return nil, err
		}
		out.Prev = p
	}
	if !ev.Deadline.IsZero() {
		out.Deadline = timestamppb.New(ev.Deadline)
	}
	return out, nil
}

// HeaderCode is the response metadata key (header or trailer) that carries the Herald
// error code of a failed call, e.g. "E8004".
const HeaderCode = "herald-code"

// HeaderLeader is the response metadata key that carries where the leader serves
// clients, on E5006 NOT_LEADER from a follower.
const HeaderLeader = "herald-leader"

// toConnect converts err to a Connect error: the RPC code comes from the error table, the
// Herald code travels in the herald-code metadata key and, with the name, message and
// position, in a heraldv1.ErrorDetail. Errors that already are Connect errors pass through.
func toConnect(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	he := herald.AsError(err)
	info := he.Code.Info()
	var code connect.Code
	if code.UnmarshalText([]byte(info.RPC)) != nil {
		code = connect.CodeInternal
	}
	ce = connect.NewError(code, errors.New(he.Message))
	ce.Meta().Set(HeaderCode, string(info.Code))
	if leader := broker.LeaderOf(err); leader != "" {
		ce.Meta().Set(HeaderLeader, leader)
	}
	if d, derr := connect.NewErrorDetail(errorDetail(err)); derr == nil {
		ce.AddDetail(d)
	}
	return ce
}

// errorDetail describes err as the wire's ErrorDetail.
func errorDetail(err error) *heraldv1.ErrorDetail {
	he := herald.AsError(err)
	info := he.Code.Info()
	return &heraldv1.ErrorDetail{
		Code:    string(info.Code),
		Name:    info.Name,
		Message: he.Message,
		Line:    int32(he.Line),
		Column:  int32(he.Column),
	}
}
