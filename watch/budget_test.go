package watch

import (
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
