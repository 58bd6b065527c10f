package client

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/herald-mq/herald"
)

// Several nodes on one PostgreSQL store serve one graph: one leads and takes every
// write, the others follow its change log and serve queries and watch-mode streams. A
// follower refuses a write with E5006 NOT_LEADER naming the leader. Given every node's
// address (Dial's url may list several, comma-separated), the client sends its calls to
// the node it last learned leads, moves on when told where the leader is or when a node
// stops answering, and sends again whatever it knows was not carried out: a refusal
// (NOT_LEADER, SHUTTING_DOWN), a connection that could not be opened, and, for calls
// that change nothing, a connection lost on the way. Subscriptions and watches
// reconnect the same way (subscribe.go, watch.go), and publishes the leader refused go
// out again on the next leader (publish.go).

// DefaultFailoverTimeout is how long a call keeps looking for a node that serves it.
const DefaultFailoverTimeout = 15 * time.Second

// WithFailoverTimeout sets how long a call, a subscription or a publish keeps trying
// other nodes (or the same node, when it changes role) before it reports the failure.
// A leader dies and another takes over within a few seconds (the lease's TTL); the
// default, DefaultFailoverTimeout, covers several such rounds. 0 turns retrying off:
// the first failure is returned.
func WithFailoverTimeout(d time.Duration) Option {
	return func(o *options) { o.failover = d; o.failoverSet = true }
}

// notLeader carries the leader's address in a NOT_LEADER error (herald.Error.Err).
type notLeader struct{ leader string }

func (e *notLeader) Error() string { return "the leader is at " + e.leader }

// leaderOf returns the leader's address an E5006 error names, or "".
func leaderOf(err error) string {
	var nl *notLeader
	if herald.CodeOf(err) == herald.CodeNotLeader && errors.As(err, &nl) {
		return nl.leader
	}
	return ""
}

// splitAddresses parses Dial's url: one address, or several separated by commas.
func splitAddresses(url string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(url, ",") {
		a = strings.TrimRight(strings.TrimSpace(a), "/")
		if a == "" {
			continue
		}
		if !strings.HasPrefix(a, "http://") && !strings.HasPrefix(a, "https://") {
			return nil, setupError(nil, "url %q: want http:// or https://", a)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, setupError(nil, "url %q: want http:// or https://", url)
	}
	return out, nil
}

// ep is the endpoint calls go to now.
func (t *transport) ep() *endpoint {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

// cluster reports whether the client was given several addresses.
func (t *transport) cluster() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.eps) > 1
}

// follow makes the node at base the one calls go to, adding it when it is new.
func (t *transport) follow(base string) {
	base = strings.TrimRight(base, "/")
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ep := range t.eps {
		if ep.base == base {
			t.cur = ep
			return
		}
	}
	ep := t.newEndpoint(base)
	t.eps = append(t.eps, ep)
	t.cur = ep
}

// next moves calls from ep, which failed, to the address after it.
func (t *transport) next(ep *endpoint) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur != ep || len(t.eps) < 2 {
		return
	}
	i := slices.Index(t.eps, ep)
	t.cur = t.eps[(i+1)%len(t.eps)]
}

// moved reacts to err, the failure of a call sent to ep: it moves the client's calls
// where they should go now and reports whether the call may be sent again — only
// when it was not carried out, or changes nothing (idempotent) — and whether to wait
// before sending it (no wait when a follower named the leader).
func (t *transport) moved(ctx context.Context, ep *endpoint, err error, idempotent bool) (retry, wait bool) {
	if t.failover <= 0 || ctx.Err() != nil {
		return false, false // the caller gave up: nothing to learn from the failure
	}
	if leader := leaderOf(err); leader != "" {
		t.follow(leader)
		return true, strings.TrimRight(leader, "/") == ep.base
	}
	var he *herald.Error
	if errors.As(err, &he) {
		switch {
		case he.Code == herald.CodeNotLeader,
			he.Code == herald.CodeShuttingDown && t.cluster():
			// No leader yet, or the node is changing role or stopping: it ran nothing.
			t.next(ep)
			return true, true
		}
		return false, false
	}
	if !t.cluster() {
		return false, false
	}
	switch {
	case unreached(err):
		t.next(ep)
		return true, true
	case lostConnection(err):
		t.next(ep)
		return idempotent, true
	}
	return false, false
}

// unreached reports whether err is a connection that could not be opened: the request
// never left the client.
func unreached(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// lostConnection reports whether err is a connection that broke, or a node that
// stopped and cancelled its calls (when the caller did not cancel): the request may
// or may not have been carried out.
func lostConnection(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeInternal, connect.CodeCanceled:
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF)
}

// call runs f on the endpoint calls go to, again on another when moved says so, until
// it succeeds, fails for good, ctx ends or the failover timeout has passed.
func (t *transport) call(ctx context.Context, idempotent bool, f func(*endpoint) error) error {
	var deadline time.Time
	for attempt := 0; ; attempt++ {
		ep := t.ep()
		err := f(ep)
		if err == nil {
			return nil
		}
		retry, wait := t.moved(ctx, ep, err, idempotent)
		if !retry || ctx.Err() != nil {
			return err
		}
		now := t.clock.Now()
		if deadline.IsZero() {
			deadline = now.Add(t.failover)
		}
		if now.After(deadline) {
			return err
		}
		if wait && !t.sleep(ctx, failoverBackoff(attempt)) {
			return err
		}
	}
}

// sleep waits d on the client's clock; false when ctx ended first.
func (t *transport) sleep(ctx context.Context, d time.Duration) bool {
	tm := t.clock.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// failoverBackoff is the wait before the attempt after attempt: 50 ms, doubling, at
// most 1 s.
func failoverBackoff(attempt int) time.Duration {
	return min(50*time.Millisecond<<min(attempt, 5), time.Second)
}

// unaryCall sends a call that changes something through t.call: again after a refusal
// or a connection that could not be opened, never after one lost on the way.
func unaryCall[T any](ctx context.Context, t *transport, f func(*endpoint) (*connect.Response[T], error)) (*connect.Response[T], error) {
	var resp *connect.Response[T]
	err := t.call(ctx, false, func(ep *endpoint) (err error) {
		resp, err = f(ep)
		return fromConnect(err)
	})
	return resp, err
}

// resumable reports whether a stream that ended with err (a subscription's) should be
// opened again: the node stopped serving it (it does not lead, it is stopping or
// changing role) or the connection to it broke, and the client knows other nodes.
// The caller checks that it did not end the stream itself.
func (t *transport) resumable(err error) bool {
	if t.failover <= 0 || err == nil {
		return false
	}
	var he *herald.Error
	if errors.As(err, &he) {
		return he.Code == herald.CodeNotLeader || (he.Code == herald.CodeShuttingDown && t.cluster())
	}
	return t.cluster() && (unreached(err) || lostConnection(err))
}
