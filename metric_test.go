package herald

import (
	"slices"
	"testing"
	"time"
)

func TestDurations(t *testing.T) {
	d := NewDurations(0.001, 0.01)
	for _, v := range []time.Duration{500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond, time.Second} {
		d.Observe(v)
	}
	h := d.Read()
	// A duration on a bound counts in that bound's bucket; one above every bound
	// counts only in Count and Sum.
	if !slices.Equal(h.Counts, []uint64{2, 2}) || h.Count != 5 || h.Sum != 1.0135 {
		t.Fatalf("read %+v, want counts [2 2], count 5, sum 1.0135", h)
	}
}
