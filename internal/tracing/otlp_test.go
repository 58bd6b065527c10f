package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestOTLPExport: the exporting provider posts its spans as OTLP JSON to the endpoint,
// with the headers, the service name, hex ids, the parent, the kind, attributes,
// events and an error status in OTLP's numbering.
func TestOTLPExport(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies [][]byte
		key    string
		ctype  string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		key, ctype = r.Header.Get("X-Key"), r.Header.Get("Content-Type")
		mu.Unlock()
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	endpoint := EndpointFromEnv(func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL + "/"}[k]
	})
	headers := HeadersFromEnv(func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "X-Key=secret, bad"}[k]
	})
	tp := NewExporting(endpoint, headers, "herald", nil)
	tr := Tracer(tp)
	span := StartCommit(context.Background(), tr, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "Job")
	span.AddEvent("ack")
	EndCommit(span, "", 0, errors.New("refused"))
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || key != "secret" || ctype != "application/json" {
		t.Fatalf("%d posts, X-Key %q, Content-Type %q; want one, secret, application/json", len(bodies), key, ctype)
	}
	var req struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []struct {
					Key   string
					Value map[string]any
				}
			}
			ScopeSpans []struct {
				Scope struct{ Name string }
				Spans []struct {
					TraceID, SpanID, ParentSpanID, Name string
					Kind                                int
					StartTimeUnixNano, EndTimeUnixNano  string
					Flags                               int
					Attributes                          []struct {
						Key   string
						Value map[string]any
					}
					Events []struct{ Name string }
					Status struct {
						Code    int
						Message string
					}
				}
			}
		}
	}
	if err := json.Unmarshal(bodies[0], &req); err != nil {
		t.Fatalf("%v: %s", err, bodies[0])
	}
	rs := req.ResourceSpans[0]
	if a := rs.Resource.Attributes; len(a) != 1 || a[0].Key != "service.name" || a[0].Value["stringValue"] != "herald" {
		t.Errorf("resource %+v", a)
	}
	ss := rs.ScopeSpans[0]
	if ss.Scope.Name != Scope || len(ss.Spans) != 1 {
		t.Fatalf("scope %q with %d spans", ss.Scope.Name, len(ss.Spans))
	}
	s := ss.Spans[0]
	if s.TraceID != "0af7651916cd43dd8448eb211c80319c" || s.ParentSpanID != "b7ad6b7169203331" || len(s.SpanID) != 16 || s.Name != "commit Job" || s.Kind != 2 {
		t.Errorf("span %+v", s)
	}
	if s.Flags&0x300 != 0x300 || s.StartTimeUnixNano == "0" || s.EndTimeUnixNano < s.StartTimeUnixNano {
		t.Errorf("flags %#x, times %s..%s", s.Flags, s.StartTimeUnixNano, s.EndTimeUnixNano)
	}
	if s.Status.Code != 2 || s.Status.Message != "refused" || len(s.Events) < 1 || s.Events[0].Name != "ack" {
		t.Errorf("status %+v events %+v", s.Status, s.Events)
	}
	attrs := map[string]map[string]any{}
	for _, a := range s.Attributes {
		attrs[a.Key] = a.Value
	}
	if attrs["messaging.destination.name"]["stringValue"] != "Job" || attrs["messaging.system"]["stringValue"] != "herald" {
		t.Errorf("attributes %v", attrs)
	}
}

// TestOTLPEndpointFromEnv: the traces endpoint wins over the base one, which gets
// /v1/traces; neither set is no exporting.
func TestOTLPEndpointFromEnv(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if EndpointFromEnv(get) != "" {
		t.Fatal("an endpoint without the variables")
	}
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://c:4318"
	if got := EndpointFromEnv(get); got != "http://c:4318/v1/traces" {
		t.Fatalf("base endpoint: %q", got)
	}
	env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://t:4318/custom"
	if got := EndpointFromEnv(get); got != "http://t:4318/custom" {
		t.Fatalf("traces endpoint: %q", got)
	}
}

// TestOTLPExportFailure: an endpoint that refuses the spans is reported to onError,
// with its status and answer, and the provider shuts down all the same.
func TestOTLPExportFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no room", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	errs := make(chan error, 4)
	tp := NewExporting(srv.URL+"/v1/traces", nil, "herald", func(err error) { errs <- err })
	_, span := Tracer(tp).Start(context.Background(), "s")
	span.End()
	_ = tp.Shutdown(context.Background())
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "no room") {
			t.Fatalf("onError got %v", err)
		}
	default:
		t.Fatal("the failed export was not reported")
	}
}
