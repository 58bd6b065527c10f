//go:build !linux

package pebblestore

import "errors"

// FreeBytes is not measured on this platform: the engine keeps no reserve.
func (s *Store) FreeBytes() (uint64, error) {
	return 0, errors.New("pebblestore: free space is not measured on this platform")
}
