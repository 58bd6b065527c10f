package watch

import (
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/clock"
)

// TestFeedLinger: a feed appended to is woken at once after a quiet spell, and no
// sooner than Config.FeedLinger after its last wake: within the linger it stays dirty
// and the dispatcher learns when to come back for it.
func TestFeedLinger(t *testing.T) {
	clk := clock.NewManual(time.Unix(1700000000, 0))
	s := &Service{cfg: Config{FeedLinger: 10 * time.Millisecond}, clock: clk}
	w := &watcher{}
	f := &feed{cap: 4, members: map[*watcher]bool{w: true}}
	dirty := func() {
		f.dirty = true
		s.dirtyFeeds = append(s.dirtyFeeds, f)
		w.inWoken = false
	}
	dirty()
	if woken, due := s.wakeFeedsLocked(nil); len(woken) != 1 || !due.IsZero() {
		t.Fatalf("after a quiet spell: woke %d, due %v; want the stream at once", len(woken), due)
	}
	clk.Advance(4 * time.Millisecond)
	dirty()
	woken, due := s.wakeFeedsLocked(nil)
	if len(woken) != 0 || !due.Equal(clk.Now().Add(6*time.Millisecond)) || !f.dirty || len(s.dirtyFeeds) != 1 {
		t.Fatalf("within the linger: woke %d, due %v (now %v), dirty %v; want none, due at the linger's end", len(woken), due, clk.Now(), f.dirty)
	}
	clk.Advance(6 * time.Millisecond)
	if woken, _ := s.wakeFeedsLocked(nil); len(woken) != 1 || f.dirty || len(s.dirtyFeeds) != 0 {
		t.Fatalf("once the linger has passed: woke %d, dirty %v", len(woken), f.dirty)
	}
	// Without a linger every call wakes.
	s.cfg.FeedLinger = 0
	dirty()
	if woken, _ := s.wakeFeedsLocked(nil); len(woken) != 1 {
		t.Fatalf("without a linger: woke %d", len(woken))
	}
}
