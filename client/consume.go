package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
)

// A subscription runs on one Subscribe call: deliveries, lease timeouts and the
// outcomes of settlements arrive on it; settlements and credit go out on it. Settlements
// made while a frame is on its way go out together in the next one.

// event is one message of a stream, as the client reads it: a delivery, a timeout, a
// watch-mode event.
type event struct {
	Type        string
	Match, Prev map[string]any // plainMap of the values sent
	Count       int
	DeliveryID  string
	Attempt     int
	Releases    int
	Seq, Tick   uint64
	Deadline    time.Time
	Code        herald.Code
	Message     string
	Last        bool
}

// Event types of a consume stream.
const (
	eventConsumed = "consumed"
	eventTimeout  = "timeout"
	eventError    = "error"
	eventWarning  = "warning"
)

// consumeConn is one open Subscribe call.
type consumeConn struct {
	call   *connect.BidiStreamForClient[heraldv1.SubscribeRequest, heraldv1.SubscribeResponse]
	cancel context.CancelFunc
	queue  []event // events of the last frame; those from head on are not read yet
	head   int

	sendMu  sync.Mutex // serializes the request side
	mu      sync.Mutex
	waiting map[string]waiters     // settlements sent, by delivery id: who takes the outcome
	pending []*heraldv1.Settlement // settlements to send
	sending bool
	ended   error // set once the stream has ended
	wg      sync.WaitGroup
}

// subscribe opens a Subscribe call and waits until the server has accepted the
// statement (its first, empty frame), so an error in it is returned here.
func (t *transport) subscribe(ctx context.Context, open *heraldv1.SubscribeOpen) (*consumeConn, error) {
	open.BinaryMatch = true // matchMap reads either form
	var c *consumeConn
	err := t.call(ctx, true, func(ep *endpoint) (err error) {
		c, err = ep.subscribe(ctx, open)
		return err
	})
	return c, err
}

func (ep *endpoint) subscribe(ctx context.Context, open *heraldv1.SubscribeOpen) (*consumeConn, error) {
	ctx, cancel := context.WithCancel(ctx)
	call := ep.rpc.Subscribe(ctx)
	if err := call.Send(&heraldv1.SubscribeRequest{Open: open}); err != nil && !errors.Is(err, io.EOF) {
		cancel()
		return nil, fromConnect(err)
	}
	if _, err := call.Receive(); err != nil {
		cancel()
		return nil, fromConnect(err)
	}
	c := &consumeConn{call: call, cancel: cancel, waiting: map[string]waiters{}}
	// A cancelled request context does not always wake a Receive already waiting on
	// the HTTP/2 response body; closing the response side does.
	context.AfterFunc(ctx, func() { _ = call.CloseResponse() })
	return c, nil
}

// next returns the next delivery or timeout; settlement outcomes in between are handed
// to their callers. It returns the stream's error once it has ended.
func (c *consumeConn) next() (event, error) {
	for c.head == len(c.queue) {
		// Every event read: the next frame's go into the same array.
		c.queue, c.head = c.queue[:0], 0
		resp, err := c.call.Receive()
		if err != nil {
			err = fromConnect(err)
			c.end(err)
			return event{}, err
		}
		c.settled(resp.GetSettled())
		for _, d := range resp.GetDeliveries() {
			ev := event{Type: eventConsumed, DeliveryID: d.GetDeliveryId(), Attempt: int(d.GetAttempt()), Releases: int(d.GetReleases()), Seq: d.GetSeq(), Tick: d.GetTick()}
			if ev.Match, err = matchMap(d.GetMatchBinary(), d.GetMatch()); err != nil {
				return event{}, fmt.Errorf("client: bad delivery %s: %w", ev.DeliveryID, err)
			}
			if d.GetDeadline() != 0 {
				ev.Deadline = time.Unix(0, d.GetDeadline()).UTC()
			}
			c.queue = append(c.queue, ev)
		}
		for _, we := range resp.GetEvents() {
			ev, err := wireEvent(we)
			if err != nil {
				return event{}, err
			}
			c.queue = append(c.queue, ev)
		}
	}
	ev := c.queue[c.head]
	c.queue[c.head] = event{} // the array is kept: let the event's match go
	c.head++
	return ev, nil
}

// settled hands the outcomes of settlements to their callers.
func (c *consumeConn) settled(results []*heraldv1.SettleResult) {
	if len(results) == 0 {
		return
	}
	type answer struct {
		to  settleWaiter
		out settleOutcome
	}
	answers := make([]answer, 0, len(results))
	c.mu.Lock()
	for _, r := range results {
		id := r.GetDeliveryId()
		ws, ok := c.waiting[id]
		if !ok {
			continue
		}
		w := ws.first
		if len(ws.rest) == 0 {
			delete(c.waiting, id)
		} else {
			c.waiting[id] = waiters{first: ws.rest[0], rest: ws.rest[1:]}
		}
		var out settleOutcome
		switch {
		case r.GetError() != nil:
			out.err = detailError(r.GetError())
		case !r.GetOk():
			out.err = herald.Errorf(herald.CodeInternal, "the server did not settle delivery %q", id)
		}
		if d := r.GetDeadline(); d != nil {
			out.deadline = d.AsTime()
		}
		answers = append(answers, answer{w, out})
	}
	c.mu.Unlock()
	for _, a := range answers {
		a.to.settled(a.out)
	}
}

// waiters take the outcomes of a delivery's settlements in the order sent; the first
// is kept apart, so the usual single settlement needs no slice.
type waiters struct {
	first settleWaiter
	rest  []settleWaiter
}

// settleWaiter takes the outcome of one settlement: a SettleFuture, or the channel of
// a caller that waits (outcomeChan).
type settleWaiter interface{ settled(settleOutcome) }

// outcomeChan hands the outcome to a waiting caller; its room is one.
type outcomeChan chan settleOutcome

func (c outcomeChan) settled(out settleOutcome) { c <- out }

// waitLocked queues done for the outcome of the next settlement of id answered.
func (c *consumeConn) waitLocked(id string, done settleWaiter) {
	if ws, ok := c.waiting[id]; ok {
		ws.rest = append(ws.rest, done) // an EXTEND, say, then the ACK
		c.waiting[id] = ws
		return
	}
	c.waiting[id] = waiters{first: done}
}

// settleOutcome is what the server said about one settlement.
type settleOutcome struct {
	err      error
	deadline time.Time
}

// settle sends one settlement (with those of other callers made meanwhile) and waits
// for its outcome, or for ctx. A settlement whose caller stopped waiting is still sent.
func (c *consumeConn) settle(ctx context.Context, s *heraldv1.Settlement) settleOutcome {
	w := make(outcomeChan, 1)
	c.settleAsync(s, w)
	select {
	case out := <-w:
		return out
	case <-ctx.Done():
		return settleOutcome{err: ctx.Err()}
	}
}

// settleAsync sends one settlement (with those of other callers made meanwhile); done
// takes its outcome once the server has answered, or the stream has ended. done must
// not block.
func (c *consumeConn) settleAsync(s *heraldv1.Settlement, done settleWaiter) {
	c.mu.Lock()
	if err := c.ended; err != nil {
		c.mu.Unlock()
		done.settled(settleOutcome{err: fmt.Errorf("%w: the subscription's stream ended (%v), so the server released the message", ErrLeaseExpired, err)})
		return
	}
	c.waitLocked(s.GetDeliveryId(), done)
	c.pending = append(c.pending, s)
	if !c.sending {
		c.sending = true
		c.wg.Add(1)
		go c.sendSettlements()
	}
	c.mu.Unlock()
}

// settleBatch bounds the settlements of one frame.
const settleBatch = 1000

// sendSettlements writes what is pending, a frame at a time, until nothing is.
func (c *consumeConn) sendSettlements() {
	defer c.wg.Done()
	for {
		gather(&c.mu, settleBatch, func() (bool, int) { return len(c.waiting) > len(c.pending), len(c.pending) })
		c.mu.Lock()
		n := min(len(c.pending), settleBatch)
		if n == 0 || c.ended != nil {
			c.sending = false
			c.mu.Unlock()
			return
		}
		batch := c.pending[:n:n]
		c.pending = c.pending[n:]
		c.mu.Unlock()
		c.sendMu.Lock()
		err := c.call.Send(&heraldv1.SubscribeRequest{Settle: batch})
		c.sendMu.Unlock()
		if err != nil {
			c.end(fromConnect(err))
		}
		recycleSettlements(batch)
	}
}

// credit sends a new credit.
func (c *consumeConn) credit(n int) error {
	c.mu.Lock()
	err := c.ended
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return fromConnect(c.call.Send(&heraldv1.SubscribeRequest{Credit: uint32(n)}))
}

// end records that the stream ended and fails the settlements still waiting.
func (c *consumeConn) end(err error) {
	c.mu.Lock()
	if c.ended != nil {
		c.mu.Unlock()
		return
	}
	if err == nil {
		err = errors.New("client: the stream ended")
	}
	c.ended = err
	waiting := c.waiting
	c.waiting = map[string]waiters{}
	c.pending = nil
	c.mu.Unlock()
	for _, ws := range waiting {
		for _, w := range append([]settleWaiter{ws.first}, ws.rest...) {
			w.settled(settleOutcome{err: unanswered(err)})
		}
	}
}

// unanswered is the error of a settlement sent on a stream that ended (with cause)
// before its answer came: it may have committed, or not, in which case the server has
// released the lease. So it has its own code, E4023, rather than an expired lease's,
// and wraps the cause.
func unanswered(cause error) error {
	return &herald.Error{Code: herald.CodeOutcomeUnknown, Err: cause,
		Message: fmt.Sprintf("client: the subscription's stream ended (%v) before the server answered; the settlement may or may not have taken effect", cause)}
}

// close ends the call: the server releases the leases still held.
// closeGracefully ends the request side and waits, until ctx ends, for the server to end
// the stream (readerDone closes once the reader has seen it end): the server has then
// let the consumer go and given its unsettled deliveries back, so a consumer started
// right after finds them in the queue. Then it closes.
func (c *consumeConn) closeGracefully(ctx context.Context, readerDone <-chan struct{}) {
	c.end(ErrSubscriptionClosed)
	c.sendMu.Lock()
	err := c.call.CloseRequest()
	c.sendMu.Unlock()
	if err == nil {
		select {
		case <-readerDone:
		case <-ctx.Done():
		}
	}
	c.close()
}

func (c *consumeConn) close() {
	c.end(ErrSubscriptionClosed)
	c.cancel()
	c.wg.Wait()
	c.sendMu.Lock()
	_ = c.call.CloseRequest()
	c.sendMu.Unlock()
	_ = c.call.CloseResponse()
}

// settlements recycles the wire settlements that frames have carried: one is built for
// every message settled, and none is needed once its frame is written.
var settlements = sync.Pool{New: func() any { return new(heraldv1.Settlement) }}

// recycleSettlements hands back the settlements of a frame that has been written (Send
// encodes a message before it returns).
func recycleSettlements(batch []*heraldv1.Settlement) {
	for _, s := range batch {
		s.Reset()
		settlements.Put(s)
	}
}

// settlement builds the wire settlement of m: how is ack, nack (after delay, if
// positive), reject or extend (by d, if positive). It comes from settlements, and goes
// back there once its frame is written.
func settlement(id, how string, d time.Duration) *heraldv1.Settlement {
	s := settlements.Get().(*heraldv1.Settlement)
	s.DeliveryId = id
	switch how {
	case "ack":
		s.Action = heraldv1.Settlement_ACTION_ACK
	case "reject":
		s.Action = heraldv1.Settlement_ACTION_REJECT
	case "extend":
		s.Action = heraldv1.Settlement_ACTION_EXTEND
		if d > 0 {
			s.By = durationpb.New(d)
		}
	default:
		s.Action = heraldv1.Settlement_ACTION_NACK
		if d > 0 {
			s.Delay = durationpb.New(d)
		}
	}
	return s
}

// wireEvent reads a stream event of the wire.
func wireEvent(we *heraldv1.WatchEvent) (event, error) {
	ev := event{Type: we.GetType(), Count: int(we.GetCount()), DeliveryID: we.GetDeliveryId(), Attempt: int(we.GetAttempt()), Releases: int(we.GetReleases()),
		Seq: we.GetSeq(), Tick: we.GetTick(), Code: herald.Code(we.GetCode()), Message: we.GetMessage(), Last: we.GetLast()}
	var err error
	if ev.Match, err = matchMap(we.GetMatchBinary(), we.GetMatch()); err != nil {
		return event{}, fmt.Errorf("client: bad %s event at seq %d: %w", ev.Type, ev.Seq, err)
	}
	if ev.Prev, err = matchMap(we.GetPrevBinary(), we.GetPrev()); err != nil {
		return event{}, fmt.Errorf("client: bad %s event at seq %d: %w", ev.Type, ev.Seq, err)
	}
	return ev, nil
}

// streamRequest is what a watch-mode stream is opened with.
type streamRequest struct {
	statement string
	params    map[string]any
	session   string
	after     uint64 // > 0: resume after this position
}

// eventStream is one open watch-mode stream.
type eventStream interface {
	// next blocks for the next event; it returns io.EOF when the server ended the stream.
	next() (event, error)
	// close ends the stream; next then returns an error.
	close()
}

// watchConn is one open Watch call.
type watchConn struct {
	call   *connect.ServerStreamForClient[heraldv1.WatchResponse]
	cancel context.CancelFunc
	queue  []event
}

// openStream opens a watch-mode stream on the client's WatchMany call (a Watch call of
// its own on a server without one) and waits until the server has accepted the
// statement.
func (t *transport) openStream(ctx context.Context, r streamRequest) (eventStream, error) {
	params, err := wireParams(r.params)
	if err != nil {
		return nil, err
	}
	req := &heraldv1.WatchRequest{Query: r.statement, Params: params, Session: r.session, After: r.after,
		BinaryMatch: true} // wireEvent reads either form
	var st eventStream
	err = t.call(ctx, true, func(ep *endpoint) (err error) {
		st, err = ep.openStream(ctx, req)
		return err
	})
	return st, err
}

func (ep *endpoint) openStream(ctx context.Context, req *heraldv1.WatchRequest) (eventStream, error) {
	ep.watches.mu.Lock()
	many := !ep.watches.unsupported
	ep.watches.mu.Unlock()
	if many {
		st, err := ep.watches.open(ctx, req)
		if !errors.Is(err, errNoWatchMany) {
			return st, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	call, err := ep.rpc.Watch(ctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		return nil, fromConnect(err)
	}
	if !call.Receive() {
		err := call.Err()
		_ = call.Close()
		cancel()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, fromConnect(err)
	}
	return &watchConn{call: call, cancel: cancel}, nil
}

func (w *watchConn) next() (event, error) {
	for len(w.queue) == 0 {
		if !w.call.Receive() {
			if err := w.call.Err(); err != nil {
				return event{}, fromConnect(err)
			}
			return event{}, io.EOF
		}
		for _, we := range w.call.Msg().GetEvents() {
			ev, err := wireEvent(we)
			if err != nil {
				return event{}, err
			}
			w.queue = append(w.queue, ev)
		}
	}
	ev := w.queue[0]
	w.queue = w.queue[1:]
	return ev, nil
}

func (w *watchConn) close() {
	w.cancel()
	_ = w.call.Close()
}
