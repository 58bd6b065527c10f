package clock

import (
	"container/heap"
	"sync"
	"time"

	"github.com/herald-mq/herald"
)

// Manual is a clock whose time moves only through Advance and Set. Timers created from
// it fire, in deadline order, when the clock passes their deadline. It is safe for
// concurrent use.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers timerHeap
	nextID uint64
}

var _ herald.Clock = (*Manual)(nil)

// NewManual returns a manual clock reading start.
func NewManual(start time.Time) *Manual {
	return &Manual{now: start}
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
	return len(m.timers)
}

// setLocked fires due timers in deadline order, moving Now to each deadline as it fires
// so that a receiver reading Now sees the time its timer fired at; Now ends at t.
func (m *Manual) setLocked(t time.Time) {
	for len(m.timers) > 0 && !m.timers[0].deadline.After(t) {
		tm := heap.Pop(&m.timers).(*manualTimer)
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
	heap.Push(&m.timers, t)
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
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.m.timers, t.index)
	return true
}

// Reset re-arms the timer to fire d after the clock's current time, dropping any value
// that fired earlier and was not received.
func (t *manualTimer) Reset(d time.Duration) {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if t.index >= 0 {
		heap.Remove(&t.m.timers, t.index)
	}
	select {
	case <-t.c:
	default:
	}
	t.m.arm(t, d)
}

type timerHeap []*manualTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].deadline.Equal(h[j].deadline) {
		return h[i].seq < h[j].seq
	}
	return h[i].deadline.Before(h[j].deadline)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*manualTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	t.index = -1
	*h = old[:n-1]
	return t
}
