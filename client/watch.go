package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/herald-mq/herald"
)

// Event is one event of a watch-mode stream.
type Event struct {
	// Type is herald.EventInitial, EventAdded, EventRemoved, EventChanged, EventGap,
	// EventReset or EventHeartbeat. Errors do not arrive as events: they end the stream
	// and Next returns them.
	Type string `json:"type"`
	// Match is the RETURN projection of the match (for RETURN t, the node as an object
	// of id, _type and its attributes). Numbers are int64 when integral, else float64.
	// A projection that is not an object is kept under the key "value".
	Match map[string]any `json:"match,omitempty"`
	// Prev holds the previous projection of a changed event.
	Prev map[string]any `json:"prev,omitempty"`
	// Count is how many events a gap event stands for.
	Count int `json:"count,omitempty"`
	// Seq is the position of the event. Several events may share one (a snapshot, or a
	// commit with several matches); Last marks the final one, after which the watch may
	// resume (Position follows Last events only).
	Seq  uint64 `json:"seq"`
	Last bool   `json:"last,omitempty"`
	Tick uint64 `json:"tick"`
	// Code and Message explain a reset event (E6001).
	Code    herald.Code `json:"code,omitempty"`
	Message string      `json:"message,omitempty"`
}

// WatchOption configures Watch. WithParams serves both Watch and Subscribe.
type WatchOption interface {
	applyWatch(*watchOptions)
}

type watchOptions struct {
	params    map[string]any
	session   string
	after     uint64
	reconnect int
	err       error
}

type watchOptionFunc func(*watchOptions)

func (f watchOptionFunc) applyWatch(o *watchOptions) { f(o) }

// applyWatch lets WithParams configure a Watch too. Subscribe's other options have no
// meaning for a watch-mode stream and are refused.
func (f SubscribeOption) applyWatch(o *watchOptions) {
	var so subOptions
	f(&so)
	if so.policy != 0 || so.concurrency != 0 || so.prefetch != 0 || so.processed != nil || so.readHook != nil {
		o.err = invalid("Watch takes WithParams, WithSession, ResumeAfter and WithReconnect; the other options are Subscribe's")
		return
	}
	o.params = so.params
}

// WithSession opens the stream in a session from OpenSession: the watch then counts
// against that session's limits, and current_session() and current_actor() in its
// filter refer to it.
func WithSession(id string) WatchOption {
	return watchOptionFunc(func(o *watchOptions) { o.session = id })
}

// ResumeAfter resumes a watch after the position seq (the Seq of the last event
// handled): the server skips the initial snapshot and replays every change after seq
// from its change log, or sends a reset event and a new snapshot when seq is older than
// the log keeps.
func ResumeAfter(seq uint64) WatchOption {
	return watchOptionFunc(func(o *watchOptions) { o.after = seq })
}

// DefaultReconnect is how many times in a row a Watch tries to reconnect after its
// connection dropped, unless WithReconnect says otherwise.
const DefaultReconnect = 5

// WithReconnect sets how many times in a row the watch tries to reconnect when its
// connection drops before Next reports the failure; 0 turns reconnecting off. The first
// attempt is immediate, the next ones back off from 250ms to 5s. The budget is restored
// once a new connection delivers an event.
func WithReconnect(max int) WatchOption {
	return watchOptionFunc(func(o *watchOptions) { o.reconnect = max })
}

// Watch is a running watch-mode stream. Read it with Next or All and stop it with
// Close. A Watch is meant for one reader; Position and Close may be called from any
// goroutine.
type Watch struct {
	c   *Client
	req streamRequest
	o   watchOptions

	parent context.Context
	ctx    context.Context // cancelled by Close and with parent
	cancel context.CancelFunc
	closed atomic.Bool

	events chan Event
	done   chan struct{} // closed when the reader has stopped; err is set by then
	err    error

	pos       atomic.Uint64
	closeOnce sync.Once
}

// watchHandOver is how many decoded events a watch's reader may hand over ahead of
// Next: a rendezvous per event cost two goroutine switches per event, which was the
// largest share of a thousand watches' CPU in one process after decoding.
const watchHandOver = 64

// Watch starts a watch-mode stream for a WATCH statement (one without
// [mode: consume]; consume-mode statements go to Subscribe). It returns once the server
// has accepted the statement, so an error in it is returned here. ctx bounds the whole
// watch.
//
// When the connection drops (the server restarts, a proxy closes it), the watch
// reconnects by itself with Last-Event-ID set to the last position it read, so a
// [delivery: reliable] watch of a single-node pattern neither loses nor repeats events
// across the break; see WithReconnect. An error event from the server ends the watch
// instead, with that error. Client.Close does not end a running watch (it stops
// reconnecting it): Close the watch itself.
//
// A client's watches share one call to the server. Each may have up to 4,096 events
// waiting for Next on the call, and 64 more decoded; past that its events wait on the
// server, where its delivery option decides what happens to them, and the client's
// other watches go on.
func (c *Client) Watch(ctx context.Context, query string, opts ...WatchOption) (*Watch, error) {
	o := watchOptions{reconnect: DefaultReconnect}
	for _, opt := range opts {
		if opt != nil {
			opt.applyWatch(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	if o.reconnect < 0 {
		return nil, invalid("reconnect %d: want at least 0", o.reconnect)
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	w := &Watch{
		c:      c,
		req:    streamRequest{statement: query, params: o.params, session: o.session, after: o.after},
		o:      o,
		parent: ctx,
		events: make(chan Event, watchHandOver),
		done:   make(chan struct{}),
	}
	w.ctx, w.cancel = context.WithCancel(ctx)
	w.pos.Store(o.after)
	st, err := c.tr.openStream(w.ctx, w.req)
	if err != nil {
		w.cancel()
		return nil, err
	}
	go w.run(st)
	return w, nil
}

// Next returns the next event. It returns io.EOF once Close has ended the watch, the
// error of an error event (a *herald.Error), the cause of a connection that could not be
// restored, or the watch context's error; every later call returns the same. ctx bounds
// this call only.
func (w *Watch) Next(ctx context.Context) (Event, error) {
	if w.closed.Load() {
		// Events handed over before Close are not delivered after it.
		<-w.done
		return Event{}, w.err
	}
	select {
	case ev := <-w.events:
		w.advance(ev)
		return ev, nil
	case <-w.done:
		// Prefer an event the reader handed over just before it stopped.
		select {
		case ev := <-w.events:
			w.advance(ev)
			return ev, nil
		default:
		}
		return Event{}, w.err
	case <-ctx.Done():
		return Event{}, ctx.Err()
	}
}

func (w *Watch) advance(ev Event) {
	if ev.Last && ev.Seq != 0 {
		w.pos.Store(ev.Seq)
	}
}

// All iterates over the events until the watch ends. A watch that ends with an error
// yields it once, with a zero Event, as its last pair; one ended by Close just stops.
func (w *Watch) All(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			ev, err := w.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(Event{}, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// Position is the Seq of the last event Next returned (or the ResumeAfter position
// before any): the position to resume after with ResumeAfter.
func (w *Watch) Position() uint64 { return w.pos.Load() }

// Close ends the watch and its connection; Next then returns io.EOF. It is idempotent.
func (w *Watch) Close() error {
	w.closeOnce.Do(func() {
		w.closed.Store(true)
		w.cancel()
	})
	<-w.done
	return nil
}

// Done is closed once the watch has ended.
func (w *Watch) Done() <-chan struct{} { return w.done }

// run reads the stream, reconnecting when it drops, until the watch ends.
func (w *Watch) run(st eventStream) {
	defer close(w.done)
	w.err = w.read(st)
	w.cancel()
}

// stopped is the error of a watch whose context ended.
func (w *Watch) stopped() error {
	if w.closed.Load() {
		return io.EOF
	}
	if err := context.Cause(w.parent); err != nil {
		return err
	}
	return io.EOF
}

// reconnectReset is how long a connection must have lived for a drop to count as a
// new break rather than another failure of the current one.
const reconnectReset = 30 * time.Second

func (w *Watch) read(st eventStream) error {
	cursor := w.o.after // the position of the last event read
	failures := 0       // reconnect attempts since an event last arrived
	since := w.c.clock.Now()
	for {
		ev, err := st.next()
		if err == nil && ev.Type == eventError {
			if ev.Code != herald.CodeShuttingDown {
				st.close()
				return &herald.Error{Code: ev.Code, Message: ev.Message}
			}
			// The server is stopping: reconnect, as after a dropped connection.
			err = &herald.Error{Code: ev.Code, Message: ev.Message}
		}
		var he *herald.Error
		if err != nil && errors.As(err, &he) && he.Code != herald.CodeShuttingDown {
			// The server ended the watch with an error it means: not a dropped connection.
			st.close()
			return he
		}
		if err == nil {
			out, derr := decodeEvent(ev)
			if derr != nil {
				st.close()
				return derr
			}
			select {
			case w.events <- out:
			case <-w.ctx.Done():
				st.close()
				return w.stopped()
			}
			if out.Seq != 0 {
				cursor = out.Seq
			}
			failures = 0
			continue
		}
		st.close()
		if w.ctx.Err() != nil {
			return w.stopped()
		}
		if w.c.clock.Now().Sub(since) >= reconnectReset {
			failures = 0
		}
		st, failures, err = w.reconnect(cursor, failures, err)
		if err != nil {
			return err
		}
		since = w.c.clock.Now()
	}
}

// reconnect opens the stream again after cursor, within the attempt budget.
func (w *Watch) reconnect(cursor uint64, failures int, cause error) (eventStream, int, error) {
	for {
		if failures >= w.o.reconnect {
			cause = hideEOF(cause)
			if w.o.reconnect == 0 {
				return nil, failures, fmt.Errorf("client: watch connection lost: %w", cause)
			}
			return nil, failures, fmt.Errorf("client: watch connection lost; %d reconnect attempts failed: %w", failures, cause)
		}
		if failures > 0 {
			t := w.c.clock.NewTimer(w.backoff(failures))
			select {
			case <-t.C():
			case <-w.ctx.Done():
				t.Stop()
				return nil, failures, w.stopped()
			}
		}
		failures++
		if w.c.isClosed() {
			return nil, failures, ErrClosed
		}
		req := w.req
		req.after = cursor
		st, err := w.c.tr.openStream(w.ctx, req)
		if err == nil {
			return st, failures, nil
		}
		if w.ctx.Err() != nil {
			return nil, failures, w.stopped()
		}
		if !retryable(err) {
			return nil, failures, err
		}
		cause = err
	}
}

// hideEOF keeps io.EOF, which tells Next's callers the watch ended cleanly, out of a
// dropped connection's error.
func hideEOF(err error) error {
	switch {
	case err == io.EOF:
		return io.ErrUnexpectedEOF
	case errors.Is(err, io.EOF):
		return errors.New(err.Error())
	}
	return err
}

func (w *Watch) backoff(failures int) time.Duration {
	d := 250 * time.Millisecond << min(failures-1, 5)
	d = min(d, 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

// retryable reports whether a failed reconnect may succeed later: the server could not
// be reached, or answered that it is unavailable for now.
func retryable(err error) bool {
	var he *herald.Error
	if errors.As(err, &he) {
		return he.Code == herald.CodeShuttingDown
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeResourceExhausted, connect.CodeDeadlineExceeded, connect.CodeUnknown, connect.CodeInternal:
		return true
	}
	return false
}

func decodeEvent(ev event) (Event, error) {
	return Event{Type: ev.Type, Count: ev.Count, Seq: ev.Seq, Tick: ev.Tick, Code: ev.Code, Message: ev.Message, Last: ev.Last,
		Match: ev.Match, Prev: ev.Prev}, nil
}
