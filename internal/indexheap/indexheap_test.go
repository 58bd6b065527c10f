package indexheap

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

type item struct {
	key, pos int
}

func newHeap() Heap[item] {
	return New(func(a, b *item) bool { return a.key < b.key }, func(x *item) *int { return &x.pos })
}

// TestHeapAgainstASortedList: any sequence of pushes, pops, removals and key changes
// leaves the heap popping what a sorted list of the same items would, every item's
// position pointing at itself, and -1 for those outside.
func TestHeapAgainstASortedList(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHeap()
		var all, in []*item
		for range rapid.IntRange(0, 200).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 3).Draw(t, "op"); {
			case op == 0 || len(all) == 0:
				x := &item{key: rapid.IntRange(0, 20).Draw(t, "key"), pos: -1}
				all = append(all, x)
				in = append(in, x)
				h.Push(x)
			case op == 1:
				got := h.Pop()
				if len(in) == 0 {
					if got != nil {
						t.Fatalf("Pop of an empty heap = %+v", got)
					}
					continue
				}
				least := slices.MinFunc(in, func(a, b *item) int { return a.key - b.key })
				if got == nil || got.key != least.key || got.pos != -1 {
					t.Fatalf("Pop = %+v, want key %d and pos -1", got, least.key)
				}
				in = slices.DeleteFunc(in, func(x *item) bool { return x == got })
			case op == 2:
				x := rapid.SampledFrom(all).Draw(t, "remove")
				was := slices.Contains(in, x)
				if h.Remove(x) != was {
					t.Fatalf("Remove(%+v) reported %v, want %v", x, !was, was)
				}
				in = slices.DeleteFunc(in, func(y *item) bool { return y == x })
			default:
				x := rapid.SampledFrom(all).Draw(t, "fix")
				x.key = rapid.IntRange(0, 20).Draw(t, "newkey")
				if h.Fix(x) != slices.Contains(in, x) {
					t.Fatalf("Fix(%+v) disagrees with membership", x)
				}
			}
			if h.Len() != len(in) {
				t.Fatalf("Len %d, want %d", h.Len(), len(in))
			}
			for i, x := range h.All() {
				if x.pos != i {
					t.Fatalf("item %+v at %d", x, i)
				}
			}
			for _, x := range all {
				if !slices.Contains(in, x) && (x.pos != -1 || h.Contains(x)) {
					t.Fatalf("item %+v outside the heap keeps a position", x)
				}
			}
			if m := h.Min(); len(in) > 0 && m.key != slices.MinFunc(in, func(a, b *item) int { return a.key - b.key }).key {
				t.Fatalf("Min %+v is not the least", m)
			}
		}
	})
}
