//go:build !race

// Package race says whether the race detector is built in, for tests whose allocation
// counts it changes (sync.Pool drops items on purpose under it). It is one constant,
// Enabled, set by the race build tag.
package race

// Enabled is false: the race detector is not built in.
const Enabled = false
