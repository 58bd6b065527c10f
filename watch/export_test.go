package watch

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
