package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/herald-mq/herald"
)

// DefaultBodyTimeout is Config.BodyTimeout's default.
const DefaultBodyTimeout = 30 * time.Second

// limitBodies bounds how long a request may take to send its body: d from when its
// handler starts, after which reading the body fails with E4016 and the connection is
// free again. A client that trickles a body a byte at a time cannot hold a connection
// (and a place under --max-connections) for longer. Requests without a body, and RPCs
// whose request is a stream (a publish or subscribe stream's body lasts as long as the
// call), are not bounded. The deadline is the network's, in real time.
func limitBodies(next http.Handler, d time.Duration, streaming []string) http.Handler {
	exempt := make(map[string]bool, len(streaming))
	for _, p := range streaming {
		exempt[p] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d <= 0 || r.Body == nil || r.Body == http.NoBody || exempt[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			next.ServeHTTP(w, r) // a connection without deadlines: nothing to bound it with
			return
		}
		r.Body = &boundedBody{ReadCloser: r.Body, rc: rc, d: d}
		next.ServeHTTP(w, r)
	})
}

// boundedBody lifts its request's read deadline once the body has been read whole, so
// that a long statement after it, or a stream's response, is not cut short.
type boundedBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	d    time.Duration
	done bool
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF && !b.done:
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		err = herald.Errorf(herald.CodeBodyTimeout, "the request body did not arrive within %s (herald serve --body-timeout)", b.d)
	}
	return n, err
}
