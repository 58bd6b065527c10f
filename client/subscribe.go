package client

import (
	"context"
	"errors"
	"fmt"
	"google.golang.org/protobuf/proto"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/internal/tracing"
)

// Policy says how a subscription settles each message around its handler. The table in
// the package documentation gives every case; control-flow errors returned by the
// handler (herald.NackAfter, herald.Reject) take precedence where they can.
type Policy int

// Ack policies, with FastStream's meanings.
const (
	// NackOnError acks a message whose handler succeeded and nacks it (redelivery,
	// bounded by the watch's max_redeliveries) when the handler failed. It is the
	// default.
	NackOnError Policy = iota
	// AckFirst acks the message on receipt, before the handler runs: the handler's
	// outcome changes nothing, and a failed handler loses the message.
	AckFirst
	// Ack acks the message after the handler, whether it succeeded or failed.
	Ack
	// RejectOnError acks a message whose handler succeeded and rejects it (dead letter,
	// no retry) when the handler failed.
	RejectOnError
	// Manual settles nothing automatically: the handler calls Ack, Nack, NackAfter or
	// Reject on the message, possibly later and from another goroutine.
	Manual
)

func (p Policy) String() string {
	switch p {
	case NackOnError:
		return "NackOnError"
	case AckFirst:
		return "AckFirst"
	case Ack:
		return "Ack"
	case RejectOnError:
		return "RejectOnError"
	case Manual:
		return "Manual"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Handler processes one message. Its context is cancelled when the message's lease is
// gone (ack timeout, stream ended), when Close gives up waiting, and once the handler
// has returned and the message is settled (its cause then is ErrSettled). A Manual
// message that the handler leaves unsettled keeps its context until it is settled.
// Cancelling Subscribe's context does not cancel it: the subscription drains, and a
// running handler finishes and is settled (see Subscribe).
type Handler func(ctx context.Context, m *Message) error

// SubscribeOption configures Subscribe.
type SubscribeOption func(*subOptions)

type subOptions struct {
	policy      Policy
	concurrency int
	prefetch    int
	params      map[string]any
	drain       time.Duration // WithDrainTimeout: 0 waits for the handlers
	warn        func(*herald.Error)
	logLevel    *slog.Level    // WithLogLevel: the level of failure reports
	reportEvery time.Duration  // WithReportInterval
	processed   func(*Message) // test hook: called once a message is done with
	readHook    func(event)    // test hook: called after each event is handled
}

// WithPolicy sets the ack policy; the default is NackOnError.
func WithPolicy(p Policy) SubscribeOption { return func(o *subOptions) { o.policy = p } }

// WithConcurrency sets how many handlers run at once; the default is 1.
func WithConcurrency(n int) SubscribeOption { return func(o *subOptions) { o.concurrency = n } }

// WithPrefetch caps how many unsettled messages the server leases to the subscription
// at once: the stream's credit (the statement's text is left as it is). Without it the
// statement's own buffer or max_in_flight option applies (the server's default buffer
// otherwise). SetPrefetch changes it while the subscription runs.
func WithPrefetch(n int) SubscribeOption { return func(o *subOptions) { o.prefetch = n } }

// WithDrainTimeout bounds how long the subscription waits for its running handlers
// when Subscribe's context is cancelled (see Subscribe); past it their contexts are
// cancelled and their messages left for redelivery. Without it the drain waits for them,
// each bounded by its lease (its context ends when the lease expires).
func WithDrainTimeout(d time.Duration) SubscribeOption {
	return func(o *subOptions) { o.drain = d }
}

// OnWarning calls fn with each warning the server sends about the subscription's
// statement — a type that no one has declared or used yet (E2012), which may be a
// typo: the subscription waits for it either way. Without it warnings go to the
// client's logger at WARN.
func OnWarning(fn func(*herald.Error)) SubscribeOption {
	return func(o *subOptions) { o.warn = fn }
}

// WithParams binds the WATCH statement's $parameters.
func WithParams(params map[string]any) SubscribeOption {
	return func(o *subOptions) { o.params = params }
}

// PanicError is the error a recovered handler panic turns into; the policy treats it
// like any other handler error.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack []byte // the goroutine's stack at the panic
}

func (e *PanicError) Error() string { return fmt.Sprintf("client: handler panicked: %v", e.Value) }

// Subscription is a running consume watch: it reads deliveries from its stream and runs
// the handler on them. Stop it with Close.
type Subscription struct {
	c       *Client
	handler Handler
	opts    subOptions
	log     *slog.Logger
	open    *heraldv1.SubscribeOpen // what it subscribes with, again after a failover
	report  *failureReport          // counts failed attempts, logs them once per interval

	parent     context.Context // Subscribe's context: cancelling it drains the subscription
	base       context.Context // parent of every handler context (the client's own)
	cancelBase context.CancelCauseFunc
	undrain    func() bool // stops draining when parent is cancelled (under mu)

	mu       sync.Mutex
	conn     *consumeConn // the stream; another after a failover (reconnect)
	leases   context.Context
	endLease context.CancelCauseFunc // cancels the handlers of conn's messages
	quit     chan struct{}           // closed by Close: no more reconnecting
	cond     *sync.Cond
	queue    []*Message          // received, not yet handed to a handler
	live     map[string]*Message // unsettled messages by delivery id
	stopping bool                // no more dispatching
	err      error

	closing     atomic.Bool // Close closed the stream
	workers     sync.WaitGroup
	workersDone chan struct{}
	readerDone  chan struct{}
	done        chan struct{}
}

// Subscribe starts a consume watch and runs handler on every message it delivers.
// watch is a WATCH statement with [mode: consume]; Subscribe returns once the server
// has accepted it, so an error in the statement is returned here.
//
// ctx bounds the subscription as a worker's lifetime usually does (signal.NotifyContext):
// when it is cancelled the subscription drains — it takes no new message, lets the
// running handlers finish and settles their messages on a context of its own (the
// stream stays open meanwhile, so their leases hold), releases the messages it had
// received but not started, and ends (Done). WithDrainTimeout bounds the wait. Close
// stops it the same way with a deadline of the caller's; Client.Drain stops every
// subscription so.
func (c *Client) Subscribe(ctx context.Context, watch string, handler Handler, opts ...SubscribeOption) (*Subscription, error) {
	o := subOptions{concurrency: 1}
	for _, opt := range opts {
		opt(&o)
	}
	if handler == nil {
		return nil, invalid("Subscribe needs a handler")
	}
	if o.policy < NackOnError || o.policy > Manual {
		return nil, invalid("unknown policy %v", o.policy)
	}
	if o.concurrency < 1 {
		return nil, invalid("concurrency %d: want at least 1", o.concurrency)
	}
	if o.prefetch < 0 {
		return nil, invalid("prefetch %d: want at least 0", o.prefetch)
	}
	params, err := wireParams(o.params)
	if err != nil {
		return nil, err
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	// The stream and the handlers' contexts are the client's own: cancelling ctx drains
	// the subscription instead of cutting them off (values such as trace context carry).
	own := context.WithoutCancel(ctx)
	open := &heraldv1.SubscribeOpen{Query: watch, Params: params,
		Credit: uint32(o.prefetch), MaxCredit: uint32(max(o.prefetch, maxPrefetch))}
	conn, err := c.tr.subscribe(own, open)
	if err != nil {
		return nil, err
	}
	s := &Subscription{
		c:           c,
		handler:     handler,
		opts:        o,
		log:         c.log.With("component", "herald-subscription"),
		open:        open,
		conn:        conn,
		quit:        make(chan struct{}),
		live:        make(map[string]*Message),
		workersDone: make(chan struct{}),
		readerDone:  make(chan struct{}),
		done:        make(chan struct{}),
	}
	s.cond = sync.NewCond(&s.mu)
	s.report = newFailureReport(s.log, o, c.clock)
	s.parent = ctx
	s.base, s.cancelBase = context.WithCancelCause(own)
	s.leases, s.endLease = context.WithCancelCause(s.base)

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		conn.close()
		s.cancelBase(ErrClosed)
		return nil, ErrClosed
	}
	c.subs[s] = struct{}{}
	c.mu.Unlock()

	s.report.start()
	s.workers.Add(o.concurrency)
	for range o.concurrency {
		go s.work()
	}
	go func() { s.workers.Wait(); close(s.workersDone) }()
	go s.read()
	go func() {
		<-s.readerDone
		<-s.workersDone
		s.report.close()
		c.mu.Lock()
		delete(c.subs, s)
		c.mu.Unlock()
		close(s.done)
	}()
	s.mu.Lock()
	s.undrain = context.AfterFunc(ctx, s.drain)
	s.mu.Unlock()
	return s, nil
}

// drain is Close when Subscribe's context is cancelled: bounded by WithDrainTimeout,
// else by the handlers' leases.
func (s *Subscription) drain() {
	ctx := context.Background()
	if s.opts.drain > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.drain)
		defer cancel()
	}
	if err := s.Close(ctx); err != nil {
		s.log.Warn("the subscription's drain ended before its handlers; their messages will be redelivered", "err", err)
	}
}

// maxPrefetch is the largest prefetch SetPrefetch may set (the stream's largest credit).
const maxPrefetch = 10000

// SetPrefetch changes how many unsettled messages the server may have out to the
// subscription at once (1 to 10,000, or up to WithPrefetch's value when that is larger).
func (s *Subscription) SetPrefetch(n int) error {
	if n < 1 || n > max(s.opts.prefetch, maxPrefetch) {
		return invalid("prefetch %d: want 1 to %d", n, max(s.opts.prefetch, maxPrefetch))
	}
	s.mu.Lock()
	s.open.Credit = uint32(n) // a stream opened after a failover starts with it
	conn := s.conn
	s.mu.Unlock()
	return conn.credit(n)
}

// Done is closed once the subscription has ended: its stream is closed and its
// handlers have returned.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err reports why the stream ended on its own (the server closed it, the connection
// broke, ctx was cancelled), or nil while it runs or when Close ended it.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close stops the subscription: it stops handing messages to handlers, waits for the
// running handlers until ctx is done, then closes the stream. Messages not settled by
// then (queued ones, those of handlers still running, manual ones never settled) are
// released by the server for redelivery at once: Close waits, until ctx is done, for
// the server to end the stream, so they are back in the queue when it returns. If ctx
// ends first, the running handlers' contexts are cancelled and Close returns ctx's
// error without waiting for them further. Close is idempotent.
func (s *Subscription) Close(ctx context.Context) error {
	s.mu.Lock()
	undrain := s.undrain
	s.mu.Unlock()
	if undrain != nil {
		undrain()
	}
	s.stopDispatch()
	var err error
	select {
	case <-s.workersDone:
	case <-ctx.Done():
		err = ctx.Err()
		s.cancelBase(ErrSubscriptionClosed)
	}
	s.closing.Store(true)
	s.mu.Lock()
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	conn := s.conn
	s.mu.Unlock()
	conn.closeGracefully(ctx, s.readerDone)
	<-s.readerDone
	if err == nil {
		s.cancelBase(ErrSubscriptionClosed)
	}
	return err
}

// abort stops the subscription without waiting for its handlers.
func (s *Subscription) abort() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Close(ctx)
}

// stopDispatch stops handing out messages and drops the queued ones, which stay
// unsettled for redelivery.
func (s *Subscription) stopDispatch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return
	}
	s.stopping = true
	for _, m := range s.queue {
		delete(s.live, m.DeliveryID)
	}
	s.queue = nil
	s.cond.Broadcast()
}

// read turns stream events into queued messages and expired leases until the stream
// ends.
func (s *Subscription) read() {
	defer close(s.readerDone)
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	for {
		ev, err := conn.next()
		if err == nil && ev.Type == eventError {
			err = &herald.Error{Code: ev.Code, Message: ev.Message}
		}
		if err != nil {
			next, rerr := s.reconnect(conn, err)
			if next == nil {
				s.streamEnded(rerr)
				return
			}
			conn = next
			continue
		}
		switch ev.Type {
		case eventConsumed:
			s.received(conn, ev)
		case eventTimeout:
			s.timedOut(ev)
		case eventWarning:
			w := &herald.Error{Code: ev.Code, Message: ev.Message}
			if s.opts.warn != nil {
				s.opts.warn(w)
			} else {
				s.log.Warn("the server warns about the subscription's statement", "code", w.Code, "message", w.Message)
			}
		default:
			// Unknown event types are for newer clients.
		}
		if s.opts.readHook != nil {
			s.opts.readHook(ev)
		}
	}
}

func (s *Subscription) streamEnded(err error) {
	if !s.closing.Load() {
		if errors.Is(err, io.EOF) {
			err = errors.New("client: the server ended the stream")
		}
		if cause := context.Cause(s.base); cause != nil {
			err = cause
		}
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		s.log.Warn("consume stream ended", "err", err)
	}
	s.stopDispatch()
	// The server releases this stream's leases: handlers cannot settle any more.
	s.cancelBase(fmt.Errorf("client: stream ended: %w", err))
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	conn.close()
}

// reconnect opens the subscription's stream again after it ended with err, when the
// node stopped serving it or the connection broke and the client knows other nodes
// (failover.go): the new stream goes to the leader. The leases of the lost stream went
// with it — its queued messages are dropped, its running handlers' contexts cancelled,
// their settlements refused — and the server delivers those messages again. It returns
// the new stream, or nil and the error to end the subscription with.
func (s *Subscription) reconnect(lost *consumeConn, err error) (*consumeConn, error) {
	if s.closing.Load() || s.base.Err() != nil || !s.c.tr.resumable(err) {
		return nil, err
	}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return nil, err
	}
	for _, m := range s.queue {
		delete(s.live, m.DeliveryID)
		m.cancel(ErrSubscriptionClosed)
	}
	s.queue = nil
	s.endLease(fmt.Errorf("client: stream lost, subscribing again: %w", err))
	open := proto.Clone(s.open).(*heraldv1.SubscribeOpen)
	s.mu.Unlock()
	lost.close()
	s.log.Warn("consume stream lost; subscribing again", "err", err)

	// The new stream lives on a context of the subscription's own; Close (quit) ends
	// the attempt to open it.
	ctx, cancel := context.WithCancel(context.WithoutCancel(s.base))
	opened := make(chan struct{})
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-opened:
		}
	}()
	conn, serr := s.c.tr.subscribe(ctx, open)
	close(opened)
	if serr != nil {
		cancel()
		if s.closing.Load() {
			return nil, err
		}
		return nil, fmt.Errorf("client: subscribing again after %v: %w", err, serr)
	}
	closeConn := conn.cancel
	conn.cancel = func() { closeConn(); cancel() }
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.closing.Load() {
		conn.close()
		return nil, err
	}
	s.conn = conn
	s.leases, s.endLease = context.WithCancelCause(s.base)
	return conn, nil
}

func (s *Subscription) received(conn *consumeConn, ev event) {
	if !validID(ev.DeliveryID) {
		s.log.Error("ignoring a delivery with a malformed id", "delivery_id", ev.DeliveryID)
		return
	}
	m := &Message{DeliveryID: ev.DeliveryID, Attempt: ev.Attempt, Releases: ev.Releases, Seq: ev.Seq, Tick: ev.Tick, Deadline: ev.Deadline, Match: ev.Match, sub: s, conn: conn}
	s.mu.Lock()
	defer s.mu.Unlock()
	m.ctx, m.cancel = context.WithCancelCause(s.leases)
	if s.stopping {
		m.cancel(ErrSubscriptionClosed)
		return
	}
	s.live[m.DeliveryID] = m
	s.queue = append(s.queue, m)
	s.cond.Signal()
}

func (s *Subscription) timedOut(ev event) {
	s.mu.Lock()
	m := s.live[ev.DeliveryID]
	delete(s.live, ev.DeliveryID)
	for i, q := range s.queue {
		if q == m {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	if m != nil {
		m.expire(timeoutError(ev.Code, ev.Message))
	}
}

// forget drops m from the live set once it can no longer be settled by us.
func (s *Subscription) forget(m *Message) {
	s.mu.Lock()
	if s.live[m.DeliveryID] == m {
		delete(s.live, m.DeliveryID)
	}
	s.mu.Unlock()
	m.finished(false)
}

func (s *Subscription) next() (*Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) == 0 && !s.stopping {
		s.cond.Wait()
	}
	if s.stopping {
		return nil, false
	}
	m := s.queue[0]
	s.queue[0] = nil
	s.queue = s.queue[1:]
	return m, true
}

func (s *Subscription) work() {
	defer s.workers.Done()
	for {
		m, ok := s.next()
		if !ok {
			return
		}
		s.process(m)
		if s.opts.processed != nil {
			s.opts.processed(m)
		}
	}
}

// process runs the handler on m and settles it per policy, within a consumer span: the
// child of the span that published the message, when its match carries one.
func (s *Subscription) process(m *Message) {
	traceparent, typ, id := tracing.FromMatch(m.Match)
	ctx, span := tracing.StartProcess(m.ctx, s.c.trc, traceparent, typ, id, m.DeliveryID, m.Attempt)
	m.mu.Lock()
	m.span = span
	m.mu.Unlock()
	if s.opts.policy == AckFirst {
		if err := m.Ack(m.ctx); err != nil {
			// The lease is not ours (or the answer was lost): the handler does not run,
			// and the server redelivers the message if the ACK did not land.
			// Counted with the failures, not logged each at WARN.
			s.report.settleFailed(m, err)
			s.forget(m)
			m.finished(true)
			return
		}
	}
	err := s.call(ctx, m)
	tracing.Failed(span, err)
	s.settleAfter(m, err)
	if m.Settled() || m.ctx.Err() != nil {
		s.forget(m)
	}
	m.finished(true)
}

// call runs the handler, turning a panic into a *PanicError.
func (s *Subscription) call(ctx context.Context, m *Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()} // logged with the failures
		}
	}()
	return s.handler(ctx, m)
}

// settleBy makes the automatic settlement act of m.
func settleBy(ctx context.Context, m *Message, act action, delay time.Duration) error {
	switch act {
	case actAck:
		return m.Ack(ctx)
	case actNack:
		return m.NackAfter(ctx, delay)
	case actReject:
		return m.Reject(ctx)
	}
	return nil
}

// action is an automatic settlement.
type action int

const (
	actNone action = iota
	actAck
	actNack
	actReject
)

// decide is the policy table: what the subscription does after the handler returned
// err, and the NACK delay.
func decide(p Policy, err error) (action, time.Duration) {
	if p == AckFirst {
		return actNone, 0 // acked before the handler ran
	}
	switch v, d := herald.VerdictOf(err); v {
	case herald.VerdictReject:
		return actReject, 0
	case herald.VerdictNack:
		return actNack, d
	}
	switch {
	case p == Manual:
		return actNone, 0
	case err == nil || p == Ack:
		return actAck, 0
	case p == RejectOnError:
		return actReject, 0
	default: // NackOnError
		return actNack, 0
	}
}

func (s *Subscription) settleAfter(m *Message, herr error) {
	act, delay := decide(s.opts.policy, herr)
	if act == actNone || m.Settled() {
		act = actNone
	}
	if herr != nil {
		var pe *PanicError
		s.report.failure(m, herr, act, errors.As(herr, &pe))
	}
	if err := settleBy(m.ctx, m, act, delay); err != nil && !errors.Is(err, ErrSettled) && !errors.Is(err, ErrLeaseExpired) && !errors.Is(err, herald.CodeOutcomeUnknown) {
		s.report.settleFailed(m, err)
	}
}
