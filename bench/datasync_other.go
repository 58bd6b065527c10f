//go:build !linux

package bench

import "os"

// datasync syncs f; without fdatasync, Sync is the nearest.
func datasync(f *os.File) error { return f.Sync() }
