package delivery

import (
	"context"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
)

// The settler commits ACK, NACK and EXTEND: every settlement claimed while the previous
// commit was syncing goes into the next one, so concurrent settlements share one
// transaction, one pass through the engine's writer lock and one sync. It is a
// goroutine of the Service, started and stopped with it.

// settlement is one claimed lease's ACK, NACK or EXTEND.
type settlement struct {
	l        *lease
	apply    func(tx *graph.Tx) // writes its effect into the batch's transaction
	after    func() error       // updates memory once committed, under s.mu; its error is the caller's
	deadline time.Time          // EXTEND: the new deadline
	done     chan error         // receives the outcome once
	pos      at
}

// settle hands a claimed settlement to the settler and waits for its outcome. The
// settlement is committed even if ctx ends first: the caller only stops waiting.
func (s *Service) settle(ctx context.Context, st *settlement) (at, error) {
	s.enqueue([]*settlement{st})
	return s.wait(ctx, st)
}

// enqueue hands claimed settlements to the settler; settlements enqueued together are
// committed together.
func (s *Service) enqueue(sts []*settlement) {
	if len(sts) == 0 {
		return
	}
	for _, st := range sts {
		st.done = make(chan error, 1)
	}
	s.setMu.Lock()
	if s.setStopped {
		s.setMu.Unlock()
		for _, st := range sts {
			s.abort(st.l)
			st.done <- herald.Errorf(herald.CodeShuttingDown, "the delivery service is not running")
		}
		return
	}
	s.setQueue = append(s.setQueue, sts...)
	s.setMu.Unlock()
	select {
	case s.setWake <- struct{}{}:
	default:
	}
}

// wait waits for an enqueued settlement's outcome, or for ctx.
func (s *Service) wait(ctx context.Context, st *settlement) (at, error) {
	select {
	case err := <-st.done:
		return st.pos, err
	case <-ctx.Done():
		return at{}, ctx.Err()
	}
}

// settler commits queued settlements in batches until the service stops; what is queued
// then is refused.
func (s *Service) settler() {
	defer close(s.setDone)
	for {
		select {
		case <-s.setWake:
		case <-s.stop:
			s.setMu.Lock()
			s.setStopped = true
			batch := s.setQueue
			s.setQueue = nil
			s.setMu.Unlock()
			for _, st := range batch {
				s.abort(st.l)
				st.done <- herald.Errorf(herald.CodeShuttingDown, "the delivery service stopped before the settlement was committed")
			}
			return
		}
		for {
			s.setMu.Lock()
			batch := s.setQueue
			s.setQueue = nil
			s.setMu.Unlock()
			if len(batch) == 0 {
				break
			}
			s.commitSettlements(batch)
		}
	}
}

// commitSettlements commits a batch in one system transaction; once it is durable the
// completer applies each settlement to memory and answers it.
func (s *Service) commitSettlements(batch []*settlement) {
	err := s.commitAsync(func(tx *engine.SysTx) {
		for _, st := range batch {
			st.apply(tx.Tx)
		}
	}, func(seq, tick uint64, err error) {
		if err != nil {
			s.failSettlements(batch, err)
			return
		}
		s.settled(batch, seq, tick)
	})
	if err != nil {
		s.failSettlements(batch, err)
	}
}

func (s *Service) failSettlements(batch []*settlement, err error) {
	for _, st := range batch {
		s.abort(st.l)
		st.done <- err
	}
}

// settled applies a durable batch to memory and answers its callers.
func (s *Service) settled(batch []*settlement, seq, tick uint64) {
	errs := make([]error, len(batch))
	s.mu.Lock()
	for i, st := range batch {
		st.pos = at{seq, tick}
		errs[i] = st.after()
	}
	s.mu.Unlock()
	for i, st := range batch {
		st.done <- errs[i]
	}
}
