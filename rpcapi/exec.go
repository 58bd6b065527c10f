package rpcapi

import (
	"context"
	"errors"
	"io"
	"strings"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/api/convert"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/internal/tracing"
)

// Exec runs query text or a prepared statement with typed parameters and answers with
// typed values.
func (s *Service) Exec(ctx context.Context, req *connect.Request[heraldv1.ExecRequest]) (*connect.Response[heraldv1.ExecResponse], error) {
	m := req.Msg
	params, err := convert.FromWireMap(m.GetParams(), "parameter")
	if err != nil {
		return nil, toConnect(err)
	}
	var resp *herald.Response
	switch {
	case m.GetStatement() != "" && m.GetQuery() != "":
		return nil, toConnect(herald.Errorf(herald.CodeMalformedRequest, "give either query text or a prepared statement, not both"))
	case m.GetStatement() != "":
		resp, err = s.b.ExecPrepared(ctx, m.GetSession(), m.GetStatement(), params)
		if err != nil {
			return nil, toConnect(err)
		}
	case strings.TrimSpace(m.GetQuery()) == "":
		return nil, toConnect(herald.Errorf(herald.CodeEmptyQuery, "the query is empty"))
	default:
		if resp, err = s.b.Exec(ctx, m.GetSession(), m.GetQuery(), params); err != nil {
			return nil, toConnect(err)
		}
	}
	out := &heraldv1.ExecResponse{Seq: resp.Seq, Tick: resp.Tick, Results: make([]*heraldv1.TypedResult, len(resp.Results))}
	for i, res := range resp.Results {
		tr := &heraldv1.TypedResult{Columns: res.Columns, Stats: toProtoStats(res.Stats), Rows: make([]*heraldv1.ValueList, len(res.Rows))}
		for j, row := range res.Rows {
			vl := &heraldv1.ValueList{Values: make([]*heraldv1.Value, len(row))}
			for k, v := range row {
				vl.Values[k] = convert.ToWire(v)
			}
			tr.Rows[j] = vl
		}
		out.Results[i] = tr
	}
	return connect.NewResponse(out), nil
}

// Prepare parses statements once for Exec to run by name.
func (s *Service) Prepare(ctx context.Context, req *connect.Request[heraldv1.PrepareRequest]) (*connect.Response[heraldv1.PrepareResponse], error) {
	p, err := s.b.Prepare(ctx, req.Msg.GetQuery())
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&heraldv1.PrepareResponse{Statement: p.Name, Params: p.Params}), nil
}

// Unprepare drops a prepared statement; an unknown name is not_found (E4010).
func (s *Service) Unprepare(ctx context.Context, req *connect.Request[heraldv1.UnprepareRequest]) (*connect.Response[heraldv1.UnprepareResponse], error) {
	if !s.b.Unprepare(ctx, req.Msg.GetStatement()) {
		return nil, toConnect(herald.Errorf(herald.CodeUnknownStatement, "no prepared statement %q", req.Msg.GetStatement()))
	}
	return connect.NewResponse(&heraldv1.UnprepareResponse{}), nil
}

func toProtoStats(st herald.Stats) *heraldv1.Stats {
	return &heraldv1.Stats{
		NodesCreated:  int64(st.NodesCreated),
		NodesDeleted:  int64(st.NodesDeleted),
		EdgesCreated:  int64(st.EdgesCreated),
		EdgesDeleted:  int64(st.EdgesDeleted),
		AttributesSet: int64(st.AttrsSet),
		TypesDeclared: int64(st.TypesDeclared),
		RowsScanned:   int64(st.RowsScanned),
		Plan:          st.Plan,
	}
}

// MaxPublishFrame bounds the messages of one publish request.
const MaxPublishFrame = 10000

// publishesInFlight bounds the frames of one Publish call applied but not yet
// acknowledged (waiting for their sync).
const publishesInFlight = 64

// Publish commits each request frame's messages together and answers each message, in
// order, once its commit is durable. Frames are applied as they arrive: the next one is
// committed while the last one syncs.
func (s *Service) Publish(ctx context.Context, stream *connect.BidiStream[heraldv1.PublishRequest, heraldv1.PublishResponse]) error {
	type frame struct {
		acks    []*heraldv1.PublishAck
		durable func(context.Context) error
		spans   []commitSpan // of the messages that carry a trace, when tracing
	}
	// Sent with the first acknowledgements: the client may then send attrs_binary.
	stream.ResponseHeader().Set(convert.HeaderBinaryAttrs, "1")
	frames := make(chan frame, publishesInFlight)
	sent := make(chan error, 1)
	var hold *streamHold
	if p := herald.PrincipalFrom(ctx); p != nil {
		hold = &streamHold{f: s.pubs, name: p.Name}
		defer hold.end() // the sender has answered or dropped every frame by then
	}
	go func() {
		var err error
		for f := range frames {
			if err != nil {
				continue // the call is failing; drain
			}
			if derr := f.durable(ctx); derr != nil {
				detail := errorDetail(derr)
				for _, a := range f.acks {
					if a.Error == nil {
						a.Id, a.Seq, a.Tick, a.Error = "", 0, 0, detail
					}
				}
			}
			endCommitSpans(f.spans, f.acks)
			err = stream.Send(&heraldv1.PublishResponse{Acks: f.acks})
		}
		sent <- err
	}()
	fail := func(err error) error {
		close(frames)
		<-sent
		return err
	}
	// Frames are read on their own goroutine so that CloseStreams can end the call
	// while a client keeps its stream open: what was received is answered, the rest
	// fails with E5003 and the client publishes it again elsewhere.
	reqs, recvErr := make(chan *heraldv1.PublishRequest), make(chan error, 1)
	rctx, stopRecv := context.WithCancel(ctx)
	defer stopRecv()
	go func() {
		for {
			req, err := stream.Receive()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- req:
			case <-rctx.Done():
				return
			}
		}
	}()
	for {
		var req *heraldv1.PublishRequest
		select {
		case req = <-reqs:
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				close(frames)
				return <-sent
			}
			return fail(err)
		case <-s.streams.Done():
			return fail(toConnect(herald.Errorf(herald.CodeShuttingDown, "the server is stopping")))
		}
		in := req.GetMessages()
		if len(in) > MaxPublishFrame {
			return fail(toConnect(herald.Errorf(herald.CodeMalformedRequest, "%d messages in one frame; at most %d", len(in), MaxPublishFrame)))
		}
		acks := make([]*heraldv1.PublishAck, len(in))
		var spans []commitSpan
		msgs := make([]herald.Publication, 0, len(in))
		idx := make([]int, 0, len(in))
		for i, m := range in {
			acks[i] = &heraldv1.PublishAck{Ref: m.GetRef()}
			attrs, err := publishedAttrs(m)
			if err == nil && m.GetType() == "" {
				err = herald.Errorf(herald.CodeMalformedRequest, "a message needs a node type")
			}
			if err != nil {
				acks[i].Error = errorDetail(err)
				continue
			}
			msgs = append(msgs, herald.Publication{ID: herald.NodeID(m.GetId()), Type: m.GetType(), Attrs: attrs})
			idx = append(idx, i)
			if s.tracer != nil {
				if tp := attrs[herald.AttrTrace]; tp.Kind() == herald.KindString {
					if span := tracing.StartCommit(ctx, s.tracer, tp.AsString(), m.GetType()); span != nil {
						spans = append(spans, commitSpan{span: span, ack: i})
					}
				}
			}
		}
		if n := len(msgs); n > 0 && !hold.take(n) {
			refused := errorDetail(herald.Errorf(herald.CodeRateLimited, "%s has %d or more published messages not yet durable; wait for their acknowledgements", herald.PrincipalFrom(ctx).Name, s.pubs.max))
			for _, i := range idx {
				acks[i].Error = refused
			}
			select {
			case frames <- frame{acks: acks, durable: func(context.Context) error { return nil }, spans: spans}:
			case err := <-sent:
				close(frames)
				return err
			}
			continue
		}
		out, durable, err := s.b.PublishAsync(ctx, req.GetSession(), msgs)
		if err != nil {
			hold.done(len(msgs))
			for _, cs := range spans {
				tracing.EndCommit(cs.span, "", 0, err)
			}
			return fail(toConnect(err))
		}
		if n := len(msgs); hold != nil && n > 0 {
			d := durable
			durable = func(ctx context.Context) error {
				defer hold.done(n)
				return d(ctx)
			}
		}
		for j, r := range out {
			a := acks[idx[j]]
			if r.Err != nil {
				a.Error = errorDetail(r.Err)
				continue
			}
			a.Id, a.Seq, a.Tick = string(r.ID), r.Seq, r.Tick
		}
		select {
		case frames <- frame{acks: acks, durable: durable, spans: spans}:
		case err := <-sent:
			close(frames)
			return err
		}
	}
}

// commitSpan is the span of committing one published message, and the index of its
// acknowledgement in the frame.
type commitSpan struct {
	span trace.Span
	ack  int
}

// endCommitSpans ends the spans of a frame's messages with their outcomes.
func endCommitSpans(spans []commitSpan, acks []*heraldv1.PublishAck) {
	for _, cs := range spans {
		a := acks[cs.ack]
		var err error
		if d := a.GetError(); d != nil {
			err = &herald.Error{Code: herald.Code(d.GetCode()), Message: d.GetMessage()}
		}
		tracing.EndCommit(cs.span, a.GetId(), a.GetSeq(), err)
	}
}

// publishedAttrs decodes a message's attributes from whichever form it was sent in.
func publishedAttrs(m *heraldv1.PublishMessage) (map[string]herald.Value, error) {
	b := m.GetAttrsBinary()
	if len(b) == 0 {
		return convert.FromWireMap(m.GetAttrs(), "attribute")
	}
	if len(m.GetAttrs()) > 0 {
		return nil, herald.Errorf(herald.CodeMalformedRequest, "a message sets attrs or attrs_binary, not both")
	}
	return convert.AttrsFromBinary(b, "attribute")
}
