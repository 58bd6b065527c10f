// Package tracing is Herald's one use of OpenTelemetry: the spans of a message's
// life — its publish in the client, its commit on the server, its processing in a
// consumer — and the W3C trace context that joins them into one trace.
//
// The context rides with the message as the attribute herald.AttrTrace (`_trace`), a
// W3C traceparent (version 00: trace id, span id, flags). The message's node stores it
// like any attribute, so it outlives a restart and reaches a consumer however late;
// a delivery that returns the node (`RETURN m`) carries it back.
//
// Every function here takes a tracer the caller got from Tracer; with OpenTelemetry's
// global provider left unset they cost a non-recording span each and record nothing.
package tracing

import (
	"context"
	"encoding/hex"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/herald-mq/herald"
)

// Scope is the instrumentation scope of Herald's spans.
const Scope = "github.com/herald-mq/herald"

// Attribute keys of Herald's spans, after OpenTelemetry's messaging conventions.
const (
	keySystem      = attribute.Key("messaging.system")
	keyOperation   = attribute.Key("messaging.operation.type")
	keyDestination = attribute.Key("messaging.destination.name")
	keyMessageID   = attribute.Key("messaging.message.id")
	keyDeliveryID  = attribute.Key("herald.delivery_id")
	keyAttempt     = attribute.Key("herald.attempt")
	keySeq         = attribute.Key("herald.seq")
	keyCode        = attribute.Key("herald.code")
)

// The span kinds' start options, made once.
var (
	producer = trace.WithSpanKind(trace.SpanKindProducer)
	server   = trace.WithSpanKind(trace.SpanKindServer)
	consumer = trace.WithSpanKind(trace.SpanKindConsumer)
)

// Tracer returns the tracer of Herald's spans from tp, or from OpenTelemetry's global
// provider when tp is nil (a provider that records nothing until a program sets one).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(Scope)
}

// Traceparent returns the W3C traceparent of the span in ctx, or "" when ctx has none.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
	return string(b)
}

// parse reads a W3C traceparent (version 00, or a later version's first four fields)
// into a remote span context; ok is false when it is malformed.
func parse(traceparent string) (sc trace.SpanContext, ok bool) {
	if len(traceparent) < 55 || traceparent[2] != '-' || traceparent[35] != '-' || traceparent[52] != '-' {
		return sc, false
	}
	version := traceparent[:2]
	if version == "ff" || (version == "00" && len(traceparent) != 55) || (len(traceparent) > 55 && traceparent[55] != '-') {
		return sc, false
	}
	var v [1]byte
	if _, err := hex.Decode(v[:], []byte(version)); err != nil {
		return sc, false
	}
	tid, err := trace.TraceIDFromHex(traceparent[3:35])
	if err != nil {
		return sc, false
	}
	sid, err := trace.SpanIDFromHex(traceparent[36:52])
	if err != nil {
		return sc, false
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(traceparent[53:55])); err != nil {
		return sc, false
	}
	sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true})
	return sc, sc.IsValid()
}

// Remote returns ctx with the span context of traceparent as its remote parent, or ctx
// itself when traceparent is empty or malformed.
func Remote(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	sc, ok := parse(traceparent)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// StartPublish starts the producer span of publishing a message of type typ, a child
// of ctx's span. It returns the span and the traceparent to store with the message
// ("" when the span has no valid context: nothing then is stored).
func StartPublish(ctx context.Context, tr trace.Tracer, typ string) (trace.Span, string) {
	ctx, span := tr.Start(ctx, "publish "+typ, producer)
	if span.IsRecording() {
		span.SetAttributes(keySystem.String("herald"), keyOperation.String("send"), keyDestination.String(typ))
	}
	return span, Traceparent(ctx)
}

// EndPublish ends a producer span with the publish's outcome: the new node's id and
// the seq of its commit, or the error.
func EndPublish(span trace.Span, id string, seq uint64, err error) {
	if err != nil {
		fail(span, err)
	} else if span.IsRecording() {
		span.SetAttributes(keyMessageID.String(id), keySeq.Int64(int64(seq)))
	}
	span.End()
}

// StartCommit starts the server's span of committing a published message of type typ,
// a child of the publisher's span (traceparent). It returns nil when traceparent is
// empty: a message published outside a trace gets no span.
func StartCommit(ctx context.Context, tr trace.Tracer, traceparent, typ string) trace.Span {
	if traceparent == "" {
		return nil
	}
	_, span := tr.Start(Remote(ctx, traceparent), "commit "+typ, server)
	if span.IsRecording() {
		span.SetAttributes(keySystem.String("herald"), keyOperation.String("publish"), keyDestination.String(typ))
	}
	return span
}

// EndCommit ends a commit span with its outcome, as EndPublish does.
func EndCommit(span trace.Span, id string, seq uint64, err error) {
	if span != nil {
		EndPublish(span, id, seq, err)
	}
}

// StartLease starts the server's span of leasing a delivery of a message of type typ
// to a consumer, a child of the publisher's span (traceparent); End ends it once
// the delivery is sent.
func StartLease(ctx context.Context, tr trace.Tracer, traceparent, typ, deliveryID string, attempt int) trace.Span {
	name := "lease"
	if typ != "" {
		name = "lease " + typ
	}
	_, span := tr.Start(Remote(ctx, traceparent), name, server)
	if span.IsRecording() {
		span.SetAttributes(keySystem.String("herald"), keyOperation.String("receive"),
			keyDeliveryID.String(deliveryID), keyAttempt.Int(attempt))
		if typ != "" {
			span.SetAttributes(keyDestination.String(typ))
		}
	}
	return span
}

// StartSettle starts the server's span of a settlement (how: ack, nack, reject, extend)
// of a traced delivery, a child of the publisher's span; End ends it once the
// settlement is durable, with its outcome.
func StartSettle(ctx context.Context, tr trace.Tracer, traceparent, how, deliveryID string) trace.Span {
	_, span := tr.Start(Remote(ctx, traceparent), "settle "+how, server)
	if span.IsRecording() {
		span.SetAttributes(keySystem.String("herald"), keyOperation.String("settle"), keyDeliveryID.String(deliveryID))
	}
	return span
}

// StartProcess starts a consumer's span of processing one delivery, a child of the
// publisher's span (traceparent) when the delivery carries one, and returns ctx with
// it for the handler. typ is the message's node type and id its id ("" when the
// delivery does not say).
func StartProcess(ctx context.Context, tr trace.Tracer, traceparent, typ, id, deliveryID string, attempt int) (context.Context, trace.Span) {
	name := "process"
	if typ != "" {
		name = "process " + typ
	}
	ctx, span := tr.Start(Remote(ctx, traceparent), name, consumer)
	if span.IsRecording() {
		span.SetAttributes(keySystem.String("herald"), keyOperation.String("process"),
			keyDeliveryID.String(deliveryID), keyAttempt.Int(attempt))
		if typ != "" {
			span.SetAttributes(keyDestination.String(typ))
		}
		if id != "" {
			span.SetAttributes(keyMessageID.String(id))
		}
	}
	return ctx, span
}

// End ends a lease or settle span, failed with err when it is not nil.
func End(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		fail(span, err)
	}
	span.End()
}

// Settled records a settlement of the delivery as an event of its span: how ("ack",
// "nack", "reject", "extend", "expired") and, when it failed, why.
func Settled(span trace.Span, how string, err error) {
	if span == nil || !span.IsRecording() {
		return
	}
	if err != nil {
		span.AddEvent(how, trace.WithAttributes(attribute.String("error", err.Error())))
		return
	}
	span.AddEvent(how)
}

// Failed marks span failed with err (a handler's error).
func Failed(span trace.Span, err error) {
	if span != nil && err != nil {
		fail(span, err)
	}
}

func fail(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	var he *herald.Error
	if errors.As(err, &he) && he.Code != "" {
		span.SetAttributes(keyCode.String(string(he.Code)))
	}
}

// FromMatch returns the traceparent a delivery's match carries, and the message's type
// and id: from the match itself when it is the node (`RETURN m`), else from a column that
// is a node with one.
func FromMatch(match map[string]any) (traceparent, typ, id string) {
	if tp, ok := match[herald.AttrTrace].(string); ok {
		typ, _ = match["_type"].(string)
		id, _ = match["id"].(string)
		return tp, typ, id
	}
	for _, v := range match {
		if node, ok := v.(map[string]any); ok {
			if tp, ok := node[herald.AttrTrace].(string); ok {
				typ, _ = node["_type"].(string)
				id, _ = node["id"].(string)
				return tp, typ, id
			}
		}
	}
	typ, _ = match["_type"].(string)
	id, _ = match["id"].(string)
	return "", typ, id
}
