package delivery

import (
	"sync"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
)

// The settler commits ACK, NACK and EXTEND: every settlement claimed while the previous
// commit was syncing goes into the next one, so concurrent settlements share one
// transaction, one pass through the engine's writer lock and one sync. It is a
// goroutine of the Service, started and stopped with it.

// settlement is one claimed lease's ACK, NACK or EXTEND.
type settlement struct {
	l        *lease
	apply    func(tx *engine.SysTx) // writes its effect into the batch's transaction
	after    func() error           // updates memory once committed, under s.mu; its error is the caller's
	ack      bool                   // an ACK: applyAck and afterAck instead of apply and after
	svc      *Service               // an ACK's service
	drop     recordDrop             // an ACK's record deletion
	deadline time.Time              // EXTEND: the new deadline
	batch    *settleBatch           // the caller's batch
	slot     int                    // its place in the batch
}

// settleBatch collects the outcomes of one caller's settlements and reports them when
// the last one is known.
type settleBatch struct {
	mu        sync.Mutex
	results   []SettleResult
	left      int
	seq, tick uint64
	done      func(results []SettleResult, seq, tick uint64)
}

// write writes the settlement's effect into the batch's transaction.
func (st *settlement) write(tx *engine.SysTx) {
	if st.ack {
		st.applyAck(tx)
		return
	}
	st.apply(tx)
}

// committed updates memory once the settlement is committed, under s.mu; its error is
// the caller's.
func (st *settlement) committed() error {
	if st.ack {
		return st.afterAck()
	}
	return st.after()
}

// finish records one settlement's outcome, reporting the batch when it was the last.
func (st *settlement) finish(err error, seq, tick uint64) {
	b := st.batch
	b.mu.Lock()
	b.results[st.slot].Err = err
	if err == nil {
		if !st.deadline.IsZero() {
			b.results[st.slot].Deadline = st.deadline
		}
		if seq > b.seq {
			b.seq, b.tick = seq, tick
		}
	}
	b.left--
	last := b.left == 0
	b.mu.Unlock()
	if last {
		b.done(b.results, b.seq, b.tick)
	}
}

// enqueue hands claimed settlements to the settler; settlements enqueued together are
// committed together.
func (s *Service) enqueue(sts []*settlement) {
	s.setMu.Lock()
	if s.setStopped {
		s.setMu.Unlock()
		for _, st := range sts {
			s.abort(st.l)
			st.finish(herald.Errorf(herald.CodeShuttingDown, "the delivery service is not running"), 0, 0)
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
				st.finish(herald.Errorf(herald.CodeShuttingDown, "the delivery service stopped before the settlement was committed"), 0, 0)
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
		tx.GrowAux(len(batch)) // an ACK or NACK writes or deletes one record
		tx.Reserve(len(batch)) // an ACK deletes its node
		for _, st := range batch {
			st.write(tx)
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
		st.finish(err, 0, 0)
	}
}

// settled applies a durable batch to memory and answers its callers.
func (s *Service) settled(batch []*settlement, seq, tick uint64) {
	errs := make([]error, len(batch))
	s.mu.Lock()
	for i, st := range batch {
		errs[i] = st.committed()
	}
	s.mu.Unlock()
	for i, st := range batch {
		st.finish(errs[i], seq, tick)
	}
}
