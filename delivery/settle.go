package delivery

import (
	"context"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
)

// begin claims a lease for settlement: it must exist, not be settling already, and not
// have expired. The claim keeps the dispatcher from expiring it meanwhile. It also
// returns the subject's durable state as of the claim, for the settlement's transaction
// to write without the lock.
func (s *Service) begin(id string) (*lease, deliveryState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leases[id]
	if l == nil || l.settling || !l.deadline.After(s.clock.Now()) {
		return nil, deliveryState{}, invalidDelivery(id)
	}
	l.settling = true
	return l, stateLocked(l.subj, l), nil
}

// abort undoes a claim whose commit failed.
func (s *Service) abort(l *lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.settling = false
	if s.leases[l.id] == l && l.index < 0 {
		s.pushDeadlineLocked(l)
	}
	s.kick()
}

// finish forgets a settled lease and frees its consumer's slot.
func (s *Service) finishLocked(l *lease) {
	s.removeLeaseLocked(l)
	l.settling = false
	s.kick()
}

// Ack settles a delivery as done: the subject (the first node variable of the watch) is
// deleted with its edges. An unknown, settled or expired id answers E8004 and changes
// nothing, so a stale ACK never touches a message that was redelivered since.
func (s *Service) Ack(ctx context.Context, deliveryID string) error {
	_, err := s.ack(ctx, deliveryID)
	return err
}

// at is the position of a settlement's commit.
type at struct{ seq, tick uint64 }

func (s *Service) ack(ctx context.Context, deliveryID string) (pos at, err error) {
	l, _, err := s.begin(deliveryID)
	if err != nil {
		return pos, err
	}
	pos.seq, pos.tick, err = s.eng.System(ctx, func(tx *graph.Tx) error {
		if tx.Node(l.subj.id) != nil {
			tx.DeleteNode(l.subj.id)
		}
		if d := deliveryNodeID(l.subj.id); tx.Node(d) != nil {
			tx.DeleteNode(d)
		}
		return nil
	})
	if err != nil {
		s.abort(l)
		return pos, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishLocked(l)
	l.subj.stored = false
	s.dropSubjectLocked(l.subj)
	s.count.acked.Add(1)
	return pos, nil
}

// Nack settles a delivery as failed: the subject returns to the ready queue at its
// original position with its attempt count up, after the delay (or the watch's backoff);
// past max_redeliveries, or with NoRetry, it is dead-lettered. When the dead-letter
// destination is missing the letter is still recorded and Nack answers E8007.
func (s *Service) Nack(ctx context.Context, deliveryID string, o NackOptions) error {
	_, err := s.nack(ctx, deliveryID, o)
	return err
}

func (s *Service) nack(ctx context.Context, deliveryID string, o NackOptions) (pos at, err error) {
	l, st, err := s.begin(deliveryID)
	if err != nil {
		return pos, err
	}
	now := s.clock.Now()
	sp := s.specOf(l)
	reason := ""
	switch {
	case o.NoRetry:
		reason = ReasonNoRetry
	case l.attempt >= 1+sp.maxRedeliveries:
		reason = ReasonMaxRedeliveries
	}
	var notBefore time.Time
	if d := o.Delay; d > 0 {
		notBefore = now.Add(d)
	} else if d := sp.backoff.delay(l.attempt); d > 0 {
		notBefore = now.Add(d)
	}
	var dlErr *herald.Error
	pos.seq, pos.tick, err = s.eng.System(ctx, func(tx *graph.Tx) error {
		if reason != "" {
			_, dlErr = s.deadLetter(tx, l.subj.id, l.watch, sp.deadLetter, reason, l.attempt, l.match, now)
			return nil
		}
		if tx.Node(l.subj.id) != nil {
			deliveryState{subject: st.subject, attempts: st.attempts, notBefore: notBefore}.put(tx)
		}
		return nil
	})
	if err != nil {
		s.abort(l)
		return pos, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishLocked(l)
	s.count.nacked.Add(1)
	sub := l.subj
	if reason != "" {
		s.dropSubjectLocked(sub)
		s.count.deadLettered.Add(1)
	} else {
		sub.attempts, sub.notBefore, sub.stored = l.attempt, notBefore, true
		s.requeueLocked(sub)
	}
	if dlErr != nil {
		return pos, dlErr
	}
	return pos, nil
}

// Extend moves a lease's deadline to now + by (by 0: the watch's ack_timeout) and
// returns the new deadline. It tells the server the consumer is still working.
func (s *Service) Extend(ctx context.Context, deliveryID string, by time.Duration) (time.Time, error) {
	d, _, err := s.extend(ctx, deliveryID, by)
	return d, err
}

func (s *Service) extend(ctx context.Context, deliveryID string, by time.Duration) (time.Time, at, error) {
	var pos at
	l, st, err := s.begin(deliveryID)
	if err != nil {
		return time.Time{}, pos, err
	}
	if by <= 0 {
		by = s.specOf(l).ackTimeout
	}
	deadline := s.clock.Now().Add(by)
	pos.seq, pos.tick, err = s.eng.System(ctx, func(tx *graph.Tx) error {
		if tx.Node(l.subj.id) != nil {
			st.deadline = deadline
			st.put(tx)
		}
		return nil
	})
	if err != nil {
		s.abort(l)
		return time.Time{}, pos, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l.settling = false
	l.deadline = deadline
	s.count.extended.Add(1)
	if s.leases[l.id] == l {
		if l.index >= 0 {
			s.fixDeadlineLocked(l)
		} else {
			s.pushDeadlineLocked(l)
		}
	}
	s.kick()
	return deadline, pos, nil
}

// specOf returns the options governing l.
func (s *Service) specOf(l *lease) *spec { return l.spec() }

// defaultSpec governs a recovered lease whose watch could not be compiled again (its
// statement used parameters): the option defaults.
var defaultSpec = &spec{ackTimeout: DefaultAckTimeout, maxRedeliveries: DefaultMaxRedeliveries}

// spec returns the options l was leased under.
func (l *lease) spec() *spec {
	if l.sp != nil {
		return l.sp
	}
	return defaultSpec
}

// DeliveryOf returns the delivery id of a message's current lease: the settlement
// capability, for surfaces that settle by message id (the queue RPC). ok is false when
// the message is not leased (unknown, settled, or back in the queue).
func (s *Service) DeliveryOf(subject herald.NodeID) (id string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.subjects[subject]
	if sub == nil || sub.lease == nil || sub.lease.settling {
		return "", false
	}
	return sub.lease.id, true
}
