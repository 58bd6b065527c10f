package rpcapi

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/api/convert"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/internal/tracing"
)

// maxEventsPerFrame bounds the events one stream frame carries.
const maxEventsPerFrame = 256

// Watch streams a watch-mode statement as typed events: whatever is waiting when a frame
// goes out goes in it, so a busy stream costs one frame per batch.
func (s *Service) Watch(ctx context.Context, req *connect.Request[heraldv1.WatchRequest], out *connect.ServerStream[heraldv1.WatchResponse]) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.streams, cancel)()
	st, err := s.openWatch(ctx, req.Msg)
	if err != nil {
		return toConnect(err)
	}
	defer st.Close()
	// An empty first frame tells the caller the watch is registered.
	if err := out.Send(&heraldv1.WatchResponse{}); err != nil {
		return err
	}
	events := st.Events()
	var raw []byte
	var evs []herald.Event
	var last time.Time // when the last frame went out
	for {
		var first herald.Event
		var ok bool
		select {
		case <-ctx.Done():
			return s.ended(ctx)
		case first, ok = <-events:
		case <-st.Done():
			select {
			case first, ok = <-events:
			default:
				return nil
			}
		}
		if !ok {
			return nil
		}
		// A busy stream gathers what comes during the linger into one frame.
		if !s.lingered(ctx, last, nil) {
			return s.ended(ctx)
		}
		// Encoding takes one of a few slots, and the fan-out's CPU budget, so that a
		// large fan-out leaves CPU to the publishers; the send holds neither (a client
		// that does not read would hold them for as long as its flow-control window
		// stays shut).
		release, ok := s.frameSlot(ctx)
		if !ok {
			return s.ended(ctx)
		}
		var n int
		var end error
		raw, evs, n, end = encodeFrame(raw[:0], first, st, evs, req.Msg.GetBinaryMatch())
		release()
		if n > 0 {
			frame := &heraldv1.WatchResponse{}
			frame.ProtoReflect().SetUnknown(raw)
			if err := out.Send(frame); err != nil {
				return err
			}
			if s.linger > 0 {
				last = s.clock.Now()
			}
		}
		if end != nil {
			return end
		}
	}
}

// openWatch opens the watch-mode stream a WatchRequest asks for, for as long as ctx
// lasts.
func (s *Service) openWatch(ctx context.Context, m *heraldv1.WatchRequest) (broker.Stream, error) {
	if strings.TrimSpace(m.GetQuery()) == "" {
		return nil, herald.Errorf(herald.CodeEmptyQuery, "the query is empty; expected a WATCH statement")
	}
	params, err := convert.FromWireMap(m.GetParams(), "parameter")
	if err != nil {
		return nil, err
	}
	return s.b.Open(ctx, broker.StreamRequest{SessionID: m.GetSession(), Query: m.GetQuery(), Params: params, After: m.GetAfter(), Only: broker.ModeWatch})
}

// encodeFrame appends to raw first and the events waiting behind it (up to
// maxEventsPerFrame), already encoded, as WatchResponse.events fields: protobuf carries
// them as unknown fields, so an event shared by identical watches is serialised once
// for all of them. It returns the frame, its event count and the error that ends the
// stream, if an error event or a failed encoding came. evs is scratch space.
func encodeFrame(raw []byte, first herald.Event, st broker.Stream, evs []herald.Event, binary bool) ([]byte, []herald.Event, int, error) {
	evs, _ = st.Take(append(evs[:0], first), maxEventsPerFrame)
	for n, ev := range evs {
		if ev.Type == herald.EventError {
			return raw, evs, n, eventError(ev)
		}
		b, err := encodedEvent(ev, binary)
		if err != nil {
			return raw, evs, n, toConnect(err)
		}
		raw = appendEncodedEvent(raw, b)
	}
	return raw, evs, len(evs), nil
}

// lingered waits until the linger has passed since the last frame went out (at last),
// or until cut has a value; false when ctx ended meanwhile. A nil cut never cuts.
func (s *Service) lingered(ctx context.Context, last time.Time, cut <-chan struct{}) bool {
	if s.linger <= 0 || last.IsZero() {
		return true
	}
	wait := s.linger - s.clock.Now().Sub(last)
	if wait <= 0 {
		return true
	}
	t := s.clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-cut:
		return true
	case <-ctx.Done():
		return false
	}
}

// frameSlot is what building one frame of watch events takes: room in the watch
// service's fan-out budget, when it has one, then one of the few send slots. release
// gives the slot back and counts the frame's time against the budget; ok is false when
// ctx ended first.
func (s *Service) frameSlot(ctx context.Context) (release func(), ok bool) {
	// The slot first: the wait for one is not work, and counted against the budget it
	// spent the budget of the very streams that waited.
	select {
	case s.sendSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, false
	}
	finish := func() {}
	if finish, ok = s.b.FrameBudget(ctx.Done()); !ok {
		<-s.sendSlots
		return nil, false
	}
	return func() {
		finish()
		<-s.sendSlots
	}, true
}

// ended is the error of a stream whose context ended: the server stopping, or the call.
func (s *Service) ended(ctx context.Context) error {
	if s.streams.Err() != nil {
		return toConnect(herald.Errorf(herald.CodeShuttingDown, "the server is stopping"))
	}
	return ctx.Err()
}

// eventError is the error an error event ends a stream with.
func eventError(ev herald.Event) error {
	if ev.Error == nil {
		return toConnect(herald.Errorf(herald.Code(ev.Code), "%s", ev.Message))
	}
	return toConnect(ev.Error)
}

// watchEventsField is the field number of WatchResponse.events.
const watchEventsField = 1

// appendEncodedEvent appends one encoded event to a WatchResponse's bytes.
func appendEncodedEvent(raw, ev []byte) []byte {
	raw = protowire.AppendTag(raw, watchEventsField, protowire.BytesType)
	return protowire.AppendBytes(raw, ev)
}

// encodedEvent returns the protobuf encoding of a watch event, its values in their
// binary encoding when binary is set (WatchRequest.binary_match), shared with the other
// streams that send the same event in the same form when it carries Encodings.
func encodedEvent(ev herald.Event, binary bool) ([]byte, error) {
	encode := func() ([]byte, error) { return proto.Marshal(toWireEvent(ev, binary)) }
	if ev.Enc == nil {
		return encode()
	}
	form := herald.FormProto
	switch {
	case binary && ev.Last:
		form = herald.FormProtoBinaryLast
	case binary:
		form = herald.FormProtoBinary
	case ev.Last:
		form = herald.FormProtoLast
	}
	return ev.Enc.Get(form, encode)
}

// toWireEvent converts an event for the wire; with binary set its match and prev go
// as bytes in their binary encoding.
func toWireEvent(ev herald.Event, binary bool) *heraldv1.WatchEvent {
	out := &heraldv1.WatchEvent{
		Type: ev.Type, Seq: ev.Seq, Tick: ev.Tick, Last: ev.Last, Count: int32(min(ev.Count, 1<<31-1)),
		Uncommitted: ev.Uncommitted, Code: string(ev.Code), Message: ev.Message,
		DeliveryId: ev.DeliveryID, Attempt: int32(ev.Attempt), Releases: int32(min(ev.Releases, 1<<31-1)),
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
		if binary {
			out.MatchBinary = ev.Match.AppendBinary(nil)
		} else {
			out.Match = convert.ToWire(ev.Match)
		}
	}
	if ev.Type == herald.EventChanged || !ev.Prev.IsNull() {
		if binary {
			out.PrevBinary = ev.Prev.AppendBinary(nil)
		} else {
			out.Prev = convert.ToWire(ev.Prev)
		}
	}
	return out
}

// Subscribe is a consume-mode stream with credit-based flow control and settlements on
// the same stream. The request side is read by this call's goroutine; one more
// goroutine writes the response side: deliveries as credit allows, and the outcomes of
// settlements once they are durable.
func (s *Service) Subscribe(ctx context.Context, stream *connect.BidiStream[heraldv1.SubscribeRequest, heraldv1.SubscribeResponse]) error {
	first, err := stream.Receive()
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil {
		return toConnect(herald.Errorf(herald.CodeMalformedRequest, "the first request of a Subscribe call opens it: set open"))
	}
	params, err := convert.FromWireMap(open.GetParams(), "parameter")
	if err != nil {
		return toConnect(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.streams, cancel)()
	c, err := s.b.Open(ctx, broker.StreamRequest{SessionID: open.GetSession(), Query: open.GetQuery(), Params: params,
		Credit: int(open.GetCredit()), MaxCredit: int(open.GetMaxCredit()), Only: broker.ModeConsume})
	if err != nil {
		return toConnect(err)
	}
	defer c.Close()
	// An empty first frame tells the caller the consumer is registered.
	if err := stream.Send(&heraldv1.SubscribeResponse{}); err != nil {
		return err
	}
	out := &subscribeWriter{stream: stream, c: c, binary: open.GetBinaryMatch(), wake: make(chan struct{}, 1)}
	if s.tracer != nil {
		out.tracer, out.traces = s.tracer, map[string]string{}
	}
	done := make(chan error, 1)
	go func() { done <- out.run(ctx) }()

	handle := func(req *heraldv1.SubscribeRequest) error {
		if req.GetOpen() != nil {
			return herald.Errorf(herald.CodeMalformedRequest, "the stream is already open")
		}
		if n := req.GetCredit(); n > 0 {
			if err := c.SetCredit(int(n)); err != nil {
				return err
			}
		}
		if len(req.GetSettle()) == 0 {
			return nil
		}
		items, err := settlements(req.GetSettle())
		if err != nil {
			return err
		}
		spans := out.startSettles(ctx, items)
		s.b.SettleAsync(ctx, items, func(results []broker.SettleResult, _, _ uint64) {
			endSettles(spans, results)
			out.settled(items, results)
		})
		return nil
	}
	if err := handle(&heraldv1.SubscribeRequest{Settle: first.GetSettle()}); err != nil {
		cancel()
		<-done
		return toConnect(err)
	}
	recvErr := receiveAll(stream, handle)
	select {
	case err := <-done:
		return err
	case err := <-recvErr:
		cancel()
		werr := <-done
		if errors.Is(err, io.EOF) {
			return werr // the caller closed its side: end once the writer is done
		}
		return err
	}
}

// receiveAll reads a bidirectional call's requests on a goroutine of its own and hands
// each to handle, until the request side ends or handle fails; the returned channel
// then receives why (io.EOF when the caller closed its side). The goroutine ends by
// itself once the call's handler has returned and the request body is closed.
func receiveAll[Req, Res any](stream *connect.BidiStream[Req, Res], handle func(*Req) error) <-chan error {
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Receive()
			if err != nil {
				recvErr <- err
				return
			}
			if err := handle(req); err != nil {
				recvErr <- toConnect(err)
				return
			}
		}
	}()
	return recvErr
}

// subscribeWriter is the response side of one Subscribe call.
type subscribeWriter struct {
	stream *connect.BidiStream[heraldv1.SubscribeRequest, heraldv1.SubscribeResponse]
	c      broker.Stream
	binary bool                // matches go out in their binary encoding (SubscribeOpen.binary_match)
	buf    []byte              // the binary matches of the frame being built (run's goroutine only)
	slab   []heraldv1.Delivery // the deliveries of the frame being built, in one array

	mu      sync.Mutex
	results []*heraldv1.SettleResult // settlement outcomes waiting to go out
	wake    chan struct{}

	// With tracing: the trace context of each delivery out (under mu), and the lease
	// spans of the frame being built (run's goroutine only), ended once it is sent.
	tracer trace.Tracer
	traces map[string]string
	leases []trace.Span
}

// traced starts the lease span of a delivery whose match carries a trace context, and
// remembers the context for its settlements.
func (w *subscribeWriter) traced(ev herald.Event) {
	tp, typ := ev.Match.MapGet(herald.AttrTrace), ev.Match.MapGet("_type")
	if tp.Kind() != herald.KindString {
		return
	}
	w.leases = append(w.leases, tracing.StartLease(context.Background(), w.tracer, tp.AsString(), typ.AsString(), ev.DeliveryID, ev.Attempt))
	w.mu.Lock()
	w.traces[ev.DeliveryID] = tp.AsString()
	w.mu.Unlock()
}

// endLeases ends the lease spans of a frame, failed with err when it was not sent.
func (w *subscribeWriter) endLeases(err error) {
	for i, span := range w.leases {
		tracing.End(span, err)
		w.leases[i] = nil
	}
	w.leases = w.leases[:0]
}

// startSettles starts a span for each settlement of a traced delivery (nil for the
// others), and forgets the trace of those that end their delivery.
func (w *subscribeWriter) startSettles(ctx context.Context, items []broker.Settle) []trace.Span {
	if w.tracer == nil {
		return nil
	}
	var spans []trace.Span
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, it := range items {
		tp, ok := w.traces[it.DeliveryID]
		if !ok {
			continue
		}
		if spans == nil {
			spans = make([]trace.Span, len(items))
		}
		spans[i] = tracing.StartSettle(ctx, w.tracer, tp, actionNames[it.Action], it.DeliveryID)
		if it.Action != broker.ActExtend {
			delete(w.traces, it.DeliveryID)
		}
	}
	return spans
}

// endSettles ends the settlement spans with their outcomes.
func endSettles(spans []trace.Span, results []broker.SettleResult) {
	for i, span := range spans {
		if span != nil && i < len(results) {
			tracing.End(span, results[i].Err)
		}
	}
}

// actionNames names the settlements in span names.
var actionNames = map[broker.Action]string{broker.ActAck: "ack", broker.ActNack: "nack", broker.ActReject: "reject", broker.ActExtend: "extend"}

func (w *subscribeWriter) send(r *heraldv1.SubscribeResponse) error { return w.stream.Send(r) }

// settled queues the outcomes of a batch of settlements; it never blocks (it runs on the
// consume engine's completer).
func (w *subscribeWriter) settled(items []broker.Settle, results []broker.SettleResult) {
	slab := make([]heraldv1.SettleResult, len(results)) // one allocation for the batch
	w.mu.Lock()
	for i, r := range results {
		res := &slab[i]
		res.DeliveryId, res.Ok = items[i].DeliveryID, r.Err == nil
		if r.Err != nil {
			res.Error = errorDetail(r.Err)
		} else if !r.Deadline.IsZero() {
			res.Deadline = timestamppb.New(r.Deadline.UTC().Round(time.Microsecond))
		}
		w.results = append(w.results, res)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run writes deliveries and settlement outcomes until ctx ends or the consumer does.
func (w *subscribeWriter) run(ctx context.Context) error {
	defer func() {
		if len(w.leases) > 0 {
			w.endLeases(errors.New("the stream ended before the delivery was sent"))
		}
	}()
	events := w.c.Events()
	for {
		frame := &heraldv1.SubscribeResponse{}
		// Send marshals the frame before it returns, so the next frame can reuse the
		// buffer its matches were encoded in. Its deliveries get an array of their own
		// (sized by what is waiting): a frame's messages are never reused.
		w.buf, w.slab = w.buf[:0], nil
		var end error
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
		case ev, ok := <-events:
			if !ok {
				w.flushResults(frame)
				if len(frame.Settled) > 0 {
					_ = w.send(frame)
				}
				return nil
			}
			w.slab = make([]heraldv1.Delivery, 0, min(len(events)+1, maxEventsPerFrame))
			end = w.add(frame, ev)
			for more := end == nil && len(frame.Deliveries) < maxEventsPerFrame; more; {
				select {
				case ev, ok := <-events:
					if !ok {
						more = false
						break
					}
					end = w.add(frame, ev)
					more = end == nil && len(frame.Deliveries) < maxEventsPerFrame
				default:
					more = false
				}
			}
		}
		w.flushResults(frame)
		if len(frame.Deliveries)+len(frame.Settled)+len(frame.Events) > 0 {
			err := w.send(frame)
			if len(w.leases) > 0 {
				w.endLeases(err)
			}
			if err != nil {
				return err
			}
		}
		if end != nil {
			return end
		}
	}
}

// add puts one consumer event into frame; an error event ends the stream.
func (w *subscribeWriter) add(frame *heraldv1.SubscribeResponse, ev herald.Event) error {
	switch ev.Type {
	case herald.EventConsumed:
		w.slab = append(w.slab, heraldv1.Delivery{DeliveryId: ev.DeliveryID, Attempt: int32(ev.Attempt), Releases: int32(min(ev.Releases, 1<<31-1)), Seq: ev.Seq, Tick: ev.Tick})
		d := &w.slab[len(w.slab)-1]
		if w.binary {
			start := len(w.buf)
			w.buf = ev.Match.AppendBinary(w.buf)
			d.MatchBinary = w.buf[start:len(w.buf):len(w.buf)]
		} else {
			d.Match = convert.ToWire(ev.Match)
		}
		if !ev.Deadline.IsZero() {
			d.Deadline = ev.Deadline.UnixNano()
		}
		frame.Deliveries = append(frame.Deliveries, d)
		if w.tracer != nil {
			w.traced(ev)
		}
	case herald.EventError:
		return eventError(ev)
	default:
		frame.Events = append(frame.Events, toWireEvent(ev, false))
	}
	return nil
}

func (w *subscribeWriter) flushResults(frame *heraldv1.SubscribeResponse) {
	w.mu.Lock()
	frame.Settled, w.results = append(frame.Settled, w.results...), nil
	w.mu.Unlock()
}

// settlements converts the wire's settlements of a batch, refusing a malformed one.
func settlements(in []*heraldv1.Settlement) ([]broker.Settle, error) {
	if err := broker.CheckBatch(len(in)); err != nil {
		return nil, err
	}
	items := make([]broker.Settle, len(in))
	for i, st := range in {
		act, ok := settleActions[st.GetAction()]
		if !ok {
			return nil, herald.Errorf(herald.CodeMalformedRequest, "settlement %d: action %v; want ACK, NACK, REJECT or EXTEND", i, st.GetAction())
		}
		it := broker.Settle{DeliveryID: st.GetDeliveryId(), Action: act}
		var err error
		if d := st.GetDelay(); d != nil {
			if it.Delay, err = duration("delay", d); err != nil {
				return nil, err
			}
		}
		if d := st.GetBy(); d != nil {
			if it.By, err = duration("by", d); err != nil {
				return nil, err
			}
		}
		if err := broker.CheckSettle(i, it, st.GetDelay() != nil, st.GetBy() != nil); err != nil {
			return nil, err
		}
		items[i] = it
	}
	return items, nil
}
