package herald

import "time"

// Clock is the source of time for every timer in Herald. Production code uses the real
// clock; tests use a manual clock and advance it instead of sleeping.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that delivers the clock's time on its channel once d has
	// elapsed on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer created by a Clock.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was still pending.
	Stop() bool
	// Reset makes a stopped or fired timer fire again after d.
	Reset(d time.Duration)
}
