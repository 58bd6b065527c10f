package clock

import (
	"testing"
	"time"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func received(t *testing.T, c <-chan time.Time) (time.Time, bool) {
	t.Helper()
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestManualNowAdvanceSet(t *testing.T) {
	m := NewManual(epoch)
	if !m.Now().Equal(epoch) {
		t.Fatalf("Now = %v", m.Now())
	}
	m.Advance(3 * time.Second)
	if got := m.Now(); !got.Equal(epoch.Add(3 * time.Second)) {
		t.Fatalf("after Advance: %v", got)
	}
	m.Set(epoch.Add(time.Hour))
	if got := m.Now(); !got.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("after Set: %v", got)
	}
	m.Advance(-time.Minute)
	if got := m.Now(); !got.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("negative Advance moved the clock: %v", got)
	}
}

func TestManualTimerFiresAtDeadline(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(10 * time.Second)
	m.Advance(9 * time.Second)
	if _, ok := received(t, tm.C()); ok {
		t.Fatal("fired early")
	}
	m.Advance(time.Second)
	v, ok := received(t, tm.C())
	if !ok || !v.Equal(epoch.Add(10*time.Second)) {
		t.Fatalf("fired=%v at %v", ok, v)
	}
	if m.Pending() != 0 {
		t.Fatalf("Pending = %d", m.Pending())
	}
}

func TestManualTimersFireInDeadlineOrder(t *testing.T) {
	m := NewManual(epoch)
	// The clock steps to each deadline as it fires, so the fire times tell the order.
	a := m.NewTimer(30 * time.Second)
	b := m.NewTimer(10 * time.Second)
	c := m.NewTimer(20 * time.Second)
	m.Advance(time.Minute)
	times := map[int]time.Time{}
	for i, tm := range []interface{ C() <-chan time.Time }{a, b, c} {
		v, ok := received(t, tm.C())
		if !ok {
			t.Fatalf("timer %d did not fire", i)
		}
		times[i] = v
	}
	if !(times[1].Before(times[2]) && times[2].Before(times[0])) {
		t.Fatalf("fire times not in deadline order: %v", times)
	}
	if !m.Now().Equal(epoch.Add(time.Minute)) {
		t.Fatalf("Now = %v", m.Now())
	}
}

func TestManualTimerStopAndReset(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if tm.Stop() {
		t.Fatal("second Stop reported true")
	}
	m.Advance(time.Hour)
	if _, ok := received(t, tm.C()); ok {
		t.Fatal("stopped timer fired")
	}
	tm.Reset(5 * time.Second)
	m.Advance(5 * time.Second)
	if _, ok := received(t, tm.C()); !ok {
		t.Fatal("reset timer did not fire")
	}
	// Reset after an unreceived fire drops the stale value.
	tm.Reset(time.Second)
	m.Advance(time.Second)
	tm.Reset(time.Second)
	if _, ok := received(t, tm.C()); ok {
		t.Fatal("stale value survived Reset")
	}
}

func TestManualZeroDurationFiresImmediately(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(0)
	if v, ok := received(t, tm.C()); !ok || !v.Equal(epoch) {
		t.Fatalf("fired=%v at %v", ok, v)
	}
}

func TestManualSetBackwardsFiresNothing(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(time.Second)
	m.Set(epoch.Add(-time.Hour))
	if _, ok := received(t, tm.C()); ok {
		t.Fatal("fired when the clock went back")
	}
	if m.Pending() != 1 {
		t.Fatalf("Pending = %d", m.Pending())
	}
}

func TestManualConcurrentUse(t *testing.T) {
	m := NewManual(epoch)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100; i++ {
			tm := m.NewTimer(time.Duration(i) * time.Millisecond)
			tm.Stop()
		}
	}()
	for i := 0; i < 100; i++ {
		m.Advance(time.Millisecond)
		_ = m.Now()
	}
	<-done
}

func TestReal(t *testing.T) {
	c := Real()
	before := time.Now()
	if c.Now().Before(before) {
		t.Fatal("real clock behind time.Now")
	}
	tm := c.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop of a pending real timer reported false")
	}
	tm.Reset(0)
	<-tm.C()
}
