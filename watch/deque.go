package watch

import "github.com/herald-mq/herald"

// deque is a double-ended queue of events on a ring that grows as needed and is
// released when it empties, so an idle watch holds none.
type deque struct {
	buf        []herald.Event
	head, size int
}

func (d *deque) len() int { return d.size }

func (d *deque) front() herald.Event { return d.buf[d.head] }

func (d *deque) grow() {
	n := max(8, 2*len(d.buf))
	buf := make([]herald.Event, n)
	for i := range d.size {
		buf[i] = d.buf[(d.head+i)%len(d.buf)]
	}
	d.buf, d.head = buf, 0
}

func (d *deque) pushBack(ev herald.Event) {
	if d.size == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.size)%len(d.buf)] = ev
	d.size++
}

func (d *deque) pushFront(ev herald.Event) {
	if d.size == len(d.buf) {
		d.grow()
	}
	d.head = (d.head - 1 + len(d.buf)) % len(d.buf)
	d.buf[d.head] = ev
	d.size++
}

func (d *deque) popFront() {
	d.buf[d.head] = herald.Event{}
	d.head = (d.head + 1) % len(d.buf)
	d.size--
	if d.size == 0 {
		d.buf, d.head = nil, 0
	}
}
