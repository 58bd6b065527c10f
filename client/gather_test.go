package client

import (
	"sync"
	"testing"
)

// TestGather yields only while the stream is busy and the queue keeps growing, and at
// most maxGatherYields times.
func TestGather(t *testing.T) {
	var mu sync.Mutex
	cases := []struct {
		name      string
		busy      bool
		grow      int // how much the queue grows per look
		start     int
		wantLooks int
	}{
		{"idle stream: no wait", false, 1, 1, 1},
		{"busy, growing: bounded yields", true, 1, 1, 2 * maxGatherYields},
		{"busy, not growing: one yield", true, 0, 1, 2},
		{"busy, full frame: no wait", true, 1, 10, 1},
	}
	for _, tc := range cases {
		looks, queued := 0, tc.start
		gather(&mu, 10, func() (bool, int) {
			looks++
			queued += tc.grow
			return tc.busy, queued - tc.grow
		})
		if looks != tc.wantLooks {
			t.Errorf("%s: %d looks at the queue, want %d", tc.name, looks, tc.wantLooks)
		}
	}
}
