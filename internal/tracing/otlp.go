package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The server's exporter: OTLP over HTTP with the JSON encoding (the protocol's
// http/json), written here on the standard library rather than with OpenTelemetry's
// OTLP exporters, which would bring gRPC and grpc-gateway into the binary.

// EndpointFromEnv returns the URL to post spans to from OpenTelemetry's standard
// variables: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
// OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended; "" when neither is set.
func EndpointFromEnv(getenv func(string) string) string {
	if u := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); u != "" {
		return u
	}
	if u := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); u != "" {
		return strings.TrimSuffix(u, "/") + "/v1/traces"
	}
	return ""
}

// HeadersFromEnv reads OTEL_EXPORTER_OTLP_TRACES_HEADERS, else
// OTEL_EXPORTER_OTLP_HEADERS: comma-separated key=value pairs (an API key, say).
func HeadersFromEnv(getenv func(string) string) map[string]string {
	s := getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
	if s == "" {
		s = getenv("OTEL_EXPORTER_OTLP_HEADERS")
	}
	if s == "" {
		return nil
	}
	h := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); ok && k != "" {
			h[k] = strings.TrimSpace(v)
		}
	}
	return h
}

// Exporting is a tracer provider that sends its spans to an OTLP endpoint in batches.
type Exporting struct {
	*sdktrace.TracerProvider
}

// NewExporting returns a tracer provider whose spans go, in batches, to endpoint (an
// OTLP/HTTP traces URL, e.g. http://collector:4318/v1/traces) with headers, under the
// service name service. Shutdown sends what is left. onError, when set, is told of
// each failed export (OpenTelemetry's error handler, which is process-wide).
func NewExporting(endpoint string, headers map[string]string, service string, onError func(error)) *Exporting {
	if onError != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(onError))
	}
	exp := &exporter{url: endpoint, headers: headers, hc: &http.Client{Timeout: 10 * time.Second}}
	res := resource.NewSchemaless(attribute.String("service.name", service))
	return &Exporting{sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}
}

// exporter posts spans as OTLP JSON.
type exporter struct {
	url     string
	headers map[string]string
	hc      *http.Client
}

func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body, err := json.Marshal(encodeSpans(spans))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return fmt.Errorf("otlp: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("otlp: %s answered %s: %s", e.url, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

func (e *exporter) Shutdown(context.Context) error {
	e.hc.CloseIdleConnections()
	return nil
}

// The OTLP JSON shapes (opentelemetry-proto's JSON mapping: ids in hex, 64-bit
// integers as strings, enums as numbers).
type (
	otlpRequest struct {
		ResourceSpans []otlpResourceSpans `json:"resourceSpans"`
	}
	otlpResourceSpans struct {
		Resource   otlpResource     `json:"resource"`
		ScopeSpans []otlpScopeSpans `json:"scopeSpans"`
	}
	otlpResource struct {
		Attributes []otlpKeyValue `json:"attributes,omitempty"`
	}
	otlpScopeSpans struct {
		Scope otlpScope  `json:"scope"`
		Spans []otlpSpan `json:"spans"`
	}
	otlpScope struct {
		Name    string `json:"name"`
		Version string `json:"version,omitempty"`
	}
	otlpSpan struct {
		TraceID           string         `json:"traceId"`
		SpanID            string         `json:"spanId"`
		TraceState        string         `json:"traceState,omitempty"`
		ParentSpanID      string         `json:"parentSpanId,omitempty"`
		Flags             uint32         `json:"flags,omitempty"`
		Name              string         `json:"name"`
		Kind              int            `json:"kind"`
		StartTimeUnixNano string         `json:"startTimeUnixNano"`
		EndTimeUnixNano   string         `json:"endTimeUnixNano"`
		Attributes        []otlpKeyValue `json:"attributes,omitempty"`
		Events            []otlpEvent    `json:"events,omitempty"`
		Links             []otlpLink     `json:"links,omitempty"`
		Status            otlpStatus     `json:"status"`
	}
	otlpEvent struct {
		TimeUnixNano string         `json:"timeUnixNano"`
		Name         string         `json:"name"`
		Attributes   []otlpKeyValue `json:"attributes,omitempty"`
	}
	otlpLink struct {
		TraceID    string         `json:"traceId"`
		SpanID     string         `json:"spanId"`
		Attributes []otlpKeyValue `json:"attributes,omitempty"`
	}
	otlpStatus struct {
		Code    int    `json:"code,omitempty"`
		Message string `json:"message,omitempty"`
	}
	otlpKeyValue struct {
		Key   string       `json:"key"`
		Value otlpAnyValue `json:"value"`
	}
	otlpAnyValue struct {
		StringValue *string         `json:"stringValue,omitempty"`
		BoolValue   *bool           `json:"boolValue,omitempty"`
		IntValue    *string         `json:"intValue,omitempty"`
		DoubleValue *float64        `json:"doubleValue,omitempty"`
		ArrayValue  *otlpArrayValue `json:"arrayValue,omitempty"`
	}
	otlpArrayValue struct {
		Values []otlpAnyValue `json:"values"`
	}
)

// encodeSpans groups spans by resource and scope, as OTLP nests them.
func encodeSpans(spans []sdktrace.ReadOnlySpan) otlpRequest {
	var req otlpRequest
	resources := map[*resource.Resource]int{}
	scopes := map[[2]int]int{} // (resource index, scope) → scope index
	scopeIDs := map[string]int{}
	for _, s := range spans {
		ri, ok := resources[s.Resource()]
		if !ok {
			ri = len(req.ResourceSpans)
			resources[s.Resource()] = ri
			var attrs []attribute.KeyValue
			if s.Resource() != nil {
				attrs = s.Resource().Attributes()
			}
			req.ResourceSpans = append(req.ResourceSpans, otlpResourceSpans{Resource: otlpResource{Attributes: keyValues(attrs)}})
		}
		sc := s.InstrumentationScope()
		sid, ok := scopeIDs[sc.Name+"\x00"+sc.Version]
		if !ok {
			sid = len(scopeIDs)
			scopeIDs[sc.Name+"\x00"+sc.Version] = sid
		}
		rs := &req.ResourceSpans[ri]
		si, ok := scopes[[2]int{ri, sid}]
		if !ok {
			si = len(rs.ScopeSpans)
			scopes[[2]int{ri, sid}] = si
			rs.ScopeSpans = append(rs.ScopeSpans, otlpScopeSpans{Scope: otlpScope{Name: sc.Name, Version: sc.Version}})
		}
		rs.ScopeSpans[si].Spans = append(rs.ScopeSpans[si].Spans, encodeSpan(s))
	}
	return req
}

func encodeSpan(s sdktrace.ReadOnlySpan) otlpSpan {
	sc := s.SpanContext()
	out := otlpSpan{
		TraceID:           sc.TraceID().String(),
		SpanID:            sc.SpanID().String(),
		TraceState:        sc.TraceState().String(),
		Flags:             uint32(sc.TraceFlags()),
		Name:              s.Name(),
		Kind:              int(s.SpanKind()), // the same numbers as OTLP's SpanKind
		StartTimeUnixNano: unixNano(s.StartTime()),
		EndTimeUnixNano:   unixNano(s.EndTime()),
		Attributes:        keyValues(s.Attributes()),
	}
	if p := s.Parent(); p.SpanID().IsValid() {
		out.ParentSpanID = p.SpanID().String()
		if p.IsRemote() {
			out.Flags |= 0x300 // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE | SPAN_FLAGS_CONTEXT_IS_REMOTE
		} else {
			out.Flags |= 0x100
		}
	}
	for _, e := range s.Events() {
		out.Events = append(out.Events, otlpEvent{TimeUnixNano: unixNano(e.Time), Name: e.Name, Attributes: keyValues(e.Attributes)})
	}
	for _, l := range s.Links() {
		out.Links = append(out.Links, otlpLink{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String(), Attributes: keyValues(l.Attributes)})
	}
	switch st := s.Status(); st.Code {
	case codes.Error:
		out.Status = otlpStatus{Code: 2, Message: st.Description} // STATUS_CODE_ERROR
	case codes.Ok:
		out.Status = otlpStatus{Code: 1} // STATUS_CODE_OK
	}
	return out
}

func unixNano(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func keyValues(attrs []attribute.KeyValue) []otlpKeyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]otlpKeyValue, 0, len(attrs))
	for _, kv := range attrs {
		out = append(out, otlpKeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
	}
	return out
}

func anyValue(v attribute.Value) otlpAnyValue {
	switch v.Type() {
	case attribute.BOOL:
		b := v.AsBool()
		return otlpAnyValue{BoolValue: &b}
	case attribute.INT64:
		s := strconv.FormatInt(v.AsInt64(), 10)
		return otlpAnyValue{IntValue: &s}
	case attribute.FLOAT64:
		f := v.AsFloat64()
		return otlpAnyValue{DoubleValue: &f}
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), attribute.StringValue)
	}
	s := v.Emit()
	return otlpAnyValue{StringValue: &s}
}

func array[T any](xs []T, value func(T) attribute.Value) otlpAnyValue {
	vals := make([]otlpAnyValue, len(xs))
	for i, x := range xs {
		vals[i] = anyValue(value(x))
	}
	return otlpAnyValue{ArrayValue: &otlpArrayValue{Values: vals}}
}

var (
	_ sdktrace.SpanExporter = (*exporter)(nil)
	_ trace.TracerProvider  = (*Exporting)(nil)
)
