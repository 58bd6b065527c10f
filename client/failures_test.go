package client

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/clock"
)

// capture is a slog handler that keeps the records it is given.
type capture struct {
	mu      sync.Mutex
	records []slog.Record
	added   chan struct{}
}

func newCapture() *capture { return &capture{added: make(chan struct{}, 1000)} }

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.records = append(c.records, r.Clone())
	c.mu.Unlock()
	c.added <- struct{}{}
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }

// at returns the records at level l.
func (c *capture) at(l slog.Level) []slog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []slog.Record
	for _, r := range c.records {
		if r.Level == l {
			out = append(out, r)
		}
	}
	return out
}

func attrOf(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// A hundred failures make a hundred DEBUG lines and one report per interval, at the
// level the subscription set; an interval without failures reports nothing.
func TestFailuresReportedOncePerInterval(t *testing.T) {
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newCapture()
	r := newFailureReport(slog.New(h), subOptions{logLevel: new(slog.LevelError), reportEvery: time.Minute}, clk)
	r.start()
	for i := range 100 {
		act := actNack
		if i%4 == 0 {
			act = actReject
		}
		r.failure(&Message{DeliveryID: "d", Attempt: 1}, errors.New("boom"), act, i == 0)
	}
	r.settleFailed(&Message{DeliveryID: "d"}, errors.New("lost"))
	if n := len(h.at(slog.LevelDebug)); n != 101 {
		t.Fatalf("%d DEBUG lines, want one per failure (101)", n)
	}
	if n := len(h.at(slog.LevelError)) + len(h.at(slog.LevelWarn)); n != 0 {
		t.Fatalf("%d reports before the interval passed", n)
	}
	clk.Advance(time.Minute)
	for len(h.at(slog.LevelError)) == 0 {
		<-h.added
	}
	rep := h.at(slog.LevelError)[0]
	for key, want := range map[string]int64{"failed": 100, "panicked": 1, "nacked": 75, "rejected": 25, "settlements_failed": 1} {
		if got := attrOf(rep, key).Int64(); got != want {
			t.Errorf("%s = %d, want %d", key, got, want)
		}
	}
	clk.Advance(time.Minute) // nothing failed meanwhile: no report
	r.failure(&Message{DeliveryID: "d"}, errors.New("last"), actNone, false)
	r.close() // the last report comes as the subscription ends
	if reps := h.at(slog.LevelError); len(reps) != 2 || attrOf(reps[1], "failed").Int64() != 1 {
		t.Fatalf("reports %v, want a second one of 1 failure at close", reps)
	}
}
