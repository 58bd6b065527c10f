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
	if l == nil || !l.sent || l.settling || !l.deadline.After(s.clock.Now()) {
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

func (s *Service) ack(ctx context.Context, deliveryID string) (at, error) {
	st, err := s.prepareAck(deliveryID)
	if err != nil {
		return at{}, err
	}
	return s.settle(ctx, st)
}

// prepareAck claims a lease for ACK.
func (s *Service) prepareAck(deliveryID string) (*settlement, error) {
	l, _, err := s.begin(deliveryID)
	if err != nil {
		return nil, err
	}
	return &settlement{
		l: l,
		apply: func(tx *graph.Tx) {
			if tx.Node(l.subj.id) != nil {
				tx.DeleteNode(l.subj.id)
			}
			if d := deliveryNodeID(l.subj.id); tx.Node(d) != nil {
				tx.DeleteNode(d)
			}
		},
		after: func() error {
			s.finishLocked(l)
			l.subj.stored = false
			s.dropSubjectLocked(l.subj)
			s.count.acked.Add(1)
			return nil
		},
	}, nil
}

// Nack settles a delivery as failed: the subject returns to the ready queue at its
// original position with its attempt count up, after the delay (or the watch's backoff);
// past max_redeliveries, or with NoRetry, it is dead-lettered. When the dead-letter
// destination is missing the letter is still recorded and Nack answers E8007.
func (s *Service) Nack(ctx context.Context, deliveryID string, o NackOptions) error {
	_, err := s.nack(ctx, deliveryID, o)
	return err
}

func (s *Service) nack(ctx context.Context, deliveryID string, o NackOptions) (at, error) {
	st, err := s.prepareNack(deliveryID, o)
	if err != nil {
		return at{}, err
	}
	return s.settle(ctx, st)
}

// prepareNack claims a lease for NACK.
func (s *Service) prepareNack(deliveryID string, o NackOptions) (*settlement, error) {
	l, st, err := s.begin(deliveryID)
	if err != nil {
		return nil, err
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
	return &settlement{
		l: l,
		apply: func(tx *graph.Tx) {
			if reason != "" {
				_, dlErr = s.deadLetter(tx, l.subj.id, l.watch, sp.deadLetter, reason, l.attempt, l.match, now)
				return
			}
			if tx.Node(l.subj.id) != nil {
				deliveryState{subject: st.subject, attempts: st.attempts, notBefore: notBefore}.put(tx)
			}
		},
		after: func() error {
			s.finishLocked(l)
			s.count.nacked.Add(1)
			sub := l.subj
			if sub.gone {
				s.goneLocked(sub)
			} else if reason != "" {
				s.dropSubjectLocked(sub)
				s.count.deadLettered.Add(1)
			} else {
				sub.attempts, sub.notBefore, sub.stored = l.attempt, notBefore, true
				s.requeueLocked(sub)
			}
			if dlErr != nil {
				return dlErr
			}
			return nil
		},
	}, nil
}

// Extend moves a lease's deadline to now + by (by 0: the watch's ack_timeout) and
// returns the new deadline. It tells the server the consumer is still working.
func (s *Service) Extend(ctx context.Context, deliveryID string, by time.Duration) (time.Time, error) {
	d, _, err := s.extend(ctx, deliveryID, by)
	return d, err
}

func (s *Service) extend(ctx context.Context, deliveryID string, by time.Duration) (time.Time, at, error) {
	st, err := s.prepareExtend(deliveryID, by)
	if err != nil {
		return time.Time{}, at{}, err
	}
	pos, err := s.settle(ctx, st)
	if err != nil {
		return time.Time{}, pos, err
	}
	return st.deadline, pos, nil
}

// prepareExtend claims a lease for EXTEND; the settlement's deadline is the new one.
func (s *Service) prepareExtend(deliveryID string, by time.Duration) (*settlement, error) {
	l, st, err := s.begin(deliveryID)
	if err != nil {
		return nil, err
	}
	if by <= 0 {
		by = s.specOf(l).ackTimeout
	}
	deadline := s.clock.Now().Add(by)
	return &settlement{
		l:        l,
		deadline: deadline,
		apply: func(tx *graph.Tx) {
			if tx.Node(l.subj.id) != nil {
				st.deadline = deadline
				st.put(tx)
			}
		},
		after: func() error {
			l.settling = false
			l.deadline = deadline
			s.count.extended.Add(1)
			if l.subj.gone {
				s.removeLeaseLocked(l)
				s.goneLocked(l.subj)
				s.kick()
				return nil
			}
			if s.leases[l.id] == l {
				if l.index >= 0 {
					s.fixDeadlineLocked(l)
				} else {
					s.pushDeadlineLocked(l)
				}
			}
			s.kick()
			return nil
		},
	}, nil
}

// Action is what a settlement of a batch does.
type Action int

// Settlement actions.
const (
	ActAck    Action = iota + 1 // ACK
	ActNack                     // NACK, with Delay
	ActReject                   // NACK [no_retry]: dead-letter at once
	ActExtend                   // EXTEND, with By
)

// Settle is one settlement of a batch.
type Settle struct {
	DeliveryID string
	Action     Action
	Delay      time.Duration // ActNack: redeliver no earlier than this (0: the watch's backoff)
	By         time.Duration // ActExtend: the new deadline is now + By (0: the watch's ack_timeout)
}

// SettleResult is the outcome of one settlement of a batch.
type SettleResult struct {
	Err      error     // nil, E8004 (unknown, settled or expired), E8007 (letter kept without its destination), …
	Deadline time.Time // ActExtend: the new deadline
}

// SettleMany settles a batch of deliveries in one commit (claims that fail answer on
// their own and change nothing). Each settlement behaves as Ack, Nack or Extend would;
// seq and tick are the position of the commit (zero when nothing was committed).
func (s *Service) SettleMany(ctx context.Context, items []Settle) (results []SettleResult, seq, tick uint64) {
	results = make([]SettleResult, len(items))
	sts := make([]*settlement, len(items))
	var batch []*settlement
	for i, it := range items {
		var st *settlement
		var err error
		switch it.Action {
		case ActAck:
			st, err = s.prepareAck(it.DeliveryID)
		case ActNack:
			st, err = s.prepareNack(it.DeliveryID, NackOptions{Delay: it.Delay})
		case ActReject:
			st, err = s.prepareNack(it.DeliveryID, NackOptions{NoRetry: true})
		case ActExtend:
			st, err = s.prepareExtend(it.DeliveryID, it.By)
		default:
			err = herald.Errorf(herald.CodeMalformedRequest, "unknown settlement action %d", it.Action)
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		sts[i] = st
		batch = append(batch, st)
	}
	s.enqueue(batch)
	for i, st := range sts {
		if st == nil {
			continue
		}
		pos, err := s.wait(ctx, st)
		results[i] = SettleResult{Err: err, Deadline: st.deadline}
		if err == nil && pos.seq > seq {
			seq, tick = pos.seq, pos.tick
		}
	}
	return results, seq, tick
}

// goneLocked forgets a subject that was deleted while a settlement of it committed,
// and has its durable delivery state removed by the next round.
func (s *Service) goneLocked(sub *subject) {
	if sub.stored {
		s.cleanup[deliveryNodeID(sub.id)] = true
	}
	s.dropSubjectLocked(sub)
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
	if sub == nil || sub.lease == nil || !sub.lease.sent || sub.lease.settling {
		return "", false
	}
	return sub.lease.id, true
}
