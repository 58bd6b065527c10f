//go:build !unix

package httpapi

import "net"

// tryWriter is the SSE hub's non-waiting write; off unix there is none, and every
// stream keeps a goroutine of its own that writes.
type tryWriter struct{}

func newTryWriter(net.Conn) (tryWriter, bool) { return tryWriter{}, false }

func (tryWriter) try([]byte) (int, error) { return 0, nil }
