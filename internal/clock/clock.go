// Package clock provides the two herald.Clock implementations: the real wall clock and a
// manual clock that only moves when a test advances it.
// Every timer in Herald reads one of these, so tests step time instead of sleeping.
package clock

import (
	"time"

	"github.com/herald-mq/herald"
)

// Real returns the wall clock, backed by package time.
func Real() herald.Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) herald.Timer {
	return &realTimer{t: time.NewTimer(d)}
}

type realTimer struct{ t *time.Timer }

func (r *realTimer) C() <-chan time.Time { return r.t.C }
func (r *realTimer) Stop() bool          { return r.t.Stop() }

// Reset re-arms the timer. Since Go 1.23 a stopped or fired timer's channel holds no
// stale value after Reset, so no draining is needed.
func (r *realTimer) Reset(d time.Duration) { r.t.Reset(d) }
