package herald

import (
	"sync/atomic"
	"time"
)

// Metric is one figure a service reports for monitoring; the HTTP API serves them on
// /metrics in the Prometheus text format.
type Metric struct {
	Name    string // e.g. "herald_consume_acked_total"
	Help    string // one line: what it counts
	Counter bool   // a running total since start; otherwise a gauge (a current level)
	Value   float64
	// Histogram, when set, makes the metric a distribution (of durations in seconds,
	// unless its name says otherwise); Counter and Value are then unused.
	Histogram *Histogram
	// Labels tell series of one name apart (a consume group's, a queue's). Every series
	// of a name carries the same label names, in the same order, and the same Help;
	// nil for a name with one series.
	Labels []Label
}

// Label is one label of a metric's series: its name and its value.
type Label struct {
	Name, Value string
}

// MetricSource reports a service's metrics as of the call.
type MetricSource interface {
	Metrics() []Metric
}

// Histogram is a distribution as of one reading: Counts[i] observations of at most
// Bounds[i] seconds (and more than Bounds[i-1]), and the count and sum of all of them,
// those above the last bound included.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64
}

// Durations accumulates durations for a Histogram. Observe and Read may run
// concurrently.
type Durations struct {
	bounds []float64
	counts []atomic.Uint64
	count  atomic.Uint64
	sum    atomic.Int64 // nanoseconds
}

// NewDurations returns an empty distribution with the given upper bounds, in seconds,
// ascending.
func NewDurations(bounds ...float64) *Durations {
	return &Durations{bounds: bounds, counts: make([]atomic.Uint64, len(bounds))}
}

// Observe adds one duration.
func (d *Durations) Observe(v time.Duration) {
	s := v.Seconds()
	for i, b := range d.bounds {
		if s <= b {
			d.counts[i].Add(1)
			break
		}
	}
	d.count.Add(1)
	d.sum.Add(int64(v))
}

// Read returns the distribution so far.
func (d *Durations) Read() *Histogram {
	h := &Histogram{Bounds: d.bounds, Counts: make([]uint64, len(d.counts))}
	for i := range d.counts {
		h.Counts[i] = d.counts[i].Load()
	}
	h.Count = d.count.Load()
	h.Sum = time.Duration(d.sum.Load()).Seconds()
	return h
}
