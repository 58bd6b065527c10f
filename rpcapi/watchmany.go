package rpcapi

import (
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/broker"
)

// A WatchMany call carries many watch-mode streams. The call's goroutine reads the
// requests (opens and closes); one writer goroutine sends frames. A stream tells the
// writer when it has put events in its channel (notifier), so that no goroutine waits
// on each channel: the writer takes the streams that have something, one frame for all
// of them.

// A watch opened with credit (WatchManyRequest.credit) is sent at most that many
// events until the client grants more; with none left the writer leaves its events in
// its channel, where its delivery option decides what happens when it fills, and the
// call's other watches go on.

// Field numbers of WatchManyResponse and WatchBatch, for frames assembled from events
// already encoded.
const (
	manyBatchesField   = 1
	batchIDField       = 1
	batchOpenedField   = 2
	batchEventsField   = 3
	batchEndedField    = 4
	batchCreditField   = 5
	maxWatchesPerFrame = 256
)

// manyWatch is one watch of a WatchMany call.
type manyWatch struct {
	id     uint64
	st     broker.Stream
	binary bool // its values go in their binary encoding (WatchRequest.binary_match)
	queued bool // in the mux's ready list (under the mux's lock)
	// limited: opened with credit; credit is the events the client has room for.
	limited bool
	credit  atomic.Int64
}

// unlimited is the credit a closed watch gets: what is left of it goes out, then its
// end.
const unlimited = math.MaxInt64 / 2

// allowance is how many events the writer may take for w in one frame.
func (w *manyWatch) allowance() int {
	if !w.limited {
		return maxEventsPerFrame
	}
	return int(max(0, min(w.credit.Load(), maxEventsPerFrame)))
}

// manyAnswer is the answer to an open: registered (held to its credit or not), or
// refused with err.
type manyAnswer struct {
	id      uint64
	err     error
	limited bool
}

// watchMux is the shared state of one WatchMany call.
type watchMux struct {
	opens   sync.WaitGroup // opens under way (handleMany)
	mu      sync.Mutex
	opening map[uint64]bool
	watches map[uint64]*manyWatch
	ready   []*manyWatch
	answers []manyAnswer
	closed  bool
	wake    chan struct{}
	// answered cuts the writer's linger short: an open waits for its answer, and the
	// linger is for gathering a busy watch's events, not for holding answers back.
	answered chan struct{}
}

func (m *watchMux) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// markReady queues w for the writer.
func (m *watchMux) markReady(w *manyWatch) {
	m.mu.Lock()
	if !w.queued {
		w.queued = true
		m.ready = append(m.ready, w)
	}
	m.mu.Unlock()
	m.signal()
}

func (m *watchMux) answer(a manyAnswer) {
	m.mu.Lock()
	m.answerLocked(a)
	m.mu.Unlock()
	m.signal()
}

func (m *watchMux) answerLocked(a manyAnswer) {
	m.answers = append(m.answers, a)
	select {
	case m.answered <- struct{}{}:
	default:
	}
}

// closeAll ends every watch of the call; later opens are refused.
func (m *watchMux) closeAll() {
	m.mu.Lock()
	m.closed = true
	ws := m.watches
	m.watches = nil
	m.mu.Unlock()
	for _, w := range ws {
		w.st.Close()
	}
}

// WatchMany serves many watch-mode streams on one call (see the proto).
func (s *Service) WatchMany(ctx context.Context, stream *connect.BidiStream[heraldv1.WatchManyRequest, heraldv1.WatchManyResponse]) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.streams, cancel)()
	m := &watchMux{watches: map[uint64]*manyWatch{}, opening: map[uint64]bool{}, wake: make(chan struct{}, 1), answered: make(chan struct{}, 1)}
	defer func() {
		cancel()
		m.closeAll()
		m.opens.Wait() // an open that finishes now closes what it opened
	}()
	done := make(chan error, 1)
	go func() { done <- s.writeMany(ctx, stream, m) }()
	recvErr := receiveAll(stream, func(req *heraldv1.WatchManyRequest) error { return s.handleMany(ctx, m, req) })
	select {
	case err := <-done:
		return err
	case err := <-recvErr:
		if errors.Is(err, io.EOF) {
			// The caller closed its side: its watches end, and their ends go out.
			m.closeAll()
			m.signal()
			return <-done
		}
		cancel()
		<-done
		return err
	}
}

// handleMany opens or closes one watch. A watch that cannot open is answered on the
// stream; only a malformed request ends the call. Opens run side by side (each one
// commits its _Watch node), so a client that opens many watches at once waits for about
// one commit, not one per watch.
func (s *Service) handleMany(ctx context.Context, m *watchMux, req *heraldv1.WatchManyRequest) error {
	id := req.GetId()
	switch {
	case req.GetOpen() != nil:
		m.mu.Lock()
		_, taken := m.watches[id]
		if taken || m.opening[id] || m.closed {
			m.mu.Unlock()
			if taken || m.opening[id] {
				return herald.Errorf(herald.CodeMalformedRequest, "watch id %d is already open on this call", id)
			}
			return nil
		}
		m.opening[id] = true
		m.opens.Add(1)
		m.mu.Unlock()
		go func() {
			defer m.opens.Done()
			s.openMany(ctx, m, id, req.GetOpen(), req.GetCredit())
		}()
	case req.GetClose():
		m.mu.Lock()
		w := m.watches[id]
		m.mu.Unlock()
		if w != nil {
			w.credit.Add(unlimited)
			w.st.Close() // its channel closes; the writer then sends its end
		}
	case req.GetCredit() > 0:
		m.mu.Lock()
		w := m.watches[id]
		m.mu.Unlock()
		if w != nil {
			w.credit.Add(int64(min(req.GetCredit(), unlimited)))
			m.markReady(w)
		}
	default:
		return herald.Errorf(herald.CodeMalformedRequest, "a WatchMany request opens a watch, closes one or grants one credit: set open, close or credit")
	}
	return nil
}

// openMany opens watch id with credit (0: no limit) and registers it with the call's
// writer, or answers why not.
func (s *Service) openMany(ctx context.Context, m *watchMux, id uint64, req *heraldv1.WatchRequest, credit uint64) {
	st, err := s.openWatch(ctx, req)
	if err != nil {
		m.mu.Lock()
		delete(m.opening, id)
		m.mu.Unlock()
		m.answer(manyAnswer{id: id, err: err})
		return
	}
	w := &manyWatch{id: id, st: st, binary: req.GetBinaryMatch(), limited: credit > 0}
	w.credit.Store(int64(min(credit, unlimited)))
	m.mu.Lock()
	delete(m.opening, id)
	if m.closed {
		m.mu.Unlock()
		st.Close()
		return
	}
	m.watches[id] = w
	m.answerLocked(manyAnswer{id: id, limited: w.limited})
	m.mu.Unlock()
	st.SetNotify(func() { m.markReady(w) })
	m.markReady(w) // what it put in its channel before the callback was set
}

// writeMany sends frames until ctx ends, gathering what every ready watch has (after
// the linger, as Watch does).
func (s *Service) writeMany(ctx context.Context, stream *connect.BidiStream[heraldv1.WatchManyRequest, heraldv1.WatchManyResponse], m *watchMux) error {
	var raw, batch []byte
	var evs []herald.Event
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return s.ended(ctx)
		case <-m.wake:
		}
		if !s.lingered(ctx, last, m.answered) {
			return s.ended(ctx)
		}
		release, ok := s.frameSlot(ctx)
		if !ok {
			return s.ended(ctx)
		}
		m.mu.Lock()
		answers, ready := m.answers, m.ready
		m.answers, m.ready = nil, nil
		select {
		case <-m.answered: // these answers go now
		default:
		}
		if len(ready) > maxWatchesPerFrame {
			m.ready, ready = ready[maxWatchesPerFrame:], ready[:maxWatchesPerFrame]
			m.signal()
		}
		for _, w := range ready {
			w.queued = false
		}
		closed, empty := m.closed, len(m.watches) == 0
		m.mu.Unlock()
		raw = raw[:0]
		for _, a := range answers {
			batch = appendAnswer(batch[:0], a)
			raw = appendBatch(raw, batch)
		}
		events := false // the linger runs from frames with events, not from answers alone
		for _, w := range ready {
			allow := w.allowance()
			if allow == 0 {
				continue // no credit: granting some marks it ready again
			}
			var ended, full bool
			var sent int
			batch, sent, ended, full = s.drainMany(batch[:0], w, &evs, allow)
			if w.limited && w.credit.Add(-int64(sent)) <= 0 {
				full = false // it waits for credit, which marks it ready again
			}
			if ended {
				m.mu.Lock()
				if m.watches[w.id] == w {
					delete(m.watches, w.id)
				}
				empty = len(m.watches) == 0
				m.mu.Unlock()
			}
			if !ended && full {
				m.markReady(w) // more than a frame's share may wait: the next frame goes on
			}
			if len(batch) > 0 {
				raw = appendBatch(raw, batch)
				events = true
			}
		}
		release()
		if len(raw) > 0 {
			frame := &heraldv1.WatchManyResponse{}
			frame.ProtoReflect().SetUnknown(raw)
			if err := stream.Send(frame); err != nil {
				return err
			}
			if s.linger > 0 && events {
				last = s.clock.Now()
			}
		}
		if closed && empty {
			return nil // the caller closed its side and every watch has ended
		}
	}
}

// drainMany encodes the events waiting for w (up to max) as one batch, and reports
// how many it took, whether the watch ended (its channel closed, or an error event
// came) and whether the batch is full (more may wait). evs is scratch space.
func (s *Service) drainMany(batch []byte, w *manyWatch, evs *[]herald.Event, max int) (out []byte, sent int, ended, full bool) {
	taken, closed := w.st.Take((*evs)[:0], max)
	*evs = taken
	if len(taken) == 0 && !closed {
		return batch[:0], 0, false, false // nothing yet
	}
	batch = protowire.AppendTag(batch, batchIDField, protowire.VarintType)
	batch = protowire.AppendVarint(batch, w.id)
	for _, ev := range taken {
		b, err := encodedEvent(ev, w.binary)
		if err != nil {
			ev = herald.Event{Type: herald.EventError, Code: herald.CodeOf(err), Message: err.Error()}
			b, _ = encodedEvent(ev, false)
		}
		batch = protowire.AppendTag(batch, batchEventsField, protowire.BytesType)
		batch = protowire.AppendBytes(batch, b)
		if ev.Type == herald.EventError {
			w.st.Close()
			return appendEnded(batch), len(taken), true, false
		}
	}
	if closed {
		return appendEnded(batch), len(taken), true, false
	}
	return batch, len(taken), false, len(taken) == max
}

func appendEnded(batch []byte) []byte {
	batch = protowire.AppendTag(batch, batchEndedField, protowire.VarintType)
	return protowire.AppendVarint(batch, 1)
}

// appendAnswer encodes the answer to an open: opened, or the error event that ends it.
func appendAnswer(batch []byte, a manyAnswer) []byte {
	batch = protowire.AppendTag(batch, batchIDField, protowire.VarintType)
	batch = protowire.AppendVarint(batch, a.id)
	if a.err == nil {
		batch = protowire.AppendTag(batch, batchOpenedField, protowire.VarintType)
		batch = protowire.AppendVarint(batch, 1)
		if a.limited {
			batch = protowire.AppendTag(batch, batchCreditField, protowire.VarintType)
			batch = protowire.AppendVarint(batch, 1)
		}
		return batch
	}
	he := herald.AsError(a.err)
	b, _ := encodedEvent(herald.Event{Type: herald.EventError, Code: he.Code, Message: he.Message}, false)
	batch = protowire.AppendTag(batch, batchEventsField, protowire.BytesType)
	batch = protowire.AppendBytes(batch, b)
	return appendEnded(batch)
}

// appendBatch appends one encoded WatchBatch to a WatchManyResponse's bytes.
func appendBatch(raw, batch []byte) []byte {
	raw = protowire.AppendTag(raw, manyBatchesField, protowire.BytesType)
	return protowire.AppendBytes(raw, batch)
}
