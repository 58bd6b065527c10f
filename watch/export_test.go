package watch

import (
	"runtime"
	"time"

	"github.com/herald-mq/herald"
)

// SetMaxPast lowers the bound on what a join watch replays, for tests; the returned
// function restores it.
func SetMaxPast(n int) (restore func()) {
	old := maxPast
	maxPast = n
	return func() { maxPast = old }
}

// HoldDispatch stops the dispatcher from handing commits to streams until release is
// called, as a dispatcher busy with many streams would.
func (s *Service) HoldDispatch() (release func()) {
	s.mu.Lock()
	return s.mu.Unlock
}

// WakeAsDispatcher wakes st as the dispatcher does for a commit that touched it.
func WakeAsDispatcher(st herald.Stream) { st.(*watcher).wakeInRound() }

// InRound is how many woken streams the dispatcher's round still waits for.
func (s *Service) InRound() int64 { return s.inRound.Load() }

// SharesHeld is how many distinct share keys open streams hold.
func (s *Service) SharesHeld() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.shares)
}

// Drain returns the events a stream has ready, in its channel and in its queue behind
// the channel, without waiting for anything new; closed reports that the stream ended.
// (After Flush every durable commit has become events, but the channel holds only a
// few of them: the stream's goroutine hands on the rest as the reader makes room.)
func Drain(st herald.Stream) (evs []herald.Event, closed bool) {
	w := st.(*watcher)
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				return evs, true
			}
			evs = append(evs, ev)
			continue
		default:
		}
		// Nothing is waiting once the queue is empty and, after that, the channel too
		// (the stream's goroutine may have just moved the queue's last event over).
		if !w.queuedEvents() && len(w.events) == 0 {
			return evs, false
		}
		runtime.Gosched()
	}
}

// CompiledHeld is how many compiled statements open streams share.
func (s *Service) CompiledHeld() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.Held()
}

// HintIdle runs the service's idle check now, as its timer does every parkAfter.
func (s *Service) HintIdle() { s.hintIdle() }

// Overflowed reports whether on_full: error has decided to end st: its buffer filled.
func Overflowed(st herald.Stream) bool {
	w := st.(*watcher)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.overflow
}

// CtxGroups counts the Open contexts the service watches for streams (ctxclose.go).
func (s *Service) CtxGroups() int {
	s.ctxMu.Lock()
	defer s.ctxMu.Unlock()
	return len(s.byCtx)
}

// HandOver runs one of the dispatcher's hand-overs of sets to the streams they touch,
// working for at most slice (at least one set), and returns how many streams it woke
// (each once, however many sets reached it) and how many sets it left for the next.
// The streams are not woken: what they were handed waits in their queues.
func (s *Service) HandOver(sets []*herald.ChangeSet, slice time.Duration) (woken, rest int) {
	w, left := s.onCommit(sets, nil, slice)
	s.mu.Lock()
	for _, w := range w {
		w.inWoken = false // as the dispatcher's wakeRound does
	}
	s.mu.Unlock()
	return len(w), len(left)
}

// RecentHeld is how many durable change sets the service keeps in memory for streams
// that fall behind.
func (s *Service) RecentHeld() int { return s.recent.held() }

// QueuedEvents returns the events waiting in st's queue behind its channel, as the
// queue holds them.
func QueuedEvents(st herald.Stream) []*herald.Event {
	w := st.(*watcher)
	w.qmu.Lock()
	defer w.qmu.Unlock()
	var out []*herald.Event
	for i := range w.outq.len() {
		buf := w.outq.buf()
		out = append(out, buf[(w.outq.head+i)%len(buf)])
	}
	return out
}

// Overspend charges d of work to the service's fan-out budget, as streams that worked
// past their share would: with the manual clock, a stream that takes an apply slot
// then waits until the clock moves past what is owed.
func (s *Service) Overspend(d time.Duration) {
	s.budget.wait() // starts the budget's window at the clock's time
	s.budget.spend(d)
}

// Dispatched is the position up to which every durable commit has reached the queues
// of the streams it touches.
func (s *Service) Dispatched() uint64 {
	seq, _ := s.dispatched()
	return seq
}

// SetFeedCap lowers how many change sets a feed keeps, for tests; the returned function
// restores it. It applies to feeds created after the call.
func SetFeedCap(n int) (restore func()) {
	old := feedCap
	feedCap = uint64(n)
	return func() { feedCap = old }
}

// FeedMembers is how many streams read the feed of typ (0: there is none).
func (s *Service) FeedMembers(typ string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.feeds[typ]; f != nil {
		return len(f.members)
	}
	return 0
}

// TakeApplySlot takes one of the service's apply slots, as a stream about to apply
// change sets does: through the budget's gate (after the stream that waits for the
// budget), then waiting for a slot to be free; GiveApplySlot gives it back.
func (s *Service) TakeApplySlot() {
	s.budgetGate <- struct{}{}
	s.applySlots <- struct{}{}
	<-s.budgetGate
}
func (s *Service) GiveApplySlot() { <-s.applySlots }

// SetYield replaces what a stream does to let waiting goroutines run between the
// change sets it applies (runtime.Gosched), for tests.
func (s *Service) SetYield(f func()) { s.gosched = f }

// BudgetSpent is the fan-out time the service's budget has counted since it started.
func (s *Service) BudgetSpent() time.Duration { return s.budget.spent() }

// Queued is how many events st has put in its queue for the transport since it opened
// (its events_delivered counter), whether they were taken or dropped later.
func Queued(st herald.Stream) int {
	w := st.(*watcher)
	w.statMu.Lock()
	defer w.statMu.Unlock()
	return w.delivered
}

// SetSkipping turns off (or on) the skipping of a backlog by best-effort streams behind
// in their feed, and the queueing of gathered events together, so that a test can
// compare both with dropping the oldest one by one.
func SetSkipping(on bool) (restore func()) {
	old, oldFit := skipping, fitting
	skipping, fitting = on, on
	return func() { skipping, fitting = old, oldFit }
}
