package watch

import (
	"slices"
	"testing"

	"github.com/herald-mq/herald"
)

func seqsOf(sets []*herald.ChangeSet) []uint64 {
	out := make([]uint64, len(sets))
	for i, cs := range sets {
		out[i] = cs.Seq
	}
	return out
}

func setsAt(seqs ...uint64) []*herald.ChangeSet {
	out := make([]*herald.ChangeSet, len(seqs))
	for i, s := range seqs {
		out[i] = &herald.ChangeSet{Seq: s}
	}
	return out
}

// TestRecent: memory answers for every position from the one the service started at
// while it holds what follows; once the oldest sets are evicted, positions before them
// go to the log; sets announced before the start are not held twice.
func TestRecent(t *testing.T) {
	r := &recent{max: 3}
	if _, ok := r.after(0, 10); ok {
		t.Fatal("memory answered before the service started listening")
	}
	r.start(10)
	if got, ok := r.after(10, 10); !ok || len(got) != 0 {
		t.Fatalf("after the start position with nothing new: %v %v, want none from memory", seqsOf(got), ok)
	}
	if _, ok := r.after(9, 10); ok {
		t.Fatal("memory answered for a position before the one it started at")
	}
	r.add(setsAt(9, 10, 11, 13)) // 9 and 10 were announced before the start
	for _, tc := range []struct {
		after, limit int
		want         []uint64
	}{
		{10, 10, []uint64{11, 13}},
		{11, 10, []uint64{13}},
		{12, 10, []uint64{13}},
		{10, 1, []uint64{11}},
		{13, 10, []uint64{}},
	} {
		got, ok := r.after(uint64(tc.after), tc.limit)
		if !ok || !slices.Equal(seqsOf(got), tc.want) {
			t.Errorf("after(%d, %d) = %v %v, want %v from memory", tc.after, tc.limit, seqsOf(got), ok, tc.want)
		}
	}
	r.add(setsAt(14, 15)) // 11 is evicted: memory holds every commit after 11
	if _, ok := r.after(10, 10); ok {
		t.Error("memory answered for a position whose next commit it evicted")
	}
	if got, ok := r.after(11, 10); !ok || !slices.Equal(seqsOf(got), []uint64{13, 14, 15}) {
		t.Errorf("after(11) = %v %v, want [13 14 15] from memory", seqsOf(got), ok)
	}
	r.add(setsAt(16, 17, 18, 19))
	if got, ok := r.after(16, 10); !ok || !slices.Equal(seqsOf(got), []uint64{17, 18, 19}) {
		t.Errorf("after the ring wrapped: after(16) = %v %v, want [17 18 19]", seqsOf(got), ok)
	}
}

// TestEvalCache: a result is found under its key only; the first result put for a key
// stays; a key that lands on a taken slot replaces what was there.
func TestEvalCache(t *testing.T) {
	c := newEvalCache()
	k := cacheKey{share: 1, seq: 7}
	if _, ok := c.get(k); ok {
		t.Fatal("found in an empty cache")
	}
	c.put(k, "first")
	c.put(k, "second")
	if v, ok := c.get(k); !ok || v != "first" {
		t.Fatalf("get = %v %v, want the first result", v, ok)
	}
	for _, other := range []cacheKey{{share: 2, seq: 7}, {share: 1, seq: 8}, {share: 1, seq: 7, join: true}} {
		if _, ok := c.get(other); ok {
			t.Errorf("%+v found under %+v's result", other, k)
		}
	}
	later := cacheKey{share: 1, seq: 7 + cacheSize} // the same slot
	c.put(later, "later")
	if _, ok := c.get(k); ok {
		t.Error("a replaced result is still found")
	}
	if v, ok := c.get(later); !ok || v != "later" {
		t.Errorf("get(later) = %v %v", v, ok)
	}
}
