package watch

import (
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/clock"
)

// TestBudget: work past the share of a window waits for the window's end; a new
// window starts afresh.
func TestBudget(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC))
	b := newBudget(clk, 20*time.Millisecond, 0.25) // 5 ms of every 20
	if d := b.wait(); d != 0 {
		t.Fatalf("a fresh budget waits %v", d)
	}
	b.spend(3 * time.Millisecond)
	clk.Advance(3 * time.Millisecond)
	if d := b.wait(); d != 0 {
		t.Fatalf("3 ms of 5 spent: waits %v", d)
	}
	b.spend(3 * time.Millisecond)
	clk.Advance(3 * time.Millisecond)
	if d := b.wait(); d != 14*time.Millisecond {
		t.Fatalf("6 ms of 5 spent 6 ms into the window: waits %v, want the 14 ms left of it", d)
	}
	clk.Advance(14 * time.Millisecond)
	if d := b.wait(); d != 0 {
		t.Fatalf("in the next window: waits %v", d)
	}
}

// TestBudgetCarriesOverspending: work that overspends a short window is paid from the
// windows after it, so the share holds over time; a long quiet spell forgives nothing
// more than it owes, and the first wait after it starts a window at once.
func TestBudgetCarriesOverspending(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC))
	b := newBudget(clk, 4*time.Millisecond, 0.05) // 200 µs of every 4 ms
	if d := b.wait(); d != 0 {
		t.Fatalf("a fresh budget waits %v", d)
	}
	b.spend(time.Millisecond) // one unit of work, five windows' worth
	clk.Advance(time.Millisecond)
	if d := b.wait(); d != 19*time.Millisecond {
		t.Fatalf("1 ms spent of a 200 µs allowance: waits %v, want the 19 ms to the fifth window's end", d)
	}
	clk.Advance(15 * time.Millisecond) // four windows have passed: 200 µs still owed
	if d := b.wait(); d != 4*time.Millisecond {
		t.Fatalf("with 200 µs still owed: waits %v, want the 4 ms of the window paying it", d)
	}
	clk.Advance(4 * time.Millisecond)
	if d := b.wait(); d != 0 {
		t.Fatalf("once the overspending is paid: waits %v", d)
	}
	b.spend(150 * time.Microsecond)
	clk.Advance(time.Hour)
	if d := b.wait(); d != 0 {
		t.Fatalf("after an hour without work: waits %v", d)
	}
	b.spend(time.Millisecond)
	if d := b.wait(); d != 20*time.Millisecond {
		t.Fatalf("1 ms spent in the window that the wait after an hour began: waits %v, want 20 ms", d)
	}
	clk.Advance(20 * time.Millisecond)
	b.spend(time.Second) // a slot held across a stall of the process
	if d := b.wait(); d != (maxOwedWindows+1)*4*time.Millisecond {
		t.Fatalf("a second spent at once: waits %v, want %d windows at the most", d, maxOwedWindows+1)
	}
}

// TestFrameBudget: a transport's frames spend the fan-out budget as the streams' apply
// work does. The time a frame takes counts, a frame waits while the window is spent,
// and a transport whose call ends stops waiting.
func TestFrameBudget(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC))
	s := &Service{clock: clk, budget: newBudget(clk, 20*time.Millisecond, 0.25)}
	finish, ok := s.FrameBudget(nil)
	if !ok {
		t.Fatal("a fresh budget refused a frame")
	}
	clk.Advance(6 * time.Millisecond) // the frame took 6 ms: more than the window's 5
	finish()
	if d := s.budget.wait(); d != 14*time.Millisecond {
		t.Fatalf("after a 6 ms frame the budget waits %v, want the 14 ms left of the window", d)
	}

	got := make(chan bool, 1)
	go func() {
		_, ok := s.FrameBudget(nil)
		got <- ok
	}()
	for clk.Pending() == 0 { // the frame waits on a timer for the window's end
		select {
		case <-got:
			t.Fatal("a frame went out while the window's budget was spent")
		default:
			runtime.Gosched()
		}
	}
	clk.Advance(14 * time.Millisecond)
	if ok := <-got; !ok {
		t.Fatal("the next window refused the frame")
	}

	s.budget.spend(time.Second) // spent for the window
	done := make(chan struct{})
	go func() {
		_, ok := s.FrameBudget(done)
		got <- ok
	}()
	close(done)
	if ok := <-got; ok {
		t.Fatal("a frame went out though its call had ended and the budget was spent")
	}
}

// The default fan-out budget is a share of the machine, not of one CPU: 2.5 % of the
// CPUs the process may use, so 0.05 of one CPU on two and 0.8 on thirty-two.
func TestDefaultCPUShareFollowsTheCPUs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		procs int
		want  float64
	}{{1, 0.025}, {2, 0.05}, {32, 0.8}} {
		runtime.GOMAXPROCS(tc.procs)
		if got := DefaultCPUShare(); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("GOMAXPROCS %d: default share %g, want %g", tc.procs, got, tc.want)
		}
	}
}

// TestStreamWaitsForTheBudgetWithoutASlot: a stream that waits out the fan-out budget
// holds no fan-out slot meanwhile, so the transports that share the slots (Config.Slots)
// write; held in the other order, they waited for the budget's streams.
func TestStreamWaitsForTheBudgetWithoutASlot(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC))
	slots := make(chan struct{}, 1)
	svc := &Service{clock: clk, applySlots: slots, budgetGate: make(chan struct{}, 1), budget: newBudget(clk, 2*time.Millisecond, 0.1)}
	svc.budget.wait()                  // the first window starts now
	svc.budget.spend(time.Millisecond) // five windows owed
	w := &watcher{svc: svc, stop: make(chan struct{})}
	took := make(chan bool, 1)
	go func() { took <- w.takeSlot() }()
	deadline := time.Now().Add(10 * time.Second) // a bound on a hang, not a timing
	for clk.Pending() == 0 {                     // the stream waits for the budget
		if time.Now().After(deadline) {
			t.Fatal("the stream never waited for the budget")
		}
		runtime.Gosched()
	}
	select {
	case slots <- struct{}{}: // a transport takes the slot while the stream waits
		<-slots
	case <-time.After(10 * time.Second):
		t.Fatal("a stream waiting for the budget held the fan-out slot")
	}
	clk.Advance(20 * time.Millisecond)
	if !<-took || !w.applying || len(slots) != 1 {
		t.Fatal("the stream did not take the slot once the budget had room")
	}
	w.giveSlot()
}
