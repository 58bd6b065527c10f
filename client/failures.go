package client

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/herald-mq/herald"
)

// A subscription whose handler fails on every message would write a line per message
// if it logged each failure at WARN: thousands a second, drowning everything else in
// the log. So failures are counted, and reported together once per interval — one line
// saying how many failed and how they were settled, with the last error — and one by
// one only at DEBUG.

// DefaultReportInterval is how often a subscription reports its failed attempts, when
// there were any.
const DefaultReportInterval = 30 * time.Second

// WithLogLevel sets the level of the subscription's report of failed attempts (one
// line per interval, see WithReportInterval); the default is slog.LevelWarn. Each
// failure is also logged on its own at slog.LevelDebug.
func WithLogLevel(l slog.Level) SubscribeOption {
	return func(o *subOptions) { o.logLevel = &l }
}

// WithReportInterval sets how often the subscription reports its failed attempts;
// the default is DefaultReportInterval. The last report is made as it ends.
func WithReportInterval(d time.Duration) SubscribeOption {
	return func(o *subOptions) { o.reportEvery = d }
}

// failureReport counts a subscription's failed attempts and logs them once per
// interval. Its goroutine runs from start to stop.
type failureReport struct {
	log   *slog.Logger
	level slog.Level
	every time.Duration
	clock herald.Clock

	mu     sync.Mutex
	counts failureCounts
	stop   chan struct{}
	done   chan struct{}
}

// failureCounts are the failures since the last report.
type failureCounts struct {
	failed   int // handlers that returned an error or panicked
	panicked int
	nacked   int // failures settled by NACK (retried)
	rejected int // failures settled by reject (dead-lettered)
	unsettle int // automatic settlements that failed
	last     error
}

func newFailureReport(log *slog.Logger, o subOptions, clock herald.Clock) *failureReport {
	r := &failureReport{log: log, level: slog.LevelWarn, every: o.reportEvery, clock: clock}
	if o.logLevel != nil {
		r.level = *o.logLevel
	}
	if r.every <= 0 {
		r.every = DefaultReportInterval
	}
	return r
}

// start arms the timer and starts the reporting goroutine.
func (r *failureReport) start() {
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go r.loop(r.clock.NewTimer(r.every))
}

func (r *failureReport) loop(t herald.Timer) {
	defer close(r.done)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			r.flush()
			t.Reset(r.every)
		case <-r.stop:
			return
		}
	}
}

// close stops the goroutine and makes the last report.
func (r *failureReport) close() {
	if r.stop != nil {
		close(r.stop)
		<-r.done
	}
	r.flush()
}

// failure records a failed handler and what it was settled as (actNone: nothing
// automatic), and logs it at DEBUG.
func (r *failureReport) failure(m *Message, err error, act action, panicked bool) {
	r.mu.Lock()
	c := &r.counts
	c.failed++
	c.last = err
	if panicked {
		c.panicked++
	}
	switch act {
	case actNack:
		c.nacked++
	case actReject:
		c.rejected++
	}
	r.mu.Unlock()
	if r.log.Enabled(context.Background(), slog.LevelDebug) {
		args := []any{"delivery_id", m.DeliveryID, "attempt", m.Attempt, "err", err}
		if pe, ok := err.(*PanicError); ok {
			args = append(args, "stack", string(pe.Stack))
		}
		r.log.Debug("handler failed", args...)
	}
}

// settleFailed records an automatic settlement the server did not take.
func (r *failureReport) settleFailed(m *Message, err error) {
	r.mu.Lock()
	r.counts.unsettle++
	r.counts.last = err
	r.mu.Unlock()
	r.log.Debug("automatic settlement failed; the message will be redelivered", "delivery_id", m.DeliveryID, "err", err)
}

// flush logs the failures since the last report, if there were any.
func (r *failureReport) flush() {
	r.mu.Lock()
	c := r.counts
	r.counts = failureCounts{}
	r.mu.Unlock()
	if c.failed == 0 && c.unsettle == 0 {
		return
	}
	r.log.Log(context.Background(), r.level, "failed attempts since the last report",
		"failed", c.failed, "panicked", c.panicked, "nacked", c.nacked, "rejected", c.rejected,
		"settlements_failed", c.unsettle, "last_err", c.last, "interval", r.every)
}
