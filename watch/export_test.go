package watch

// SetMaxPast lowers the bound on what a join watch replays, for tests; the returned
// function restores it.
func SetMaxPast(n int) (restore func()) {
	old := maxPast
	maxPast = n
	return func() { maxPast = old }
}
