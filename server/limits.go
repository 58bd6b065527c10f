package server

import (
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/httpapi"
	"github.com/herald-mq/herald/rpcapi"
)

// Server-wide limits beside the engine's: connections to the listener, and requests
// per second of each principal.

// DefaultMaxConnections is Config.MaxConnections's default.
const DefaultMaxConnections = 10000

// limitListener closes connections beyond max at once; a refused client sees its
// connection closed (a TCP connection cannot carry a coded error before it speaks).
type limitListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused func()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			_ = c.Close()
			l.refused()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

type countedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

// SyscallConn gives the connection's socket (when it has one) to the writers that must
// not wait on it: the SSE hub of httpapi.
func (c *countedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// rateLimiter keeps a token bucket per principal: rate requests a second, bursts of
// up to rate. Time comes from the server's clock.
type rateLimiter struct {
	rate  float64
	clock herald.Clock

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// allow takes a token for name, or says how long until one is there.
func (r *rateLimiter) allow(name string) (bool, time.Duration) {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[name]
	if b == nil {
		if len(r.buckets) > 100000 { // forget idle principals rather than grow for ever
			r.buckets = map[string]*bucket{}
		}
		b = &bucket{tokens: r.rate, at: now}
		r.buckets[name] = b
	}
	b.tokens = math.Min(r.rate, b.tokens+now.Sub(b.at).Seconds()*r.rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / r.rate * float64(time.Second))
}

// limitRate answers 429 E4015 with Retry-After to a principal past its rate.
func (r *rateLimiter) limitRate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if p := herald.PrincipalFrom(req.Context()); p != nil {
			if ok, wait := r.allow(p.Name); !ok {
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
				err := herald.Errorf(herald.CodeRateLimited, "%s is over its rate of %g requests a second; retry in %s", p.Name, r.rate, wait.Round(time.Millisecond))
				if !rpcapi.WriteError(w, req, err) {
					httpapi.WriteError(w, err)
				}
				return
			}
		}
		next.ServeHTTP(w, req)
	})
}
