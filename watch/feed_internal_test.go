package watch

import (
	"testing"

	"github.com/herald-mq/herald"
)

// A feed hands a reader the sets from its position up to the end it asks for (what was
// appended when its turn began), a page at most, and says when it has lost them.
func TestFeedReadsUpToItsEnd(t *testing.T) {
	f := &feed{cap: 4}
	for seq := uint64(1); seq <= 6; seq++ {
		if !f.add(&herald.ChangeSet{Seq: seq}) {
			t.Fatalf("set %d not added", seq)
		}
	}
	if f.add(&herald.ChangeSet{Seq: 6}) {
		t.Fatal("the same commit was added twice")
	}
	seqs := func(sets []*herald.ChangeSet) (out []uint64) {
		for _, cs := range sets {
			out = append(out, cs.Seq)
		}
		return out
	}
	if _, _, lost := f.read(1, 6, 10, nil); !lost {
		t.Fatal("set number 1 was overwritten, yet the read did not say it was lost")
	}
	sets, next, lost := f.read(2, 5, 10, nil)
	if lost || next != 5 || len(sets) != 3 || sets[0].Seq != 3 || sets[2].Seq != 5 {
		t.Fatalf("read(2, 5) = %v, next %d, lost %v; want sets 3 to 5, next 5", seqs(sets), next, lost)
	}
	sets, next, _ = f.read(2, 6, 2, nil)
	if next != 4 || len(sets) != 2 {
		t.Fatalf("read with a page of 2 = %v, next %d", seqs(sets), next)
	}
	if sets, next, _ = f.read(6, 6, 10, nil); len(sets) != 0 || next != 6 {
		t.Fatalf("read at the end = %v, next %d", seqs(sets), next)
	}
}
