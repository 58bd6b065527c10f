package watch

import "github.com/herald-mq/herald"

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
