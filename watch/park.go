package watch

import "time"

// An idle stream gives its goroutine up. A goroutine waiting in the stream's loop holds
// a stack of a few kilobytes, more than the rest of an idle watch; a server with
// thousands of quiet watches would spend most of their memory on stacks that wait.
//
// Parking: once a round of the service's idle check (parkAfter) has found a stream
// with nothing done since the round before, the check hints it (parkHint) and wakes it.
// At its next idle point, when it has no timer (heartbeat, window) and no event waiting
// to be handed out one by one, the loop ends its goroutine instead of waiting (park).
// Everything that would have woken the loop kicks the stream instead: a kick of a
// parked stream starts a new goroutine that runs the loop from its top. Streams that
// keep working are never hinted, so they do not start a goroutine per wake.
//
// The protocol, for a signal on a buffered channel (wake, room) or the closing of stop:
// the signaller sends, then kicks (kicked = true, then parked: true → false starts the
// goroutine). The parking loop clears kicked, takes any signal already sent, sets
// parked, and then, if kicked was set meanwhile, takes parked back (true → false) and
// goes on. Exactly one of the two compare-and-swaps can win, so one goroutine runs
// the loop at a time and no signal is left for a stream without one. Requests on the
// unbuffered channel (reqs) are counted in callers from before their kick until the
// loop receives them: a stream with a caller waiting does not park.

// parkAfter is the period of the service's idle check: a stream parks after one to two
// periods without work.
const parkAfter = time.Second

// kick restarts a parked stream's goroutine; for a running one it only notes that a
// signal came.
func (w *watcher) kick() {
	w.kicked.Store(true)
	if w.parked.CompareAndSwap(true, false) {
		w.svc.parkedStreams.Add(-1)
		go w.run()
	}
}

// signal sends on a buffered wake-up channel of the stream (wake, room) and kicks it.
func (w *watcher) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
	w.kick()
}

// call counts a request about to be sent on the loop's unbuffered channel (reqs) and
// kicks the stream; the loop uncounts it on receipt (received), and the caller
// when it gives up before the loop took it (uncall).
func (w *watcher) call()     { w.callers.Add(1); w.kick() }
func (w *watcher) received() { w.callers.Add(-1) }
func (w *watcher) uncall()   { w.callers.Add(-1) }

// park ends the stream's goroutine at an idle point of its loop, when the idle check
// hinted it and nothing is pending. It reports false when the loop is to go on: a
// signal was pending (and was taken: the loop's top does what it asked), or a caller
// waits. The caller has checked that no timer runs and no event waits to be handed out.
func (w *watcher) park() bool {
	if !w.parkHint.Load() || w.callers.Load() > 0 {
		return false
	}
	w.kicked.Store(false)
	select {
	case <-w.stop:
		return false
	case <-w.wake:
		return false
	case <-w.room:
		return false
	default:
	}
	w.parkHint.Store(false)
	return w.parkNow()
}

// parkNow marks the stream parked. It reports false, with the mark taken back, when a
// signal or a caller came since kicked was last cleared and no new goroutine was
// started for it: the caller's goroutine goes on with the loop instead.
func (w *watcher) parkNow() bool {
	w.svc.parkedStreams.Add(1)
	w.parked.Store(true)
	if (w.kicked.Load() || w.callers.Load() > 0) && w.parked.CompareAndSwap(true, false) {
		w.svc.parkedStreams.Add(-1)
		return false
	}
	return true
}

// startParked opens a stream that has nothing to do yet (no reset, snapshot or timer)
// parked, as if it had parked at once: opening thousands of such watches starts no
// goroutine, and so no stack, for any of them until a commit, request or close
// concerns it. A signal that came since the stream was registered starts the loop, as
// in park.
func (w *watcher) startParked() {
	if !w.parkNow() {
		go w.run()
	}
}

// hintIdle is the idle check: it hints the streams that did nothing since the last
// check to park, and wakes them so that they do. It runs on the dispatcher.
func (s *Service) hintIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watchers {
		if w.parked.Load() || w.active.Swap(false) {
			continue
		}
		w.parkHint.Store(true)
		w.signal(w.wake)
	}
}
