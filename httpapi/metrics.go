package httpapi

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/herald-mq/herald"
)

// metrics holds the Prometheus collectors of one Handler.
type metrics struct {
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	rpcs       *prometheus.CounterVec
	rpcLatency *prometheus.HistogramVec
	handler    http.Handler
}

// sources collects the services' own metrics (herald.MetricSource) at each scrape.
type sources []herald.MetricSource

// Describe sends nothing: the set of metrics is the services' to decide, which makes
// this an unchecked collector.
func (sources) Describe(chan<- *prometheus.Desc) {}

func (ss sources) Collect(ch chan<- prometheus.Metric) {
	for _, src := range ss {
		for _, m := range src.Metrics() {
			var labels prometheus.Labels
			if len(m.Labels) > 0 {
				labels = make(prometheus.Labels, len(m.Labels))
				for _, l := range m.Labels {
					labels[l.Name] = l.Value
				}
			}
			desc := prometheus.NewDesc(m.Name, m.Help, nil, labels)
			if h := m.Histogram; h != nil {
				// Prometheus counts its buckets cumulatively.
				buckets := make(map[float64]uint64, len(h.Bounds))
				var below uint64
				for i, b := range h.Bounds {
					below += h.Counts[i]
					buckets[b] = below
				}
				ch <- prometheus.MustNewConstHistogram(desc, h.Count, h.Sum, buckets)
				continue
			}
			kind := prometheus.GaugeValue
			if m.Counter {
				kind = prometheus.CounterValue
			}
			ch <- prometheus.MustNewConstMetric(desc, kind, m.Value)
		}
	}
}

func newMetrics(reg *prometheus.Registry, eng interface{ Position() (seq, tick uint64) }, srcs []herald.MetricSource) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_http_requests_total",
			Help: "HTTP requests served, by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "herald_http_request_duration_seconds",
			Help:    "HTTP request latency, by route and status code.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route", "code"}),
	}
	m.rpcs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_rpc_requests_total",
		Help: "RPCs (gRPC, gRPC-Web and Connect) served, by procedure and code; a stream counts when it ends.",
	}, []string{"procedure", "code"})
	m.rpcLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herald_rpc_request_duration_seconds",
		Help:    "RPC latency, by procedure and code; a stream's is its whole life.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"procedure", "code"})
	reg.MustRegister(m.requests, m.latency, m.rpcs, m.rpcLatency,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "herald_commit_seq",
			Help: "Sequence number of the last committed transaction.",
		}, func() float64 { seq, _ := eng.Position(); return float64(seq) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "herald_tick",
			Help: "Current logical tick.",
		}, func() float64 { _, tick := eng.Position(); return float64(tick) }),
		sources(srcs),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observe(route string, status int, elapsed time.Duration) {
	code := statusLabel(status)
	m.requests.WithLabelValues(route, code).Inc()
	m.latency.WithLabelValues(route, code).Observe(elapsed.Seconds())
}

// ObserveRPC counts one finished RPC in herald_rpc_requests_total and
// herald_rpc_request_duration_seconds: procedure as the RPC service names it
// ("/herald.v1.Herald/Publish"), code its RPC code's name ("ok", "not_found"). The
// server hands it to the RPC service (rpcapi.Options.Observe), so that RPCs show on
// /metrics beside the JSON API's requests.
func (h *Handler) ObserveRPC(procedure, code string, elapsed time.Duration) {
	h.metrics.rpcs.WithLabelValues(procedure, code).Inc()
	h.metrics.rpcLatency.WithLabelValues(procedure, code).Observe(elapsed.Seconds())
}

func (m *metrics) serve(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }
