package delivery

import (
	"container/heap"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/standing"
)

// entry is one subject in one group's queue.
type entry struct {
	subj  *subject
	info  *standing.Info
	grp   *group
	index int       // position in its heap, -1 when in none
	until time.Time // while delayed: when it becomes ready
	where int       // inNone, inReady, inDelayed
	skip  bool      // matched before an `initial: none` group started: never delivered
}

const (
	inNone = iota
	inReady
	inDelayed
)

// less orders entries of one queue: attribute keys (ASC/DESC), then arrival (the seq
// that created the subject), then id. A redelivered subject keeps its keys and so its
// original position.
func (g *group) less(a, b *entry) bool {
	for i := range g.q.OrderKeys() {
		var x, y herald.Value
		if i < len(a.info.Keys) {
			x = a.info.Keys[i]
		}
		if i < len(b.info.Keys) {
			y = b.info.Keys[i]
		}
		if c := herald.Compare(x, y); c != 0 {
			if g.q.OrderDesc(i) {
				return c > 0
			}
			return c < 0
		}
	}
	if a.subj.created != b.subj.created {
		return a.subj.created < b.subj.created
	}
	return a.subj.id < b.subj.id
}

type entryHeap struct {
	items []*entry
	less  func(a, b *entry) bool
}

func (h *entryHeap) Len() int           { return len(h.items) }
func (h *entryHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *entryHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index, h.items[j].index = i, j
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(h.items)
	h.items = append(h.items, e)
}
func (h *entryHeap) Pop() any {
	n := len(h.items) - 1
	e := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	e.index = -1
	return e
}

// fairKey is one fairness key's queue and its deficit-round-robin state.
type fairKey struct {
	name    string
	h       entryHeap
	deficit int
	inRing  bool
}

// readyQueue is a group's ready messages: one priority queue per fairness key, served by
// deficit round robin with each key's weight as its quantum. Without `fairness` there is
// one key and the queue is a plain priority queue.
type readyQueue struct {
	less func(a, b *entry) bool
	keys map[string]*fairKey
	ring []*fairKey
	pos  int
	n    int
}

func newReadyQueue(less func(a, b *entry) bool) *readyQueue {
	return &readyQueue{less: less, keys: map[string]*fairKey{}}
}

func (q *readyQueue) push(e *entry) {
	k := q.keys[e.info.FairKey]
	if k == nil {
		k = &fairKey{name: e.info.FairKey, h: entryHeap{less: q.less}}
		q.keys[k.name] = k
	}
	heap.Push(&k.h, e)
	e.where = inReady
	q.n++
	if !k.inRing {
		k.inRing = true
		q.ring = append(q.ring, k)
	}
}

func (q *readyQueue) remove(e *entry) {
	k := q.keys[e.info.FairKey]
	if k == nil || e.index < 0 || e.index >= k.h.Len() || k.h.items[e.index] != e {
		return
	}
	heap.Remove(&k.h, e.index)
	e.where = inNone
	q.n--
}

// fix restores order after e's keys changed; e.info.FairKey must be unchanged.
func (q *readyQueue) fix(e *entry) {
	if k := q.keys[e.info.FairKey]; k != nil && e.index >= 0 {
		heap.Fix(&k.h, e.index)
	}
}

// pop takes the next entry by deficit round robin.
func (q *readyQueue) pop() *entry {
	for q.n > 0 && len(q.ring) > 0 {
		if q.pos >= len(q.ring) {
			q.pos = 0
		}
		k := q.ring[q.pos]
		if k.h.Len() == 0 {
			k.inRing, k.deficit = false, 0
			q.ring = append(q.ring[:q.pos], q.ring[q.pos+1:]...)
			if len(k.h.items) == 0 {
				delete(q.keys, k.name)
			}
			continue
		}
		if k.deficit < 1 {
			k.deficit += k.h.items[0].info.Weight
		}
		e := heap.Pop(&k.h).(*entry)
		e.where = inNone
		q.n--
		k.deficit--
		if k.h.Len() == 0 {
			k.inRing, k.deficit = false, 0
			q.ring = append(q.ring[:q.pos], q.ring[q.pos+1:]...)
			delete(q.keys, k.name)
		} else if k.deficit < 1 {
			q.pos++
		}
		return e
	}
	return nil
}

func (q *readyQueue) len() int { return q.n }

// each calls fn with every queued entry, in no order.
func (q *readyQueue) each(fn func(*entry)) {
	for _, k := range q.keys {
		for _, e := range k.h.items {
			fn(e)
		}
	}
}

// delayQueue holds entries until their time comes.
type delayQueue struct{ h entryHeap }

func newDelayQueue() *delayQueue {
	return &delayQueue{h: entryHeap{less: func(a, b *entry) bool { return a.until.Before(b.until) }}}
}

func (d *delayQueue) push(e *entry) {
	heap.Push(&d.h, e)
	e.where = inDelayed
}

func (d *delayQueue) remove(e *entry) {
	if e.index >= 0 && e.index < d.h.Len() && d.h.items[e.index] == e {
		heap.Remove(&d.h, e.index)
		e.where = inNone
	}
}

// due pops the entries whose time has come.
func (d *delayQueue) due(now time.Time) []*entry {
	var out []*entry
	for d.h.Len() > 0 && !d.h.items[0].until.After(now) {
		e := heap.Pop(&d.h).(*entry)
		e.where = inNone
		out = append(out, e)
	}
	return out
}

func (d *delayQueue) len() int { return d.h.Len() }

// next returns the earliest pending time.
func (d *delayQueue) next() (time.Time, bool) {
	if d.h.Len() == 0 {
		return time.Time{}, false
	}
	return d.h.items[0].until, true
}
