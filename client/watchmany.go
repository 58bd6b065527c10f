package client

import (
	"context"
	"errors"
	"io"
	"sync"

	"connectrpc.com/connect"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
)

// A client's watch-mode streams share one WatchMany call: it opens with the first watch
// and ends with the last. Each watch has an id on the call; a reader goroutine, owned by
// the call, hands each watch the events of its batches. Against a server without
// WatchMany, watches fall back to a Watch call each.

// errNoWatchMany is the failure of an open on a server without WatchMany.
var errNoWatchMany = errors.New("client: the server has no WatchMany")

// maxQueuedEvents is each watch's credit: the server sends a watch at most this many
// events that Next has not taken, so one watch that is not read holds up none of the
// others on its call (its events wait on the server, where its delivery option
// decides what happens). Next gives credit back a quarter of it at a time, to a server
// that said it holds the watch to it (WatchBatch.credit). Against a server without
// credit the bound is the call's reader waiting while a queue is full, and the
// server's frames wait for it in turn.
var maxQueuedEvents = 4096 // a variable for tests (SetWatchCredit)

// watchMux opens the client's WatchMany calls.
type watchMux struct {
	ep          *endpoint
	mu          sync.Mutex
	cur         *manyCall // the call new watches join; nil: none open
	nextID      uint64
	unsupported bool // the server answered that it has no WatchMany
}

// manyCall is one WatchMany call.
type manyCall struct {
	mux    *watchMux
	call   *connect.BidiStreamForClient[heraldv1.WatchManyRequest, heraldv1.WatchManyResponse]
	cancel context.CancelFunc
	sendMu sync.Mutex
	subs   map[uint64]*manyStream // under mux.mu
}

// manyStream is one watch on a WatchMany call (an eventStream).
type manyStream struct {
	c      *manyCall
	id     uint64
	ctx    context.Context // the watch's: next returns when it ends
	opened chan error      // the server's answer to the open

	mu       sync.Mutex
	answered bool
	room     *sync.Cond // signalled when next takes events (the reader may wait for room)
	queue    []event
	credit   int   // its credit: maxQueuedEvents when it opened
	granting bool  // the server holds it to its credit: next gives credit back
	taken    int   // events next has taken since it last gave their credit back
	end      error // once the queue is read: io.EOF (ended) or the call's failure
	closed   bool
	wake     chan struct{}
}

// open registers a watch on the current call (opening one when there is none), sends
// its open and waits for the server's answer.
func (m *watchMux) open(ctx context.Context, req *heraldv1.WatchRequest) (eventStream, error) {
	m.mu.Lock()
	if m.cur == nil {
		cctx, cancel := context.WithCancel(context.Background())
		c := &manyCall{mux: m, call: m.ep.rpc.WatchMany(cctx), cancel: cancel, subs: map[uint64]*manyStream{}}
		m.cur = c
		go c.read()
	}
	c := m.cur
	m.nextID++
	s := &manyStream{c: c, id: m.nextID, ctx: ctx, opened: make(chan error, 1), wake: make(chan struct{}, 1), credit: maxQueuedEvents}
	s.room = sync.NewCond(&s.mu)
	c.subs[s.id] = s
	m.mu.Unlock()
	if err := c.send(&heraldv1.WatchManyRequest{Id: s.id, Op: &heraldv1.WatchManyRequest_Open{Open: req}, Credit: uint64(s.credit)}); err != nil && !errors.Is(err, io.EOF) {
		c.fail(err)
	} // io.EOF: the server ended the call, and the reader learns why from Receive

	select {
	case err := <-s.opened:
		if err != nil {
			s.close()
			return nil, err
		}
		return s, nil
	case <-ctx.Done():
		s.close()
		return nil, ctx.Err()
	}
}

func (c *manyCall) send(r *heraldv1.WatchManyRequest) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.call.Send(r)
}

// read hands the batches of every frame to their watches until the call ends; it then
// fails the watches still on it.
func (c *manyCall) read() {
	for {
		resp, err := c.call.Receive()
		if err != nil {
			c.fail(err)
			return
		}
		for _, b := range resp.GetBatches() {
			c.mux.mu.Lock()
			s := c.subs[b.GetId()]
			c.mux.mu.Unlock()
			if s != nil {
				s.deliver(b)
			}
		}
	}
}

// fail ends the call: its watches get err (they reconnect as after a dropped Watch
// call), and new watches open a new call.
func (c *manyCall) fail(err error) {
	unsupported := connect.CodeOf(err) == connect.CodeUnimplemented
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	err = fromConnect(err)
	c.mux.mu.Lock()
	if c.mux.cur == c {
		c.mux.cur = nil
	}
	if unsupported {
		c.mux.unsupported = true
		err = errNoWatchMany
	}
	subs := c.subs
	c.subs = map[uint64]*manyStream{}
	c.mux.mu.Unlock()
	for _, s := range subs {
		s.finish(err)
	}
	c.cancel()
	_ = c.call.CloseResponse()
}

// leave forgets watch id; the last watch to leave ends the call (the server then ends
// its side, and read returns).
func (c *manyCall) leave(id uint64, sendClose bool) {
	c.mux.mu.Lock()
	_, was := c.subs[id]
	delete(c.subs, id)
	last := was && len(c.subs) == 0 && c.mux.cur == c
	if last {
		c.mux.cur = nil
	}
	c.mux.mu.Unlock()
	if !was {
		return
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if sendClose && !last {
		_ = c.call.Send(&heraldv1.WatchManyRequest{Id: id, Op: &heraldv1.WatchManyRequest_Close{Close: true}})
	}
	if last {
		_ = c.call.CloseRequest()
	}
}

// deliver queues a batch's events, waiting while the watch's queue is full.
func (s *manyStream) deliver(b *heraldv1.WatchBatch) {
	if b.GetOpened() {
		if b.GetCredit() {
			s.mu.Lock()
			s.granting = true
			s.mu.Unlock()
		}
		s.answer(nil)
	}
	evs := make([]event, 0, len(b.GetEvents()))
	for _, we := range b.GetEvents() {
		ev, err := wireEvent(we)
		if err != nil {
			s.finish(err)
			s.c.leave(s.id, true)
			return
		}
		evs = append(evs, ev)
	}
	if len(evs) > 0 && evs[0].Type == eventError && !b.GetOpened() && s.answer(&herald.Error{Code: evs[0].Code, Message: evs[0].Message}) {
		s.c.leave(s.id, false) // the open was refused
		return
	}
	s.mu.Lock()
	for len(s.queue) >= s.credit && !s.closed {
		s.room.Wait()
	}
	s.queue = append(s.queue, evs...)
	if b.GetEnded() && s.end == nil {
		s.end = io.EOF
	}
	s.mu.Unlock()
	s.signal()
	if b.GetEnded() {
		s.c.leave(s.id, false)
	}
}

// answer passes the server's answer to the open; false when it was answered before.
func (s *manyStream) answer(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answered {
		return false
	}
	s.answered = true
	s.opened <- err // buffered: the only send
	return true
}

// finish ends the stream with err once its queue is read.
func (s *manyStream) finish(err error) {
	s.answer(err)
	s.mu.Lock()
	if s.end == nil {
		s.end = err
	}
	s.mu.Unlock()
	s.signal()
}

func (s *manyStream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *manyStream) next() (event, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			ev := s.queue[0]
			s.queue = s.queue[1:]
			s.room.Signal()
			grant := 0
			if s.granting {
				s.taken++
				if s.taken >= max(1, s.credit/4) {
					grant, s.taken = s.taken, 0
				}
			}
			s.mu.Unlock()
			if grant > 0 {
				// A failed send fails the call, which its reader reports.
				_ = s.c.send(&heraldv1.WatchManyRequest{Id: s.id, Credit: uint64(grant)})
			}
			return ev, nil
		}
		end, closed := s.end, s.closed
		s.mu.Unlock()
		switch {
		case closed:
			return event{}, io.ErrClosedPipe
		case end != nil:
			return event{}, end
		}
		select {
		case <-s.wake:
		case <-s.ctx.Done():
			return event{}, s.ctx.Err()
		}
	}
}

// close ends the watch: the server is told, and the call ends with its last watch.
func (s *manyStream) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.queue = nil
	s.room.Broadcast()
	s.mu.Unlock()
	s.signal()
	s.c.leave(s.id, true)
}
