package httpapi

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"time"
)

// eventStream is where a watch stream writes its server-sent events: each write goes
// out at once, whole.
//
// Over HTTP/1.1 the stream takes its connection over (hijacks it) and writes the events
// to it raw: the response has no length and is not chunked, so it ends when the
// connection closes, as an event stream does anyway. Each batch of events is then one
// write to the socket, where through the response writer it was a chunk header, the
// data and a flush, and copies through two buffers. The connection is the stream's: a
// goroutine reads it to notice the client leaving, which cancels the stream. Over
// HTTP/2, or where the connection cannot be taken, the response writer carries the
// events as before.
type eventStream struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	conn net.Conn // nil unless hijacked
}

// openEventStream writes the event stream's headers and returns where to write its
// events; cancel is called when a hijacked connection's client goes away.
func openEventStream(w http.ResponseWriter, r *http.Request, cancel context.CancelFunc) (*eventStream, error) {
	rc := http.NewResponseController(w)
	if r.ProtoMajor == 1 {
		if conn, rw, err := rc.Hijack(); err == nil {
			s := &eventStream{conn: conn}
			_ = conn.SetDeadline(time.Time{}) // the server's read and write deadlines were for the request
			rw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\nConnection: close\r\n\r\n")
			if err := rw.Flush(); err != nil {
				conn.Close()
				cancel()
				return nil, err
			}
			go watchPeer(rw.Reader, cancel)
			if rec, ok := w.(*recorder); ok && rec.status == 0 {
				rec.status = http.StatusOK // for the request log and metrics
			}
			return s, nil
		}
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil, err
	}
	return &eventStream{w: w, rc: rc}, nil
}

// watchPeer reads what the client of a hijacked connection sends (nothing, in an event
// stream) until the connection fails or closes, then cancels the stream.
func watchPeer(r *bufio.Reader, cancel context.CancelFunc) {
	_, _ = io.Copy(io.Discard, r)
	cancel()
}

func (s *eventStream) write(b []byte) error {
	if s.conn != nil {
		_, err := s.conn.Write(b)
		return err
	}
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// close ends a hijacked connection (its reader goroutine ends with it).
func (s *eventStream) close() {
	if s.conn != nil {
		_ = s.conn.Close()
	}
}
