package herald

// Metric is one figure a service reports for monitoring; the HTTP API serves them on
// /metrics in the Prometheus text format.
type Metric struct {
	Name    string // e.g. "herald_consume_acked_total"
	Help    string // one line: what it counts
	Counter bool   // a running total since start; otherwise a gauge (a current level)
	Value   float64
}

// MetricSource reports a service's metrics as of the call.
type MetricSource interface {
	Metrics() []Metric
}
