package client

// SetWatchCredit sets the credit each watch on a WatchMany call opens with, and
// returns what restores it. Not for tests that run in parallel.
func SetWatchCredit(n int) (restore func()) {
	old := maxQueuedEvents
	maxQueuedEvents = n
	return func() { maxQueuedEvents = old }
}
