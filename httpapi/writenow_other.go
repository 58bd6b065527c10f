//go:build unix && !linux

package httpapi

import "syscall"

// writeNow is write(2) on a non-blocking socket (see writenow_linux.go).
func writeNow(fd uintptr, b []byte) (int, error) { return syscall.Write(int(fd), b) }
