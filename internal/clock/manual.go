package clock

import (
	"sync"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/indexheap"
)

// Manual is a clock whose time moves only through Advance and Set. Timers created from
// it fire, in deadline order, when the clock passes their deadline. It is safe for
// concurrent use.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers indexheap.Heap[manualTimer]
	nextID uint64
}

var _ herald.Clock = (*Manual)(nil)

// NewManual returns a manual clock reading start.
func NewManual(start time.Time) *Manual {
	return &Manual{now: start, timers: indexheap.New(earlier, func(t *manualTimer) *int { return &t.index })}
}

// Now returns the clock's current time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// NewTimer returns a timer that fires once the clock has advanced by d. A timer with
// d <= 0 fires immediately.
func (m *Manual) NewTimer(d time.Duration) herald.Timer {
	t := &manualTimer{m: m, c: make(chan time.Time, 1), index: -1}
	m.mu.Lock()
	m.arm(t, d)
	m.mu.Unlock()
	return t
}

// Advance moves the clock forward by d and fires every timer whose deadline has been
// reached, earliest first. A negative d is treated as zero.
func (m *Manual) Advance(d time.Duration) {
	if d < 0 {
		d = 0
	}
	m.mu.Lock()
	m.setLocked(m.now.Add(d))
	m.mu.Unlock()
}

// Set moves the clock to t and fires every timer whose deadline is at or before t.
// Setting the clock backwards changes Now but fires nothing.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	m.setLocked(t)
	m.mu.Unlock()
}

// Pending reports how many timers are armed and not yet fired; tests use it to wait
// until the code under test has created its timer.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.timers.Len()
}

// setLocked fires due timers in deadline order, moving Now to each deadline as it fires
// so that a receiver reading Now sees the time its timer fired at; Now ends at t.
func (m *Manual) setLocked(t time.Time) {
	for m.timers.Len() > 0 && !m.timers.Min().deadline.After(t) {
		tm := m.timers.Pop()
		if tm.deadline.After(m.now) {
			m.now = tm.deadline
		}
		tm.fire(m.now)
	}
	m.now = t
}

func (m *Manual) arm(t *manualTimer, d time.Duration) {
	if d <= 0 {
		t.fire(m.now)
		return
	}
	m.nextID++
	t.deadline = m.now.Add(d)
	t.seq = m.nextID
	m.timers.Push(t)
}

type manualTimer struct {
	m        *Manual
	c        chan time.Time
	deadline time.Time
	seq      uint64 // creation order breaks ties between equal deadlines
	index    int    // position in the heap, -1 when not armed
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

// fire delivers now without blocking; like time.Timer, at most one value is buffered.
func (t *manualTimer) fire(now time.Time) {
	select {
	case t.c <- now:
	default:
	}
}

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	return t.m.timers.Remove(t)
}

// Reset re-arms the timer to fire d after the clock's current time, dropping any value
// that fired earlier and was not received.
func (t *manualTimer) Reset(d time.Duration) {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	t.m.timers.Remove(t)
	select {
	case <-t.c:
	default:
	}
	t.m.arm(t, d)
}

// earlier orders timers by deadline, then by creation.
func earlier(a, b *manualTimer) bool {
	if a.deadline.Equal(b.deadline) {
		return a.seq < b.seq
	}
	return a.deadline.Before(b.deadline)
}
