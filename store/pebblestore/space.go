//go:build linux

package pebblestore

import "syscall"

// FreeBytes reports the space left for an unprivileged writer on the disk that holds
// the store (engine.SpaceReporter). A store on an in-memory filesystem has no such
// directory and answers an error, which the engine reads as "unknown".
func (s *Store) FreeBytes() (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
