// Package indexheap is a binary min-heap of pointers to items that keep their own
// position in it, so that an item can be removed or moved to its new place wherever it
// is: a manual clock's timers, the deadlines of leases, the streams waiting out a
// linger, and a consume group's entries. One heap serves them all instead of a copy of
// container/heap's boilerplate each.
package indexheap

import "container/heap"

// Heap orders items by less. pos returns where an item's position is kept: the heap
// sets it while the item is in, and to -1 when it leaves. The zero Heap is not usable;
// make one with New. It is not safe for concurrent use.
type Heap[T any] struct {
	a adapter[T]
}

// New returns an empty heap ordered by less, keeping each item's position at pos(item).
func New[T any](less func(a, b *T) bool, pos func(*T) *int) Heap[T] {
	return Heap[T]{a: adapter[T]{less: less, pos: pos}}
}

// Len returns how many items the heap holds.
func (h *Heap[T]) Len() int { return len(h.a.items) }

// Min returns the least item, or nil when the heap is empty.
func (h *Heap[T]) Min() *T {
	if len(h.a.items) == 0 {
		return nil
	}
	return h.a.items[0]
}

// Push adds x.
func (h *Heap[T]) Push(x *T) { heap.Push(&h.a, x) }

// Pop removes the least item and returns it; nil when the heap is empty.
func (h *Heap[T]) Pop() *T {
	if len(h.a.items) == 0 {
		return nil
	}
	return heap.Pop(&h.a).(*T)
}

// Contains reports whether x is in this heap (not merely in another one).
func (h *Heap[T]) Contains(x *T) bool {
	i := *h.a.pos(x)
	return i >= 0 && i < len(h.a.items) && h.a.items[i] == x
}

// Remove takes x out of the heap; false when x was not in it.
func (h *Heap[T]) Remove(x *T) bool {
	if !h.Contains(x) {
		return false
	}
	heap.Remove(&h.a, *h.a.pos(x))
	return true
}

// Fix moves x to its place after its key changed; false when x is not in the heap.
func (h *Heap[T]) Fix(x *T) bool {
	if !h.Contains(x) {
		return false
	}
	heap.Fix(&h.a, *h.a.pos(x))
	return true
}

// All returns the items in heap order (the least first, the rest in no sorted order).
// The slice is the heap's own: read it, do not keep it past the next change.
func (h *Heap[T]) All() []*T { return h.a.items }

// adapter is the heap.Interface over the items.
type adapter[T any] struct {
	items []*T
	less  func(a, b *T) bool
	pos   func(*T) *int
}

func (a *adapter[T]) Len() int           { return len(a.items) }
func (a *adapter[T]) Less(i, j int) bool { return a.less(a.items[i], a.items[j]) }
func (a *adapter[T]) Swap(i, j int) {
	a.items[i], a.items[j] = a.items[j], a.items[i]
	*a.pos(a.items[i]), *a.pos(a.items[j]) = i, j
}
func (a *adapter[T]) Push(x any) {
	t := x.(*T)
	*a.pos(t) = len(a.items)
	a.items = append(a.items, t)
}
func (a *adapter[T]) Pop() any {
	n := len(a.items) - 1
	t := a.items[n]
	a.items[n] = nil
	a.items = a.items[:n]
	*a.pos(t) = -1
	return t
}
