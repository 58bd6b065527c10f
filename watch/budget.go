package watch

import (
	"sync"
	"time"

	"github.com/herald-mq/herald"
)

// budget bounds the time streams spend turning change sets into events: at most share
// of every window. Past it, the stream holding the apply slot waits for the next
// window, and so does every stream behind it, parked: fan-out then lags (best-effort
// watches show gaps, reliable ones catch up later) and the CPUs are the writers'.
// Work is counted when it ends, so a window can be overspent; what it overspent is
// carried into the windows after it, which wait until it is paid. The share then holds
// over time even with windows short next to a unit of work. At most maxOwedWindows are
// owed: the time is wall time, and a stall of the process while a slot was held (a
// pause of the machine, say) must not stop fan-out for many times its length.
type budget struct {
	clock  herald.Clock
	window time.Duration
	allow  time.Duration // of each window

	mu    sync.Mutex
	start time.Time // of the current window
	used  time.Duration
	total time.Duration // everything spent since the start
}

// maxOwedWindows bounds the windows a budget may owe: with 2 ms windows, fan-out waits
// 22 ms at the most.
const maxOwedWindows = 10

func newBudget(clock herald.Clock, window time.Duration, share float64) *budget {
	return &budget{clock: clock, window: window, allow: time.Duration(float64(window) * share)}
}

// spend records d of work, done by a slot holder.
func (b *budget) spend(d time.Duration) {
	b.mu.Lock()
	b.used += d
	b.total += d
	b.mu.Unlock()
}

// spent returns everything spent since the start.
func (b *budget) spent() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// await waits until the current window has budget left; false when done closed first.
func (b *budget) await(done <-chan struct{}) bool {
	for {
		d := b.wait()
		if d <= 0 {
			return true
		}
		t := b.clock.NewTimer(d)
		select {
		case <-t.C():
		case <-done:
			t.Stop()
			return false
		}
	}
}

// wait returns how long a slot holder must wait before working: zero while the current
// window has budget left, else until the window in which what was spent past the
// earlier windows' allowance is paid.
func (b *budget) wait() time.Duration {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.allow <= 0 {
		return 0
	}
	if passed := now.Sub(b.start) / b.window; passed > 0 {
		if passed > b.used/b.allow {
			b.used = 0
		} else {
			b.used -= passed * b.allow
		}
		b.start = b.start.Add(passed * b.window)
		if !now.Before(b.start.Add(b.window)) {
			b.start = now // the gap was past what a Duration holds (the zero start)
		}
	}
	if b.used < b.allow {
		return 0
	}
	b.used = min(b.used, (maxOwedWindows+1)*b.allow)
	ahead := b.used / b.allow // windows until used < allow
	return b.start.Add(ahead * b.window).Sub(now)
}
