package httpapi

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/internal/indexheap"
)

// The SSE hub writes the events of watch-mode server-sent-event streams for them: one
// goroutine takes, encodes and writes every ready stream's batch in turn, where each
// stream had a goroutine of its own that woke, lingered, took a send slot, encoded and
// wrote. A thousand streams on one pattern then cost one goroutine's wakes, not a
// thousand, and the writers' goroutines never queue behind a thousand runnable stream
// goroutines on the CPUs.
//
// A hub writes a connection only without waiting (tryWriter): what the socket does not
// take at once goes to the stream's own goroutine, which waits for the client, and the
// hub passes the stream over until that write is done. A slow client therefore holds
// up nobody but itself. The stream's goroutine also sends its pings and ends the stream
// when its client leaves or the server stops; the hub ends it when the stream closes,
// an error event goes out or a write fails.

// hubState is where a hubStream is.
type hubState uint8

const (
	hsIdle    hubState = iota // nothing to send
	hsQueued                  // in the hub's ready list
	hsDelayed                 // in the hub's linger heap
	hsServing                 // the hub's goroutine is taking and writing its events
	hsSlow                    // its own goroutine finishes a write the socket did not take
	hsPinging                 // its own goroutine writes a ping
	hsEnded                   // the hub ended it; its goroutine is leaving
	hsLeft                    // its goroutine left
)

// hubStream is one SSE stream that a hub serves.
type hubStream struct {
	st  broker.Stream
	out *eventStream
	tw  tryWriter
	rec *recorder // nil when the response writer is not the handler's own

	// Under sseHub.mu.
	state    hubState
	pending  bool      // notified while serving, slow or pinging: look again after
	endAfter bool      // hsSlow: the stream ends once that write is done
	leaving  bool      // its goroutine waits (served) for the hub to finish with it
	last     time.Time // its last write, for the linger
	due      time.Time // hsDelayed: when the linger has passed
	index    int       // in the heap

	slow   chan []byte   // to its goroutine: write this, then call slowDone
	end    chan struct{} // closed when the hub ends the stream
	served chan struct{} // closed when the hub has finished with a leaving stream
}

// sseHub is one goroutine's share of the SSE streams (see Handler.hubFor).
type sseHub struct {
	h *Handler

	mu      sync.Mutex
	members int
	ready   []*hubStream
	delayed indexheap.Heap[hubStream] // newLingerHeap
	running bool
	wake    chan struct{} // cap 1

	// The goroutine's own.
	buf   bytes.Buffer
	batch []herald.Event
}

func newSSEHub(h *Handler) *sseHub {
	return &sseHub{h: h, delayed: newLingerHeap(), wake: make(chan struct{}, 1)}
}

// hubFor returns the hub a new stream joins: the streams are spread over half the
// CPUs' worth of hubs, round robin.
func (h *Handler) hubFor() *sseHub {
	h.hubOnce.Do(func() {
		h.hubs = make([]*sseHub, max(1, runtime.GOMAXPROCS(0)/2))
		for i := range h.hubs {
			h.hubs[i] = newSSEHub(h)
		}
	})
	n := h.hubNext.Add(1)
	return h.hubs[n%uint64(len(h.hubs))]
}

// join makes st's events the hub's to write to out. The hub's goroutine runs while it
// has members: the first join starts it and it ends once the last has left.
func (hub *sseHub) join(st broker.Stream, out *eventStream, tw tryWriter, rec *recorder) *hubStream {
	s := &hubStream{st: st, out: out, tw: tw, rec: rec, index: -1,
		slow: make(chan []byte, 1), end: make(chan struct{}), served: make(chan struct{})}
	hub.mu.Lock()
	hub.members++
	if !hub.running {
		hub.running = true
		go hub.run()
	}
	hub.mu.Unlock()
	st.SetNotify(func() { hub.mark(s) })
	hub.mark(s) // what the stream had before the callback was set
	return s
}

// leave takes s out of the hub, waiting for the hub to finish writing it if it is.
func (hub *sseHub) leave(s *hubStream) {
	hub.mu.Lock()
	hub.members--
	wait := s.state == hsServing
	if wait {
		s.leaving = true
	} else {
		if s.state == hsDelayed {
			hub.delayed.Remove(s)
		}
		s.state = hsLeft // a queued one is passed over when its turn comes
	}
	hub.mu.Unlock()
	hub.signal()
	if wait {
		<-s.served
	}
}

// mark is the stream's notify callback: s has events (or has ended).
func (hub *sseHub) mark(s *hubStream) {
	hub.mu.Lock()
	switch s.state {
	case hsIdle:
		hub.scheduleLocked(s)
	case hsServing, hsSlow, hsPinging:
		s.pending = true
	}
	hub.mu.Unlock()
}

// scheduleLocked queues s: at once when its linger has passed (or it has not written
// yet), else in the heap until it has.
func (hub *sseHub) scheduleLocked(s *hubStream) {
	if linger := hub.h.linger; linger > 0 && !s.last.IsZero() {
		if due := s.last.Add(linger); hub.h.clock.Now().Before(due) {
			s.state, s.due = hsDelayed, due
			hub.delayed.Push(s)
			hub.signal()
			return
		}
	}
	s.state = hsQueued
	hub.ready = append(hub.ready, s)
	hub.signal()
}

// afterLocked puts s back to idle, or queues it again when it has more to send.
func (hub *sseHub) afterLocked(s *hubStream, more bool) {
	s.state = hsIdle
	if more || s.pending || len(s.st.Events()) > 0 {
		hub.scheduleLocked(s)
	}
	s.pending = false
}

func (hub *sseHub) signal() {
	select {
	case hub.wake <- struct{}{}:
	default:
	}
}

// run is the hub's goroutine: it serves the ready streams in turn and waits out the
// lingers of the others, until the hub has no member.
func (hub *sseHub) run() {
	timer := hub.h.clock.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		s, wait, quit := hub.next()
		if quit {
			return
		}
		if s == nil {
			if wait > 0 {
				timer.Reset(wait)
			}
			select {
			case <-hub.wake:
			case <-timer.C():
			}
			timer.Stop()
			continue
		}
		hub.serve(s)
	}
}

// next takes the next stream to serve, or says how long to wait for one (0: until
// woken), or that the hub has no member left and its goroutine ends.
func (hub *sseHub) next() (s *hubStream, wait time.Duration, quit bool) {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	if hub.members == 0 {
		hub.running = false
		hub.ready = nil
		hub.delayed = newLingerHeap()
		return nil, 0, true
	}
	now := hub.h.clock.Now()
	for hub.delayed.Len() > 0 && !now.Before(hub.delayed.Min().due) {
		d := hub.delayed.Pop()
		d.state = hsQueued
		hub.ready = append(hub.ready, d)
	}
	for len(hub.ready) > 0 {
		s = hub.ready[0]
		hub.ready[0] = nil
		hub.ready = hub.ready[1:]
		if s.state == hsQueued {
			s.state, s.pending = hsServing, false
			return s, 0, false
		}
	}
	if d := hub.delayed.Min(); d != nil {
		return nil, d.due.Sub(now), false
	}
	return nil, 0, false
}

// serve takes what s has ready, up to a batch, encodes it and writes it without
// waiting; then it puts s where it belongs next.
func (hub *sseHub) serve(s *hubStream) {
	h := hub.h
	ended, more, wrote := false, false, false
	var rest []byte
	// A slot, held across the write, which never waits and is fan-out's work too; the
	// budget counts the taking and encoding, as for every other stream.
	release, finish, ok := hub.slotAndBudget()
	if !ok {
		ended = true
	} else {
		hub.buf.Reset()
		var closed bool
		hub.batch, closed = s.st.Take(hub.batch[:0], maxEventsPerFlush)
		ended, more = closed, len(hub.batch) == maxEventsPerFlush
		for i := range hub.batch {
			if !h.encodeEvent(&hub.buf, &hub.batch[i], s.rec) {
				ended = true
				break
			}
		}
		clear(hub.batch)
		finish()
		if b := hub.buf.Bytes(); len(b) > 0 {
			n, err := s.tw.try(b)
			wrote = true
			switch {
			case err != nil:
				ended = true
			case n < len(b):
				rest = bytes.Clone(b[n:])
			}
		}
		release()
	}

	hub.mu.Lock()
	defer hub.mu.Unlock()
	if wrote {
		s.last = h.clock.Now()
	}
	switch {
	case s.leaving:
		s.state = hsLeft
		close(s.served)
	case rest != nil:
		// Its goroutine writes the rest, waiting for the client; an end waits for that.
		s.state, s.endAfter = hsSlow, ended
		s.slow <- rest
	case ended:
		s.state = hsEnded
		close(s.end)
	default:
		hub.afterLocked(s, more)
	}
}

// closedDone is a done channel already closed: FrameBudget with it only asks whether
// the budget has room now.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// slotAndBudget takes a fan-out slot and room in the fan-out budget, as a stream's
// apply does: the slot first, so that the hub is let in its turn, but given back while
// the budget is spent, so that a wait for the budget holds no slot.
func (hub *sseHub) slotAndBudget() (release, finish func(), ok bool) {
	h := hub.h
	for {
		if release, ok = h.frameSlot(h.streams, false); !ok {
			return nil, nil, false
		}
		if finish, ok = h.b.FrameBudget(closedDone); ok {
			return release, finish, true
		}
		release()
		wait, ok := h.b.FrameBudget(h.streams.Done())
		if !ok {
			return nil, nil, false
		}
		wait() // the wait is not work
	}
}

// slowDone is called by s's goroutine once it has written what the hub handed it.
func (hub *sseHub) slowDone(s *hubStream) {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	s.last = hub.h.clock.Now()
	if s.endAfter {
		s.state = hsEnded
		close(s.end)
		return
	}
	hub.afterLocked(s, false)
}

// ping has s's goroutine write a ping unless the stream is busy (and so not quiet);
// false when the write failed.
func (hub *sseHub) ping(s *hubStream) bool {
	hub.mu.Lock()
	if s.state != hsIdle {
		hub.mu.Unlock()
		return true
	}
	s.state = hsPinging
	hub.mu.Unlock()
	err := s.out.write(pingComment)
	hub.mu.Lock()
	hub.afterLocked(s, false)
	hub.mu.Unlock()
	return err == nil
}

// newLingerHeap returns a heap of the streams waiting out their linger, by when it ends.
func newLingerHeap() indexheap.Heap[hubStream] {
	return indexheap.New(func(a, b *hubStream) bool { return a.due.Before(b.due) }, func(s *hubStream) *int { return &s.index })
}

// serveHubbed follows a stream that hub serves until it ends, its client leaves or the
// server stops: it finishes the writes the hub could not and sends the pings.
func (h *Handler) serveHubbed(ctx context.Context, hub *sseHub, s *hubStream, ping herald.Timer) {
	defer hub.leave(s)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.end:
			return
		case b := <-s.slow:
			if s.out.write(b) != nil {
				return
			}
			hub.slowDone(s)
		case <-ping.C():
			ping.Reset(h.ping)
			if !hub.ping(s) {
				return
			}
		}
	}
}
