package delivery

import (
	"testing"
	"time"
)

// TestArrivals: commit times are sampled at most once a second; past arrivalSamples
// every other sample goes but the first (the start), so the samples still reach back to
// it; a seq between two samples takes the earlier one's time, one before the first the
// first's.
func TestArrivals(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var a arrivals
	if _, ok := a.at(5); ok {
		t.Fatal("a time without samples")
	}
	a.note(10, t0)
	a.note(11, t0.Add(500*time.Millisecond)) // within the second: not kept
	a.note(12, t0.Add(2*time.Second))
	for seq, want := range map[uint64]time.Time{3: t0, 10: t0, 11: t0, 12: t0.Add(2 * time.Second), 99: t0.Add(2 * time.Second)} {
		if got, _ := a.at(seq); !got.Equal(want) {
			t.Errorf("at(%d) = %v, want %v", seq, got, want)
		}
	}
	for i := 3; i <= arrivalSamples+1; i++ {
		a.note(uint64(10+i), t0.Add(time.Duration(i)*time.Second))
	}
	if n := len(a.seqs); n > arrivalSamples || n < arrivalSamples/2 {
		t.Fatalf("%d samples held", n)
	}
	if a.seqs[0] != 10 || !a.times[0].Equal(t0) {
		t.Fatalf("the first sample went: %d %v", a.seqs[0], a.times[0])
	}
	last := uint64(10 + arrivalSamples + 1)
	if got, _ := a.at(last); !got.Equal(t0.Add(time.Duration(arrivalSamples+1) * time.Second)) {
		t.Fatalf("at(%d) = %v", last, got)
	}
	// A thinned seq takes the time of the sample before it: at most the spacing early.
	got, _ := a.at(15)
	if d := t0.Add(5 * time.Second).Sub(got); d < 0 || d > 2*time.Second {
		t.Fatalf("at(15) = %v, %v early", got, d)
	}
}
