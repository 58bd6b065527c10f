package watch

import (
	"runtime"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/standing"
)

// enqueue is the engine's listener: it runs on the commit path, so it only queues the
// durable change sets for the dispatcher.
func (s *Service) enqueue(sets []*herald.ChangeSet) {
	if s.open.Load() > 0 {
		s.recent.add(sets)
	} else {
		s.recent.skip(sets) // nothing to keep them for: no garbage collector's work either
	}
	s.inMu.Lock()
	s.incoming = append(s.incoming, sets...)
	s.inMu.Unlock()
	select {
	case s.inWake <- struct{}{}:
	default:
	}
}

// dispatcher hands queued commits to the streams they touch until Stop.
func (s *Service) dispatcher() {
	defer close(s.dispDone)
	defer func() {
		s.mu.Lock()
		close(s.dispMoved) // no Flush waits for a dispatcher that has stopped
		s.dispMoved = make(chan struct{})
		s.mu.Unlock()
	}()
	idleCheck := s.clock.NewTimer(parkAfter)
	defer idleCheck.Stop()
	feedWake := s.clock.NewTimer(time.Hour) // armed when a feed waits out its linger
	feedWake.Stop()
	defer feedWake.Stop()
	var woken []*watcher // reached by commits, not yet woken
	for {
		select {
		case <-s.inWake:
		case <-s.roundDone:
		case <-feedWake.C():
		case <-idleCheck.C():
			s.hintIdle()
			idleCheck.Reset(parkAfter)
			continue
		case <-s.quit:
			return
		}
		s.inMu.Lock()
		sets := s.incoming
		s.incoming = nil
		s.inMu.Unlock()
		// Hand the commits over as they come, a slice at a time, yielding the CPU between
		// slices, even while a round is out: held back until the round ended, they would
		// reach every stream at once, a burst of work on a CPU the writers want.
		for len(sets) > 0 {
			if woken, sets = s.onCommit(sets, woken, dispatchSlice); len(sets) > 0 {
				runtime.Gosched()
			}
		}
		// Wake the streams the commits reached a few at a time, each few once the last
		// has taken its share: a thousand streams woken at once would queue a thousand
		// goroutines ahead of the writers on the CPUs.
		if s.inRound.Load() == 0 {
			var due time.Time
			if woken, due = s.wakeRound(woken); !due.IsZero() {
				feedWake.Reset(max(due.Sub(s.clock.Now()), time.Microsecond))
			}
		}
	}
}

// wakeRound wakes the first few of woken as a round and returns the rest. Once woken
// is empty, the streams of the feeds appended to meanwhile join it: each pass over
// them covers every commit their feed got since the pass before. due is when a feed
// that waits out its linger is to be woken (zero: none waits).
func (s *Service) wakeRound(woken []*watcher) (_ []*watcher, due time.Time) {
	s.mu.Lock()
	if len(woken) == 0 {
		woken, due = s.wakeFeedsLocked(woken)
	}
	k := min(len(woken), s.wakeBatch)
	for _, w := range woken[:k] {
		w.inWoken = false // a later commit that reaches it queues it again
	}
	s.mu.Unlock()
	for _, w := range woken[:k] {
		w.wakeInRound()
	}
	clear(woken[:k])
	return woken[k:], due
}

// waitDispatched waits until every commit durable now has reached the streams it
// touches (or the service stops), and returns that position.
func (s *Service) waitDispatched() (seq, tick uint64) {
	durable, _ := s.eng.Durable()
	for {
		s.mu.Lock()
		seq, tick, moved, stopped := s.dispSeq, s.dispTick, s.dispMoved, s.stopped || !s.started
		s.mu.Unlock()
		if seq >= durable || stopped {
			return seq, tick
		}
		<-moved
	}
}

// dispatched returns the position up to which every durable commit has reached the
// streams it touches.
func (s *Service) dispatched() (seq, tick uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dispSeq, s.dispTick
}

// dispatchSlice bounds the time onCommit works on in one go before it hands the rest
// back to the dispatcher, which yields the CPU before going on.
const dispatchSlice = 500 * time.Microsecond

// onCommit hands durable change sets to the watchers whose types they touch (the
// dispatch index); other watchers never see them. It runs on the dispatcher, appends
// to woken the streams to wake (each once a hand-over), and returns the sets it
// left for the next call once it has worked for slice (at least one set a call).
func (s *Service) onCommit(sets []*herald.ChangeSet, woken []*watcher, slice time.Duration) (_ []*watcher, rest []*herald.ChangeSet) {
	start := time.Now() // a measurement, not a timer: it reads the real clock
	done := 0
	s.mu.Lock()
	defer func() {
		s.mu.Unlock()
		s.dispatchCommits.Add(uint64(done))
		s.dispatchNanos.Add(uint64(time.Since(start)))
	}()
	for _, cs := range sets {
		if done > 0 && time.Since(start) >= slice {
			break
		}
		done++
		s.dispMark++
		if len(cs.Changes) == 0 {
			// A tick of its own (TICK, or the interval timer): it ends the previous tick
			// for deliver_on: tick watches.
			for w := range s.perTick {
				s.touchLocked(w)
			}
		}
		if len(s.watchers) > 0 { // else no index holds a stream: nothing to look up
			for _, ch := range cs.Changes {
				s.touchChangeLocked(ch, cs)
			}
		}
		for _, w := range s.touched {
			w.push(cs)
			woken = s.queueWakeLocked(w, woken)
		}
		s.dispSeq, s.dispTick = cs.Seq, cs.Tick
		clear(s.touched)
		s.touched = s.touched[:0]
	}
	close(s.dispMoved)
	s.dispMoved = make(chan struct{})
	return woken, sets[done:]
}

// queueWakeLocked appends w to woken unless it is there already; s.mu must be held.
func (s *Service) queueWakeLocked(w *watcher, woken []*watcher) []*watcher {
	if !w.inWoken {
		w.inWoken = true
		woken = append(woken, w)
	}
	return woken
}

// touchChangeLocked adds to s.touched the streams that ch may concern: those of the
// feeds of the types it changes, and those the standing index holds for it.
func (s *Service) touchChangeLocked(ch herald.Change, cs *herald.ChangeSet) {
	types, n := standing.ChangeTypes(ch)
	if len(s.feeds) > 0 {
		for _, t := range types[:n] {
			s.touchFeedLocked(t, cs)
		}
	}
	s.index.TouchTyped(ch, types, n, s.touchFn)
}

// touchLocked adds w to s.touched once per change set: a mark on the stream rather
// than a set, as a thousand streams on one type would otherwise cost a thousand map
// insertions per commit.
func (s *Service) touchLocked(w *watcher) {
	if w.touchMark != s.dispMark {
		w.touchMark = s.dispMark
		s.touched = append(s.touched, w)
	}
}
