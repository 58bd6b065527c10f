//go:build race

package client

// raceEnabled says the tests run under the race detector, which changes what some
// allocation counts can promise (sync.Pool drops items on purpose).
const raceEnabled = true
