package watch

import "github.com/herald-mq/herald"

// deque is a double-ended queue of events on a ring that grows as needed and is
// released when it empties, so an idle watch holds none.
type deque struct {
	buf        []herald.Event
	head, size int
	bytes      int // eventSize of the events held
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
	d.bytes += eventSize(ev)
}

func (d *deque) pushFront(ev herald.Event) {
	if d.size == len(d.buf) {
		d.grow()
	}
	d.head = (d.head - 1 + len(d.buf)) % len(d.buf)
	d.buf[d.head] = ev
	d.size++
	d.bytes += eventSize(ev)
}

func (d *deque) popFront() {
	d.bytes -= eventSize(d.buf[d.head])
	d.buf[d.head] = herald.Event{}
	d.head = (d.head + 1) % len(d.buf)
	d.size--
	if d.size == 0 {
		d.buf, d.head = nil, 0
	}
}

// eventSize estimates the memory an event holds: its match and previous match, and a
// fixed share for the rest. It bounds a stream's buffer in bytes (Config.MaxBufferBytes).
// An event shared by identical watches is measured once for all of them.
func eventSize(ev herald.Event) int {
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
