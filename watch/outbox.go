package watch

import (
	"context"
	"slices"

	"github.com/herald-mq/herald"
)

// Events wait in two places: the stream's channel, which the transport reads and which
// holds at most chanCap of them, and the watcher's own queue behind it (outq), which
// grows as needed up to the watch's buffer. An idle watch holds no queue, and dropping
// the oldest event of a full one costs the same whatever its buffer.
//
// A transport may read event by event: the stream's goroutine then waits for room in
// the channel, and is woken once per event taken. A transport that takes events in
// batches calls Take instead: it takes what the channel holds and, once the stream's
// goroutine has seen that it does (batchAck), what waits in the queue behind it, all
// under qmu, so that the two goroutines meet once per batch rather than once per
// event, and the channel needs no more than one event's room.

// chanCap bounds the events waiting in a stream's channel.
const chanCap = 1

// chanCapFor is the channel share of a watch's buffer, plus one slot that only the
// event ending the stream uses (so an error can follow a full buffer without waiting
// for the transport when nothing else is queued).
func chanCapFor(buffer int) int { return max(1, min(buffer, chanCap)) + 1 }

// Take appends to dst, up to max events in all, what waits for the transport, in order:
// what the stream's channel holds, then what is queued behind it. It reports closed when
// the channel was closed: the stream has ended and everything it sent is taken. A
// transport that calls Take takes events in batches (see above); Take wakes the stream's
// goroutine only if it waits for room (roomWait), or has yet to switch to batches: a
// wake for nothing, once per batch of each of a thousand streams, would keep the CPUs'
// run queues full of them.
func (w *watcher) Take(dst []herald.Event, max int) (events []herald.Event, closed bool) {
	w.batched.Store(true)
	batches := w.batchAck.Load()
	w.qmu.Lock()
take:
	for len(dst) < max {
		select {
		case ev, ok := <-w.events:
			if !ok {
				closed = true
				break take
			}
			dst = append(dst, ev)
			continue
		default:
		}
		if !batches {
			break
		}
		// The channel is empty: what follows comes from the queue, which nothing else
		// drains while qmu is held, so the channel stays empty.
		dst = w.takeQueuedLocked(dst, max)
		break
	}
	if batches && !closed {
		// What max left in the queue starts the channel again, so that a transport
		// that waits on the channel sees it.
		w.flushLocked(false)
	}
	w.qmu.Unlock()
	if !batches || w.roomWait.Load() {
		w.signal(w.room)
	}
	return dst, closed
}

// takeQueuedLocked appends to dst, up to max events in all, the gap marker and the
// events queued, and forgets them; the counters are updated once for all of them.
func (w *watcher) takeQueuedLocked(dst []herald.Event, max int) []herald.Event {
	if w.gap > 0 && len(dst) < max {
		dst = append(dst, w.headLocked())
		w.gap = 0
	}
	n := min(w.outq.len(), max-len(dst))
	if n <= 0 {
		return dst
	}
	dst = slices.Grow(dst, n)
	for range n {
		dst = append(dst, *w.outq.front())
		w.outq.popFront()
	}
	w.queued.Store(int64(w.outq.len()))
	return dst
}

// SetNotify has fn called whenever the stream puts events into its channel or closes
// it, so that a transport serving many streams learns which have something to read
// without a goroutine waiting on each channel. fn must not block; it may run with the
// stream's queue locked, and must not call back into the stream.
func (w *watcher) SetNotify(fn func()) { w.notifyFn.Store(&fn) }

func (w *watcher) notify() {
	if fn := w.notifyFn.Load(); fn != nil {
		(*fn)()
	}
}

// ackBatch switches the stream's goroutine to batches once its transport has asked
// for them. From then on it never holds a copy of the queue's head across a wait.
func (w *watcher) ackBatch() {
	if w.batched.Load() {
		w.batchAck.Store(true)
	}
}

// full reports whether the events waiting for the transport have reached the watch's
// buffer, or the bytes the service allows a stream (Config.MaxBufferBytes).
// flushFull moves what the channel has room for into it, then reports full, under one
// hold of the queue's lock.
func (w *watcher) flushFull() bool {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	w.flushLocked(false)
	return w.fullLocked()
}

func (w *watcher) fullLocked() bool {
	return w.outq.len()+len(w.events)+min(w.gap, 1) >= w.q.Opts.Buffer || w.overBytesLocked()
}

func (w *watcher) full() bool {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	return w.outq.len()+len(w.events)+min(w.gap, 1) >= w.q.Opts.Buffer || w.overBytesLocked()
}

// queuedEvents reports whether the queue has something for the channel.
func (w *watcher) queuedEvents() bool {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	return w.queuedLocked()
}

func (w *watcher) queuedLocked() bool { return w.gap > 0 || w.outq.len() > 0 }

// headLocked is the next event to hand to the transport: the gap marker first, when
// the queue dropped events.
func (w *watcher) headLocked() herald.Event {
	if w.gap > 0 {
		return herald.Event{Type: herald.EventGap, Count: w.gap, Seq: w.gapSeq, Tick: w.gapTick}
	}
	return *w.outq.front()
}

// popHead forgets the event the head was, once the channel took it.
func (w *watcher) popHead() {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	w.popHeadLocked()
}

func (w *watcher) popHeadLocked() {
	if w.gap > 0 {
		w.gap = 0
	} else {
		w.outq.popFront()
	}
	w.queued.Store(int64(w.outq.len()))
}

// out returns the channel and the queue's head when the stream hands events on one by
// one and has one to hand, else a nil channel (a select case on it never fires). Only
// the stream's goroutine touches the queue in that mode, so the head stays the head.
func (w *watcher) out() (chan<- herald.Event, herald.Event) {
	if w.batchAck.Load() {
		return nil, herald.Event{}
	}
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if !w.queuedLocked() {
		return nil, herald.Event{}
	}
	return w.events, w.headLocked()
}

// channelFull reports whether the channel holds all it may before an ending event.
func (w *watcher) channelFull() bool { return len(w.events) >= cap(w.events)-1 }

// flush moves what it can from the queue to the channel without waiting, leaving the
// last slot free for an ending event.
func (w *watcher) flush() {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	w.flushLocked(false)
}

// flushLocked is flush; with last it may fill the last slot too. Once the transport
// takes in batches (Take), one event in the channel is enough to wake it, and Take
// reads the rest from the queue, where the events of a commit shared by identical
// watches are one pointer each: the channel holds a copy of every event it carries.
func (w *watcher) flushLocked(last bool) {
	moved := false
	defer func() {
		if moved {
			w.notify()
		}
	}()
	batched := !last && w.batchAck.Load()
	for w.queuedLocked() && (last || !w.channelFull()) {
		if batched && len(w.events) > 0 {
			return
		}
		select {
		case w.events <- w.headLocked():
			w.popHeadLocked()
			moved = true
		default:
			return
		}
	}
}

// enqueueAndFlush puts ev at the back of the queue and moves what the channel has room
// for into it, under one hold of the queue's lock.
func (w *watcher) enqueueAndFlush(ev *herald.Event) {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	w.outq.pushBack(ev)
	w.queued.Store(int64(w.outq.len()))
	w.flushLocked(false)
}

// enqueue puts ev at the back of the queue, which keeps the pointer: ev is not written
// again.
func (w *watcher) enqueue(ev *herald.Event) {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	w.outq.pushBack(ev)
	w.queued.Store(int64(w.outq.len()))
}

// awaitRoom waits, in batches, until the transport has taken events from the channel, or
// until done or alsoDone; it reports false when one of them came first. It announces the
// wait (roomWait) and then refills the channel (with last, its last slot too) and looks
// at the queue again: either that look sees what a Take before it did, or the Take
// after it sees the announcement and signals.
func (w *watcher) awaitRoom(last bool, done, alsoDone <-chan struct{}) bool {
	w.roomWait.Store(true)
	defer w.roomWait.Store(false)
	w.qmu.Lock()
	w.flushLocked(last)
	queued := w.queuedLocked()
	w.qmu.Unlock()
	if !queued {
		return true
	}
	select {
	case <-w.room:
		return true
	case <-done:
		return false
	case <-alsoDone:
		return false
	}
}

// drain waits until the queue is all in the channel; false when the stream was closed
// meanwhile.
func (w *watcher) drain() bool {
	if w.queuedEvents() {
		defer w.waitTransport()() // waiting for the transport holds no one else up
	}
	for {
		if w.batchAck.Load() {
			if w.flush(); !w.queuedEvents() {
				return true
			}
			if !w.awaitRoom(false, w.stop, nil) {
				return false
			}
			continue
		}
		out, head := w.out()
		if out == nil {
			return true
		}
		select {
		case out <- head:
			w.popHead()
			w.notify()
		case <-w.room:
			w.ackBatch()
		case <-w.stop:
			return false
		}
	}
}

// send delivers ev under the watch's delivery rules. It reports false when the stream
// has ended (closed, or cancelled by on_full: error). The queue may keep ev's pointer
// (enqueue), so ev is not written again; the events of a commit that identical watches
// share are sent this way without a copy for each.
func (w *watcher) send(ev *herald.Event) bool {
	if !w.sendGathered() {
		return false
	}
	select {
	case <-w.stop:
		return false
	default:
	}
	if w.flushFull() {
		switch {
		case w.q.Opts.Reliable || w.q.Opts.OnFull == "block":
			// Wait for the transport: this watch pauses, nothing else does.
			if !w.drain() {
				return false
			}
			defer w.waitTransport()()
			select {
			case w.events <- *ev:
				w.notify()
				w.sent(ev)
				return true
			case <-w.stop:
				return false
			}
		case w.q.Opts.OnFull == "error":
			w.mu.Lock()
			w.overflow = true
			w.mu.Unlock()
			// The _Watch node says so at once: the error event itself waits for the
			// transport, which a client that stopped reading may never let through.
			w.saveNode(context.Background(), "cancelled")
			err := herald.Errorf(herald.CodeWatchBufferOverflow, "the watch's buffer (%d events, %d bytes) is full and on_full is error; the watch is cancelled", w.q.Opts.Buffer, w.svc.cfg.MaxBufferBytes)
			return w.end(herald.Event{Type: herald.EventError, Error: err, Code: err.Code, Message: err.Message, Seq: w.cursor, Tick: w.tick})
		default:
			w.dropOldest()
		}
	}
	w.enqueueAndFlush(ev)
	w.sent(ev)
	return true
}

// dropOldest makes room for one event under on_full: drop. The oldest events go, and the
// gap marker in front of the queue counts them, so the gap stands where the events are
// missing. What waits in the channel (at most chanCap events and a gap marker) is older
// than the queue: it is taken back into the queue first, so that it is what goes.
func (w *watcher) dropOldest() {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	w.dropOldestLocked()
}

func (w *watcher) dropOldestLocked() {
	w.takeBackLocked()
	for w.outq.len() > 0 && (w.outq.len()+len(w.events) >= w.q.Opts.Buffer || w.overBytesLocked()) {
		w.outq.popFront()
		w.gap++
	}
	if w.gap > 0 {
		// The gap shows the stream's position as of the drop: the transport may read the
		// marker on its own goroutine, where the cursor is not to be read.
		w.gapSeq, w.gapTick = w.cursor, w.tick
	}
}

// takeBackLocked moves what waits in the channel back to the front of the queue, a gap
// marker there into the gap count: it is older than the queue, so it is what a drop
// takes first.
func (w *watcher) takeBackLocked() {
	var back []herald.Event
	for more := true; more; {
		select {
		case old := <-w.events:
			if old.Type == herald.EventGap {
				w.gap += old.Count
			} else {
				back = append(back, old)
			}
		default:
			more = false
		}
	}
	for i := len(back) - 1; i >= 0; i-- {
		w.outq.pushFront(&back[i])
	}
}

// overBytesLocked reports whether the events the stream holds for its client have
// reached the bytes the service allows a stream (Config.MaxBufferBytes).
func (w *watcher) overBytesLocked() bool { return w.outq.bytes >= w.svc.cfg.MaxBufferBytes }

// gathers reports whether apply may gather the stream's events for sendGathered rather
// than send each: under on_full: drop, where a full buffer never waits.
func (w *watcher) gathers() bool {
	return !w.q.Opts.Reliable && w.q.Opts.OnFull == "drop"
}

// sendGathered queues the events apply gathered (w.gathered), in order, as send would
// queue each under on_full: drop, but with one hold of the queue's lock and one update
// of the counters for all of them: a thousand streams on one type each queue every
// event, and the locking per event was much of what that cost. It reports false when the
// stream has ended. send calls it first, so that nothing overtakes what was gathered.
func (w *watcher) sendGathered() bool {
	evs := w.gathered
	if len(evs) == 0 {
		return true
	}
	w.gathered = evs[:0]
	defer clear(evs)
	select {
	case <-w.stop:
		return false
	default:
	}
	w.qmu.Lock()
	if w.fitsLocked(evs) {
		for _, ev := range evs {
			w.outq.pushBack(ev)
		}
	} else {
		for _, ev := range evs {
			w.flushLocked(false)
			if w.fullLocked() {
				w.dropOldestLocked()
			}
			w.outq.pushBack(ev)
		}
	}
	w.queued.Store(int64(w.outq.len()))
	w.flushLocked(false)
	w.qmu.Unlock()
	w.sentN(len(evs), evs[len(evs)-1].Seq)
	return true
}

// fitting is false only in tests that compare queueing together with queueing one by
// one.
var fitting = true

// fitsLocked reports whether queueing evs one by one would drop nothing: the buffer
// has room for all of them, and the bytes held before the last is queued stay under
// the stream's bound even if nothing moves on to the channel meanwhile.
func (w *watcher) fitsLocked(evs []*herald.Event) bool {
	if !fitting {
		return false
	}
	if w.outq.len()+len(w.events)+min(w.gap, 1)+len(evs) > w.q.Opts.Buffer {
		return false
	}
	b := w.outq.bytes
	for _, ev := range evs[:len(evs)-1] {
		b += eventSize(ev)
	}
	return b < w.svc.cfg.MaxBufferBytes
}

// end delivers what is waiting, then ev (an error), and closes the stream.
func (w *watcher) end(ev herald.Event) bool {
	if !w.sendGathered() {
		return false
	}
	defer w.waitTransport()()
	if w.drain() {
		select {
		case w.events <- ev:
			w.notify()
		case <-w.stop:
		}
	}
	w.Close()
	return false
}

// deliverLast delivers what is waiting and then ev to a stream that was closed by a CANCEL:
// its transport still reads until its own context ends or the service stops.
func (w *watcher) deliverLast(ev herald.Event) {
	defer w.waitTransport()()
	w.enqueue(&ev)
	for {
		if w.batchAck.Load() {
			w.qmu.Lock()
			w.flushLocked(true)
			w.qmu.Unlock()
			if !w.queuedEvents() {
				return
			}
			if !w.awaitRoom(true, w.ctxDone, w.svc.quit) {
				return
			}
			continue
		}
		out, head := w.out()
		if out == nil {
			return
		}
		select {
		case out <- head:
			w.popHead()
			w.notify()
		case <-w.room:
			w.ackBatch()
		case <-w.ctxDone:
			return
		case <-w.svc.quit:
			return
		}
	}
}
