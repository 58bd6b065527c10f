package delivery

import (
	"context"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/lang/option"
)

// beginLocked claims a lease for settlement: it must exist, have reached its consumer,
// not be settling already, and not have expired. The claim keeps the dispatcher from
// expiring it meanwhile. name is how the caller named it, for the error.
func (s *Service) beginLocked(h Handle, name string) (*lease, error) {
	l := s.leases[h]
	if l == nil || !l.sent || l.settling || !l.deadline.After(s.clock.Now()) {
		return nil, invalidDelivery(name)
	}
	l.settling = true
	return l, nil
}

// abort undoes a claim whose commit failed.
func (s *Service) abort(l *lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.settling = false
	s.setEndingLocked(l, false)
	if s.leases[l.key] == l && l.index < 0 {
		s.pushDeadlineLocked(l)
	}
	s.kick()
}

// setEndingLocked marks whether an ACK of l is committing. Such a lease stays until its
// commit is durable (the ACK is answered only then), but its consumer has let go of the
// message: it no longer counts against the consumer's credit, so the next lease need
// not wait for the ACK's sync. A NACK keeps its place until durable: the message goes
// back to the ready queue first, and with a credit of one it is redelivered before the
// next message is leased.
func (s *Service) setEndingLocked(l *lease, on bool) {
	if l.ending == on {
		return
	}
	l.ending = on
	if l.cons == nil {
		return
	}
	if on {
		l.cons.ending++
		s.kick()
	} else {
		l.cons.ending--
	}
}

// finishLocked forgets a settled lease and frees its consumer's slot.
func (s *Service) finishLocked(l *lease) {
	s.removeLeaseLocked(l)
	l.settling = false
	s.kick()
}

// Ack settles a delivery as done: the subject (the first node variable of the watch) is
// deleted with its edges. An unknown, settled or expired id answers E8004 and changes
// nothing, so a stale ACK never touches a message that was redelivered since.
func (s *Service) Ack(ctx context.Context, deliveryID string) error {
	_, err := s.settleOne(ctx, Settle{DeliveryID: deliveryID, Action: ActAck})
	return err
}

// at is the position of a settlement's commit.
type at struct{ seq, tick uint64 }

// settleOne settles one delivery and waits for the outcome.
func (s *Service) settleOne(ctx context.Context, it Settle) (SettleResult, error) {
	res, seq, tick := s.SettleMany(ctx, []Settle{it})
	if res[0].Err != nil {
		return res[0], res[0].Err
	}
	res[0].at = at{seq, tick}
	return res[0], nil
}

// Nack settles a delivery as failed: the subject returns to the ready queue at its
// original position with its attempt count up, after the delay (or the watch's backoff);
// past max_redeliveries, or with NoRetry, it is dead-lettered. When the dead-letter
// destination is missing the letter is still recorded and Nack answers E8007.
func (s *Service) Nack(ctx context.Context, deliveryID string, o NackOptions) error {
	act := ActNack
	if o.NoRetry {
		act = ActReject
	}
	_, err := s.settleOne(ctx, Settle{DeliveryID: deliveryID, Action: act, Delay: o.Delay})
	return err
}

// Extend moves a lease's deadline to now + by (by 0: the watch's ack_timeout) and
// returns the new deadline. It tells the server the consumer is still working.
func (s *Service) Extend(ctx context.Context, deliveryID string, by time.Duration) (time.Time, error) {
	r, err := s.settleOne(ctx, Settle{DeliveryID: deliveryID, Action: ActExtend, By: by})
	return r.Deadline, err
}

// prepareLocked claims the lease of one settlement and prepares its effect.
func (s *Service) prepareLocked(it Settle) (*settlement, error) {
	h := it.handle
	if it.DeliveryID != "" {
		h = HandleOf(it.DeliveryID)
	}
	name := it.DeliveryID
	if name == "" {
		name = h.String()
	}
	switch it.Action {
	case ActAck, ActNack, ActReject, ActExtend:
	default:
		return nil, herald.Errorf(herald.CodeMalformedRequest, "unknown settlement action %d", it.Action)
	}
	if l := s.leases[h]; l != nil && it.Principal != nil {
		if err := it.Principal.Check(herald.ActSettle, l.subj.typ); err != nil {
			return nil, err // the lease stays as it was
		}
	}
	l, err := s.beginLocked(h, name)
	if err != nil {
		return nil, err
	}
	switch it.Action {
	case ActAck:
		s.setEndingLocked(l, true)
		return s.ackLocked(l), nil
	case ActExtend:
		return s.extendLocked(l, it.By), nil
	}
	return s.nackLocked(l, NackOptions{NoRetry: it.Action == ActReject, Delay: it.Delay}), nil
}

// ackLocked prepares an ACK: the subject and its delivery record go in one commit.
func (s *Service) ackLocked(l *lease) *settlement {
	// The most common settlement is written without closures: see settlement.write.
	return &settlement{l: l, ack: true, svc: s, drop: l.subj.recordDrop()}
}

// applyAck writes an ACK: the subject and its delivery record go.
func (st *settlement) applyAck(tx *engine.SysTx) {
	if id := st.l.subj.id; tx.Node(id) != nil {
		tx.DeleteNode(id)
	}
	st.drop.apply(tx)
}

// afterAck applies a committed ACK to memory.
func (st *settlement) afterAck() error {
	s, sub := st.svc, st.l.subj
	s.finishLocked(st.l)
	sub.stored = false
	s.dropSubjectLocked(sub)
	s.count.acked.Add(1)
	if g := s.groupOfLocked(st.l); g != nil {
		g.tally.acked++
	}
	return nil
}

// nackLocked prepares a NACK: a new record with the attempt counted and the delay, or a
// dead letter.
func (s *Service) nackLocked(l *lease, o NackOptions) *settlement {
	now := s.clock.Now()
	sp := l.opts()
	reason := ""
	switch {
	case o.NoRetry:
		reason = ReasonNoRetry
	case l.attempt >= 1+sp.MaxRedeliveries:
		reason = ReasonMaxRedeliveries
	}
	var notBefore time.Time
	if d := o.Delay; d > 0 {
		notBefore = now.Add(d)
	} else if d := sp.Backoff.Delay(l.attempt); d > 0 {
		notBefore = now.Add(d)
	}
	sub := l.subj
	var drop recordDrop
	var st deliveryState
	if reason != "" {
		drop = sub.recordDrop()
	} else {
		st = deliveryState{subject: sub.id, attempts: l.attempt, releases: sub.releases, notBefore: notBefore}
		if sub.writes >= 0 {
			sub.writes++
		}
	}
	var dlErr *herald.Error
	var readErr error
	return &settlement{
		l: l,
		apply: func(tx *engine.SysTx) {
			if reason != "" {
				_, dlErr, readErr = s.deadLetter(tx, drop, l.watch, herald.NodeID(sp.DeadLetter), reason, l.attempt, l.match, now)
				return
			}
			if tx.Node(sub.id) != nil {
				st.put(tx)
			}
		},
		after: func() error {
			if readErr != nil {
				// The letter could not be written: the lease stays as it was.
				l.settling = false
				return readErr
			}
			s.finishLocked(l)
			s.count.nacked.Add(1)
			g := s.groupOfLocked(l)
			if g != nil {
				g.tally.nacked++
			}
			if reason != "" {
				// Counted here: the letter's commit deletes the subject, which the
				// engine may already have reported (sub.gone) by now.
				s.count.deadLettered.Add(1)
				s.letteredLocked(g, sub.id, reason)
			}
			switch {
			case sub.gone:
				s.goneLocked(sub)
			case reason != "":
				s.dropSubjectLocked(sub)
			default:
				sub.attempts, sub.notBefore, sub.stored = l.attempt, notBefore, true
				s.requeueLocked(sub)
			}
			if dlErr != nil {
				return dlErr
			}
			return nil
		},
	}
}

// extendLocked prepares an EXTEND: the lease's record with the new deadline.
func (s *Service) extendLocked(l *lease, by time.Duration) *settlement {
	if by <= 0 {
		by = l.opts().AckTimeout
	}
	deadline := s.clock.Now().Add(by)
	st := stateLocked(l.subj, l)
	st.deadline = deadline
	sub := l.subj
	return &settlement{
		l:        l,
		deadline: deadline,
		apply: func(tx *engine.SysTx) {
			if tx.Node(sub.id) != nil {
				st.put(tx)
			}
		},
		after: func() error {
			l.settling = false
			l.deadline = deadline
			s.count.extended.Add(1)
			if sub.gone {
				s.removeLeaseLocked(l)
				s.goneLocked(sub)
				s.kick()
				return nil
			}
			if s.leases[l.key] == l {
				if l.index >= 0 {
					s.fixDeadlineLocked(l)
				} else {
					s.pushDeadlineLocked(l)
				}
			}
			s.kick()
			return nil
		},
	}
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

	// Principal, when set, needs the settle grant on the subject's type (E4013
	// otherwise). SettleMany takes it from its context.
	Principal *herald.Principal

	handle Handle // set by SettleHandles instead of DeliveryID
}

// SettleResult is the outcome of one settlement of a batch.
type SettleResult struct {
	Err      error     // nil, E8004 (unknown, settled or expired), E8007 (letter kept without its destination), …
	Deadline time.Time // ActExtend: the new deadline

	at at
}

// SettleMany settles a batch of deliveries in one commit (claims that fail answer on
// their own and change nothing). Each settlement behaves as Ack, Nack or Extend would;
// seq and tick are the position of the commit (zero when nothing was committed).
func (s *Service) SettleMany(ctx context.Context, items []Settle) (results []SettleResult, seq, tick uint64) {
	if p := herald.PrincipalFrom(ctx); p != nil {
		for i := range items {
			if items[i].Principal == nil {
				items[i].Principal = p
			}
		}
	}
	done := make(chan struct{})
	s.SettleAsync(items, func(r []SettleResult, sq, tk uint64) {
		results, seq, tick = r, sq, tk
		close(done)
	})
	select {
	case <-done:
		return results, seq, tick
	case <-ctx.Done():
		// The settlements still complete; the caller only stops waiting.
		results = make([]SettleResult, len(items))
		for i := range results {
			results[i].Err = ctx.Err()
		}
		return results, 0, 0
	}
}

// SettleAsync settles a batch as SettleMany does and calls done with the outcome once it
// is known (durable, or refused) instead of waiting for it. done runs on the service's
// completer (or the caller's goroutine when nothing was committed) and must not block.
func (s *Service) SettleAsync(items []Settle, done func(results []SettleResult, seq, tick uint64)) {
	results := make([]SettleResult, len(items))
	var batch []*settlement
	s.mu.Lock()
	for i, it := range items {
		st, err := s.prepareLocked(it)
		if err != nil {
			results[i].Err = err
			continue
		}
		st.slot = i
		batch = append(batch, st)
	}
	s.mu.Unlock()
	if len(batch) == 0 {
		done(results, 0, 0)
		return
	}
	b := &settleBatch{results: results, left: len(batch), done: done}
	for _, st := range batch {
		st.batch = b
	}
	s.enqueue(batch)
}

// SettleHandles settles the leases named by handles, each as it says (its DeliveryID is
// ignored), as SettleMany settles delivery ids. It is for internal callers that keep
// handles, never for client input.
func (s *Service) SettleHandles(ctx context.Context, hs []Handle, it Settle) []SettleResult {
	items := make([]Settle, len(hs))
	for i, h := range hs {
		items[i] = it
		items[i].DeliveryID, items[i].handle = "", h
	}
	res, _, _ := s.SettleMany(ctx, items)
	return res
}

// goneLocked forgets a subject that was deleted while a settlement of it committed,
// and has its delivery record removed by the next round.
func (s *Service) goneLocked(sub *subject) {
	if sub.stored {
		s.cleanup[sub.id] = dropLocked(sub)
	}
	s.dropSubjectLocked(sub)
}

// defaultOptions govern a recovered lease whose watch could not be compiled again (its
// statement used parameters): the option defaults.
var defaultOptions = option.Defaults(option.Consume)

// opts returns the options l was leased under.
func (l *lease) opts() *option.Set {
	if l.q != nil {
		return &l.q.Opts
	}
	return &defaultOptions
}

// LeaseOf returns the handle of a message's current lease and the principal it was
// made for ("" without one), for surfaces that settle by message id (the queue RPC). ok
// is false when the message is not leased (unknown, settled, or back in the queue).
func (s *Service) LeaseOf(subject herald.NodeID) (h Handle, holder string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.subjects[subject]
	if sub == nil || sub.lease == nil || !sub.lease.sent || sub.lease.settling {
		return Handle{}, "", false
	}
	return sub.lease.key, sub.lease.holder, true
}
