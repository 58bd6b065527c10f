package brokertest

import (
	"sync"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// Stream is a fake broker.Stream that the test feeds with Send and ends with End; Close
// (the surface's) is seen on Closed.
type Stream struct {
	mode   broker.Mode
	events chan herald.Event
	done   chan struct{}
	closed chan struct{}

	endOnce, closeOnce sync.Once
	mu                 sync.Mutex
	notify             func()
	credits            []int
	// CreditErr, when set, is what SetCredit answers.
	CreditErr error
}

var _ broker.Stream = (*Stream)(nil)

// NewStream returns a stream of mode whose channel holds buffer events.
func NewStream(mode broker.Mode, buffer int) *Stream {
	return &Stream{mode: mode, events: make(chan herald.Event, buffer), done: make(chan struct{}), closed: make(chan struct{})}
}

// Send puts ev in the stream's channel (waiting for room) and calls the notify func.
func (s *Stream) Send(ev herald.Event) {
	s.events <- ev
	s.poke()
}

// End ends the stream as the node would: its channel closes and Done fires.
func (s *Stream) End() {
	s.endOnce.Do(func() {
		close(s.events)
		close(s.done)
	})
	s.poke()
}

func (s *Stream) poke() {
	s.mu.Lock()
	fn := s.notify
	s.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// Closed is closed once the surface has called Close.
func (s *Stream) Closed() <-chan struct{} { return s.closed }

// Credits lists the credits SetCredit was given, in order.
func (s *Stream) Credits() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.credits...)
}

func (s *Stream) ID() string                  { return "fake-stream" }
func (s *Stream) Events() <-chan herald.Event { return s.events }
func (s *Stream) Done() <-chan struct{}       { return s.done }
func (s *Stream) Mode() broker.Mode           { return s.mode }

// Close records the surface's close and ends the stream.
func (s *Stream) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
	s.End()
}

func (s *Stream) Take(dst []herald.Event, max int) ([]herald.Event, bool) {
	return broker.TakeReady(s.events, dst, max)
}

func (s *Stream) SetNotify(fn func()) {
	s.mu.Lock()
	s.notify = fn
	s.mu.Unlock()
}

func (s *Stream) SetCredit(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.CreditErr != nil {
		return s.CreditErr
	}
	s.credits = append(s.credits, n)
	return nil
}
