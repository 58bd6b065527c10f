//go:build unix

package httpapi

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// loopbackPair returns the two ends of a TCP connection on loopback.
func loopbackPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// TestTryWriterNeverWaits: try takes what the socket's buffer has room for and returns
// at once with no error when the reader is slow; what it took arrives whole and in
// order; once the reader is gone, try reports an error.
func TestTryWriterNeverWaits(t *testing.T) {
	server, client := loopbackPair(t)
	tw, ok := newTryWriter(server)
	if !ok {
		t.Fatal("a TCP connection has no tryWriter")
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 4<<20) // 64 MB: more than any socket buffer
	start := time.Now()
	n, err := tw.try(big)
	if err != nil || n <= 0 || n >= len(big) {
		t.Fatalf("try into an unread socket = %d, %v; want part of %d bytes and no error", n, err, len(big))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("try took %v: it waited for the reader", d)
	}
	m, err := tw.try(big[n:]) // the socket may have made a little room since
	if err != nil || n+m >= len(big) {
		t.Fatalf("try into a full socket = %d, %v", m, err)
	}
	n += m
	got := make([]byte, n)
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big[:n]) {
		t.Fatal("the bytes read are not the bytes try took")
	}
	m, err = tw.try(big[n : n+100])
	if err != nil || m != 100 {
		t.Fatalf("try once the reader drained the socket = %d, %v; want 100", m, err)
	}
	client.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := tw.try(big[:1000]); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("try to a closed peer never failed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
