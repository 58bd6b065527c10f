package delivery

import (
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/indexheap"
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

// entryHeap is a heap of entries; each keeps its position in entry.index.
type entryHeap = indexheap.Heap[entry]

func newEntryHeap(less func(a, b *entry) bool) entryHeap {
	return indexheap.New(less, func(e *entry) *int { return &e.index })
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
		k = &fairKey{name: e.info.FairKey, h: newEntryHeap(q.less)}
		q.keys[k.name] = k
	}
	k.h.Push(e)
	e.where = inReady
	q.n++
	if !k.inRing {
		k.inRing = true
		q.ring = append(q.ring, k)
	}
}

func (q *readyQueue) remove(e *entry) {
	k := q.keys[e.info.FairKey]
	if k == nil || !k.h.Remove(e) {
		return
	}
	e.where = inNone
	q.n--
}

// fix restores order after e's keys changed; e.info.FairKey must be unchanged.
func (q *readyQueue) fix(e *entry) {
	if k := q.keys[e.info.FairKey]; k != nil {
		k.h.Fix(e)
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
			if k.h.Len() == 0 {
				delete(q.keys, k.name)
			}
			continue
		}
		if k.deficit < 1 {
			k.deficit += k.h.Min().info.Weight
		}
		e := k.h.Pop()
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
		for _, e := range k.h.All() {
			fn(e)
		}
	}
}

// delayQueue holds entries until their time comes.
type delayQueue struct{ h entryHeap }

func newDelayQueue() *delayQueue {
	return &delayQueue{h: newEntryHeap(func(a, b *entry) bool { return a.until.Before(b.until) })}
}

func (d *delayQueue) push(e *entry) {
	d.h.Push(e)
	e.where = inDelayed
}

func (d *delayQueue) remove(e *entry) {
	if d.h.Remove(e) {
		e.where = inNone
	}
}

// due pops the entries whose time has come.
func (d *delayQueue) due(now time.Time) []*entry {
	var out []*entry
	for d.h.Len() > 0 && !d.h.Min().until.After(now) {
		e := d.h.Pop()
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
	return d.h.Min().until, true
}
