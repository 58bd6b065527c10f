package watch

import (
	"math/bits"
	"sync"

	"github.com/herald-mq/herald"
)

// deque is a double-ended queue of events on a ring that grows as needed and is
// released when it empties, so an idle watch holds none. Released rings are recycled
// (see rings): a thousand busy streams emptying and refilling their queues many times
// a second would otherwise turn most of the fan-out's allocation into rings.
//
// The ring holds pointers, not events: an event of a commit is one value that every
// identical watch's queue points to (see watcher.apply), so a thousand streams that
// lag by a thousand events hold 8 bytes per queued event each, not the 200 of a copy,
// and the garbage collector has one pointer to follow per slot instead of an event's
// several. The events queued are never written again.
type deque struct {
	ring       *[]*herald.Event // nil while empty; the pointer travels with its ring
	head, size int
	bytes      int // eventSize of the events held
	// last is the size of the ring last released: a busy stream's queue fills to much
	// the same depth between two takes of its transport, so the next ring starts there
	// rather than doubling up to it from minRing again (up to maxStartRing).
	last int
}

// maxStartRing bounds the ring a queue starts with again: 2 KiB of pointers.
const maxStartRing = 256

// minRing is the smallest ring; rings double from it.
const minRing = 8

// rings recycles released rings by size class: rings[i] holds rings of minRing<<i
// events, all zero. A sync.Pool lets the garbage collector take what stays unused for
// two cycles, so an idle server keeps no rings. Rings past the last class are not kept.
var rings [8]sync.Pool

// ringClass returns the class of a ring of n events (a power of two, at least
// minRing), and whether it has one.
func ringClass(n int) (int, bool) {
	c := bits.TrailingZeros(uint(n / minRing))
	return c, c < len(rings)
}

// newRing returns a zeroed ring of n events, recycled when one is free.
func newRing(n int) *[]*herald.Event {
	if c, ok := ringClass(n); ok {
		if r, _ := rings[c].Get().(*[]*herald.Event); r != nil {
			return r
		}
	}
	buf := make([]*herald.Event, n)
	return &buf
}

// freeRing hands back a ring whose slots are all nil.
func freeRing(r *[]*herald.Event) {
	if c, ok := ringClass(len(*r)); ok {
		rings[c].Put(r)
	}
}

func (d *deque) len() int { return d.size }

func (d *deque) buf() []*herald.Event {
	if d.ring == nil {
		return nil
	}
	return *d.ring
}

func (d *deque) front() *herald.Event { return d.buf()[d.head] }

func (d *deque) grow() {
	old := d.buf()
	r := newRing(max(minRing, 2*len(old), min(d.last, maxStartRing)))
	buf := *r
	for i := range d.size {
		j := (d.head + i) % len(old)
		buf[i], old[j] = old[j], nil
	}
	if d.ring != nil {
		freeRing(d.ring)
	}
	d.ring, d.head = r, 0
}

func (d *deque) pushBack(ev *herald.Event) {
	if d.size == len(d.buf()) {
		d.grow()
	}
	buf := *d.ring
	buf[(d.head+d.size)%len(buf)] = ev
	d.size++
	d.bytes += eventSize(ev)
}

func (d *deque) pushFront(ev *herald.Event) {
	if d.size == len(d.buf()) {
		d.grow()
	}
	buf := *d.ring
	d.head = (d.head - 1 + len(buf)) % len(buf)
	buf[d.head] = ev
	d.size++
	d.bytes += eventSize(ev)
}

func (d *deque) popFront() {
	buf := *d.ring
	d.bytes -= eventSize(buf[d.head])
	buf[d.head] = nil
	d.head = (d.head + 1) % len(buf)
	d.size--
	if d.size == 0 {
		d.last = len(buf)
		freeRing(d.ring)
		d.ring, d.head = nil, 0
	}
}

// eventSize estimates the memory an event holds: its match and previous match, and a
// fixed share for the rest. It bounds a stream's buffer in bytes (Config.MaxBufferBytes).
// An event shared by identical watches is measured once for all of them.
func eventSize(ev *herald.Event) int {
	if ev.Enc != nil {
		if n, ok := ev.Enc.Size(); ok {
			return n
		}
	}
	n := 96 + len(ev.Message) + valueSize(ev.Match) + valueSize(ev.Prev)
	if ev.Enc != nil {
		ev.Enc.SetSize(n)
	}
	return n
}

func valueSize(v herald.Value) int {
	switch v.Kind() {
	case herald.KindString:
		return 24 + len(v.AsString())
	case herald.KindBytes:
		return 24 + len(v.BytesAsString())
	case herald.KindList:
		n := 24
		for _, x := range v.AsList() {
			n += valueSize(x)
		}
		return n
	case herald.KindMap:
		n := 48
		for _, k := range v.MapKeys() {
			n += 16 + len(k)
		}
		for _, x := range v.MapValues() {
			n += valueSize(x)
		}
		return n
	}
	return 24
}
