//go:build unix

package httpapi

import (
	"errors"
	"net"
	"syscall"
)

// tryWriter is a connection the SSE hub can write to without waiting: one attempt that
// takes what the socket's buffer has room for and returns at once.
type tryWriter struct{ raw syscall.RawConn }

// newTryWriter returns conn's tryWriter, or false when conn is not a socket of this
// process (TLS, say), whose writes only its own goroutine can make.
func newTryWriter(conn net.Conn) (tryWriter, bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return tryWriter{}, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return tryWriter{}, false
	}
	return tryWriter{raw: raw}, true
}

// try writes what of b the socket takes now and returns how much that was; a full
// socket buffer is n < len(b) with no error.
func (t tryWriter) try(b []byte) (n int, err error) {
	var werr error
	cerr := t.raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, e := writeNow(fd, b[n:])
			if e == syscall.EINTR {
				continue
			}
			if e == syscall.EAGAIN {
				break
			}
			if e != nil {
				werr = e
				break
			}
			if m == 0 {
				werr = errors.New("write returned 0 bytes")
				break
			}
			n += m
		}
		return true // never wait for room: the stream's own goroutine does that
	})
	if werr != nil {
		return n, werr
	}
	return n, cerr
}
