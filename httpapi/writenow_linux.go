package httpapi

import (
	"syscall"
	"unsafe"
)

// writeNow is write(2) on a non-blocking socket, made without telling the scheduler: the
// call returns at once (EAGAIN when the buffer is full), so the goroutine keeps its P.
// Through syscall.Write, a write that takes longer than 20 µs (on loopback it delivers
// to the reader in the same call) can have the runtime's monitor hand the P to another
// thread and wake it. On a two-CPU paravirtualized guest, where waking a thread is
// dear, 1,000 SSE streams got about a third more events a second this way, and the
// writers' p99 beside them fell (docs/benchmarks.md, "a fifteenth round").
func writeNow(fd uintptr, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
