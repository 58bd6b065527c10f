package delivery

import (
	"context"
	"slices"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	hid "github.com/herald-mq/herald/internal/id"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/standing"
)

// The dispatcher: one goroutine owned by the Service that follows commits, expires
// leases, releases delayed messages and hands ready messages to consumers.

func (s *Service) loop() {
	defer close(s.done)
	t := s.clock.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := s.runOnce()
		t.Stop()
		if !next.IsZero() {
			d := next.Sub(s.clock.Now())
			if d < 0 {
				d = 0
			}
			t.Reset(d)
		}
		select {
		case <-s.stop:
			s.persistOnStop()
			return
		case <-s.wake:
		case <-t.C():
		case reply := <-s.flush:
			s.runOnce() // one more round for what the last one committed itself
			// Answer once the completer has done everything queued so far.
			s.marker(func() { close(reply) })
		}
	}
}

// persistOnStop writes what the last rounds left pending — leases given back by
// consumers that left, delivery records to clean up — so that a restart does not wait
// for released leases' old deadlines. Nothing new is leased, and the _Watch nodes of
// groups of one that end with the stop are kept: the leases that stay durable across
// the restart take their options from them.
func (s *Service) persistOnStop() {
	s.mu.Lock()
	w := &work{}
	s.pendingLocked(w)
	now := s.clock.Now()
	s.mu.Unlock()
	if w.empty() {
		return
	}
	if _, _, err := s.eng.System(context.Background(), func(tx *engine.SysTx) error {
		s.write(tx, w, now)
		return nil
	}); err != nil {
		s.log.Warn("consume: writing the state left at stop failed; released leases wait for their deadlines", "err", err)
	}
}

// pendingLocked moves into w what consumers that left and deleted subjects left to
// write: the state of released leases and the records to remove.
func (s *Service) pendingLocked(w *work) {
	for _, l := range s.released {
		if sub := l.subj; sub.lease == nil && !sub.gone {
			w.states = append(w.states, stateLocked(sub, nil))
		}
	}
	s.released = nil
	for id, d := range s.cleanup {
		w.drops = append(w.drops, d)
		delete(s.cleanup, id)
	}
}

// work is what one dispatcher round writes in one system transaction.
type work struct {
	leases  []*lease        // new leases, for their consumed events
	states  []deliveryState // records to write, in order: released and expired first, new leases last
	letters []letter
	drops   []recordDrop
	retired []herald.NodeID
}

type letter struct {
	kept     bool // its commit left the subject where it was (its body could not be read)
	drop     recordDrop
	watch    herald.NodeID
	dest     herald.NodeID
	reason   string
	attempts int
	match    herald.Value
	grp      *group // the group it was leased by, if known
}

func (w *work) empty() bool {
	return len(w.leases) == 0 && len(w.states) == 0 && len(w.letters) == 0 && len(w.drops) == 0 && len(w.retired) == 0
}

// Flush runs dispatcher rounds until the work queued before the call is done: commits
// evaluated, leases expired, ready messages handed out. Tests use it to step the
// dispatcher deterministically.
func (s *Service) Flush() {
	reply := make(chan struct{})
	select {
	case s.flush <- reply:
		<-reply
	case <-s.done:
	}
}

// runOnce does one round and returns when the next timed work is due (zero: none).
func (s *Service) runOnce() time.Time {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return time.Time{}
	}
	var now time.Time
	var picks []pick
	w := &work{}
	err := s.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		s.catchUpLocked(tx)
		// The round's time is read after the commits are decided (which reads the clock
		// too), so that every decision of the round sees one time.
		now = s.clock.Now()
		s.expireLocked(now, w)
		s.pendingLocked(w)
		w.retired, s.retired = s.retired, nil
		for _, g := range s.groups {
			if !g.idleSince.IsZero() && !g.idleSince.Add(s.cfg.GroupIdle).After(now) {
				s.dropGroupLocked(g)
				continue
			}
			for _, e := range g.delayed.due(now) {
				s.queueLocked(e)
			}
		}
		picks = s.dispatchLocked(tx, now, w)
		return nil
	})
	if err == nil && len(picks) > 0 {
		err = s.leaseAfterRead(picks, now, w)
	}
	if err != nil {
		s.log.Error("consume: a dispatcher round failed", "err", err)
	}
	// New leases go last: a subject released or expired and leased again in the same
	// round must end up with its new lease.
	w.states = slices.Grow(w.states, len(w.leases))
	for _, l := range w.leases {
		w.states = append(w.states, stateLocked(l.subj, l))
	}
	s.mu.Unlock()

	if !w.empty() {
		// The consumed events go out once the leases are durable; meanwhile the next
		// round can run.
		err := s.commitAsync(func(tx *engine.SysTx) { s.write(tx, w, now) },
			func(seq, tick uint64, err error) { s.sent(w, seq, tick, err) })
		if err != nil {
			s.log.Error("consume: writing delivery state failed", "err", err)
			s.unleaseRound(w)
		}
	}
	return s.nextWake()
}

// unleaseRound gives back the new leases of a round whose commit failed: their events
// never go out, so nobody holds them, and their attempts do not count.
func (s *Service) unleaseRound(w *work) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, lt := range w.letters {
		s.unletterLocked(lt.drop.subject)
	}
	for _, l := range w.leases {
		if s.leases[l.key] != l {
			continue
		}
		s.removeLeaseLocked(l)
		l.subj.attempts = l.spent()
		s.requeueLocked(l.subj)
	}
	s.kick()
}

// unletterLocked gives a subject whose dead letter did not commit back to the groups:
// the next round decides it again.
func (s *Service) unletterLocked(id herald.NodeID) {
	if s.lettering[id] {
		delete(s.lettering, id)
		s.redecide = append(s.redecide, id)
	}
}

// sent sends a round's consumed events once its commit is durable.
func (s *Service) sent(w *work, seq, tick uint64, err error) {
	if err != nil {
		s.log.Error("consume: writing delivery state failed", "err", err)
		s.unleaseRound(w)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, lt := range w.letters {
		if lt.kept {
			s.unletterLocked(lt.drop.subject)
			s.kick()
		}
	}
	s.count.delivered.Add(uint64(len(w.leases)))
	s.count.deadLettered.Add(uint64(len(w.letters)))
	s.tallyLeasesLocked(w.leases)
	for _, lt := range w.letters {
		if !lt.kept {
			s.letteredLocked(lt.grp, lt.drop.subject, lt.reason)
		}
	}
	for _, l := range w.leases {
		if s.leases[l.key] == l && l.cons != nil {
			l.sent = l.cons.send(Event{Type: EventConsumed, Match: l.match, DeliveryID: l.id, Attempt: l.attempt, Releases: l.releases, Seq: seq, Tick: tick, Deadline: l.deadline})
		}
	}
}

func (s *Service) nextWake() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	earlier := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if l := s.deadlines.Min(); l != nil {
		earlier(l.deadline)
	}
	for _, g := range s.groups {
		if t, ok := g.delayed.next(); ok {
			earlier(t)
		}
		if !g.idleSince.IsZero() {
			earlier(g.idleSince.Add(s.cfg.GroupIdle))
		}
	}
	return next
}

// write applies a round's work in a system transaction. It reads only what runOnce
// copied under the lock.
func (s *Service) write(tx *engine.SysTx, w *work, now time.Time) {
	tx.GrowAux(len(w.drops) + len(w.states))
	for i, lt := range w.letters {
		if _, failed, err := s.deadLetter(tx, lt.drop, lt.watch, lt.dest, lt.reason, lt.attempts, lt.match, now); err != nil {
			w.letters[i].kept = true
			s.log.Error("consume: a message past its redeliveries stays where it is: its body cannot be read", "node", lt.drop.subject, "err", err)
		} else if failed != nil {
			s.log.Warn("consume: dead letter recorded without its destination", "err", failed)
		}
	}
	for _, d := range w.drops {
		d.apply(tx)
	}
	for _, id := range w.retired {
		standing.RetireIn(tx.Tx, id)
	}
	for _, st := range w.states {
		if tx.Node(st.subject) != nil {
			st.put(tx)
		}
	}
}

// expireLocked turns expired leases into implicit NACKs and tells their holders.
func (s *Service) expireLocked(now time.Time, w *work) {
	for s.deadlines.Len() > 0 && !s.deadlines.Min().deadline.After(now) {
		l := s.deadlines.Pop()
		if l.settling {
			continue // its ACK/NACK started in time; it re-arms the deadline if it fails
		}
		if c := l.cons; c != nil {
			err := herald.Errorf(herald.CodeAckTimeout, "delivery %q was not settled before its deadline; it will be redelivered", l.id)
			c.send(Event{Type: EventTimeout, DeliveryID: l.id, Attempt: l.attempt, Error: err, Code: err.Code, Message: err.Message})
		}
		s.removeLeaseLocked(l)
		s.settledLocked(l, w)
		s.count.expired.Add(1)
	}
}

// settledLocked decides what follows a failed attempt (a timeout): redeliver — after the
// watch's backoff — or dead-letter past max_redeliveries.
func (s *Service) settledLocked(l *lease, w *work) {
	sub := l.subj
	spent := l.spent()
	sub.attempts = spent
	sp := l.opts()
	max, dest, bo := sp.MaxRedeliveries, sp.DeadLetter, sp.Backoff
	if spent >= 1+max {
		w.letters = append(w.letters, letter{drop: dropLocked(sub), watch: l.watch, dest: herald.NodeID(dest), reason: ReasonMaxRedeliveries, attempts: spent, match: l.match, grp: s.groupOfLocked(l)})
		s.dropSubjectLocked(sub)
		s.lettering[sub.id] = true
		return
	}
	if !l.sent {
		bo = option.Backoff{}
	}
	if d := bo.Delay(spent); d > 0 {
		sub.notBefore = s.clock.Now().Add(d)
	}
	w.states = append(w.states, stateLocked(sub, nil))
	s.requeueLocked(sub)
}

// dropSubjectLocked removes a subject from every group (it is being deleted).
func (s *Service) dropSubjectLocked(sub *subject) {
	for g := range sub.entries {
		s.dropEntryLocked(g, sub.id)
	}
	if sub.lease != nil {
		s.removeLeaseLocked(sub.lease)
	}
	sub.stored = false
	delete(s.subjects, sub.id)
}

// leaseLocked leases a candidate to c (nil for a pull lease) for principal holder: a new
// delivery id, the match projected now, the deadline from the watch's ack_timeout.
func (s *Service) leaseLocked(tx *graph.Tx, g *group, c *consumer, holder string, cand candidate, now time.Time) *lease {
	match, err := g.q.ProjectMatch(tx, cand.node, cand.row, g.seedRow)
	if err != nil {
		s.failingLocked(g, cand.node.ID, err)
		return nil
	}
	sub := s.subjectLocked(cand.node)
	id := hid.Delivery()
	l := &lease{
		key:      HandleOf(id),
		id:       id,
		subj:     sub,
		cons:     c,
		watch:    g.watch,
		grp:      g,
		deadline: now.Add(g.q.Opts.AckTimeout),
		q:        g.q,
		attempt:  sub.attempts + 1,
		releases: sub.releases,
		index:    -1,
		match:    match,
		holder:   holder,
	}
	sub.lease = l
	sub.notBefore = time.Time{}
	l.stats = g.stats
	l.stats.Delivered(1, now)
	l.stats.AddPending(1)
	s.leases[l.key] = l
	if c != nil {
		c.leases[l.key] = l
	}
	s.pushDeadlineLocked(l)
	for _, other := range sub.entries {
		s.unqueueLocked(other) // a leased message is invisible to every other watch
	}
	return l
}

// catchUpLocked applies the commits applied to the graph since the last call. tx must
// be a view taken after them (onCommit runs before a commit's view exists).
func (s *Service) catchUpLocked(tx *graph.Tx) {
	s.pendMu.Lock()
	sets := s.pending
	s.pending = nil
	s.pendMu.Unlock()
	for _, cs := range sets {
		s.arrivals.note(cs.Seq, cs.Time)
	}
	if len(s.redecide) > 0 {
		// Subjects whose dead letter did not commit: decided as if they had changed.
		var changes []herald.Change
		for _, id := range s.redecide {
			if n := tx.Node(id); n != nil {
				changes = append(changes, herald.Change{Kind: herald.NodeChange, NodeAfter: n})
			}
		}
		s.redecide = nil
		sets = append(sets, &herald.ChangeSet{Changes: changes})
	}
	if len(sets) > 0 {
		s.applyChangesLocked(tx, sets)
	}
}

// applyChangesLocked re-evaluates what the commits in sets touched, on the graph as it
// is now (tx).
func (s *Service) applyChangesLocked(tx *graph.Tx, sets []*herald.ChangeSet) {
	full := map[*group]bool{}
	for _, cs := range sets {
		for i := range cs.Changes {
			ch := &cs.Changes[i]
			switch ch.Kind {
			case herald.NodeChange:
				s.nodeChangedLocked(tx, ch, full)
			case herald.EdgeChange:
				s.index.Touch(*ch, func(g *group) {
					if !g.q.Alone() {
						full[g] = true
					}
				})
			}
		}
	}
	for g := range full {
		s.rematchLocked(tx, g)
	}
}

// nodeChangedLocked follows one node change: a deleted subject is forgotten; the groups
// of its type decide it again (a lazy group only when its cursor has passed it: a new
// node is always ahead); join groups over its type are marked in full to run again.
func (s *Service) nodeChangedLocked(tx *graph.Tx, ch *herald.Change, full map[*group]bool) {
	id := standing.NodeOf(*ch).ID
	now := tx.Node(id)
	if now == nil {
		delete(s.lettering, id) // its dead letter, if any, has applied
		if sub := s.subjects[id]; sub != nil {
			if sub.lease != nil && sub.lease.settling {
				// Its ACK deleted it, or it was killed while a NACK or EXTEND of it was
				// committing: the settlement finishes the bookkeeping.
				sub.gone = true
			} else {
				if sub.stored {
					s.cleanup[id] = dropLocked(sub)
				}
				s.dropSubjectLocked(sub)
			}
		}
	}
	s.index.Touch(*ch, func(g *group) {
		switch {
		case !g.q.Alone():
			full[g] = true // a join over the type: run again in full
		case now == nil || now.Type != g.typ:
			s.dropEntryLocked(g, id)
		case g.lazy:
			if !g.cursor.Less(graph.PosOf(now)) {
				s.decideBehindLocked(tx, g, now)
			}
		default:
			if info, _ := s.evalLocked(tx, g, now); info == nil {
				s.dropEntryLocked(g, id)
			} else {
				s.setEntryLocked(g, now, info)
			}
		}
	})
}

// rematchLocked re-runs a join pattern and applies the difference. A run stopped by
// its limits ends the group: a standing query that cannot be evaluated within them
// cannot be served faithfully, and its members hear why.
func (s *Service) rematchLocked(tx *graph.Tx, g *group) {
	now := map[herald.NodeID]bool{}
	err := s.runLocked(tx, g, nil, func(n *herald.Node, info *standing.Info) {
		now[n.ID] = true
		s.setEntryLocked(g, n, info)
	})
	if err != nil {
		s.log.Warn("consume: a watch's pattern could not be evaluated within its limits; its group ends", "watch", g.watch, "err", err)
		s.endGroupLocked(g, herald.AsError(err))
		return
	}
	for id := range g.matches {
		if !now[id] {
			s.dropEntryLocked(g, id)
		}
	}
}

// runLocked runs g's whole pattern and calls found once per subject it matches. A
// binding whose conditions or ordering, fairness and scheduling expressions fail to
// evaluate is left out and logged (once per subject while it keeps failing); it never
// holds up the other messages. The run stops with E4012 past the group's limits, and
// with E4011 once gone (nil: never) reports its client gone.
func (s *Service) runLocked(tx *graph.Tx, g *group, gone func() bool, found func(*herald.Node, *standing.Info)) error {
	return g.q.Each(tx, s.eng.Interrupt(g.limits, gone),
		func(id herald.NodeID) bool { return s.lettering[id] },
		func(n *herald.Node, info *standing.Info) {
			delete(g.failing, n.ID)
			found(n, info)
		},
		func(id herald.NodeID, err error) { s.failingLocked(g, id, err) })
}

// failingLocked logs, once per node while it keeps failing, that a node cannot be
// evaluated against g's watch ("" when the failure came before the subject was bound).
func (s *Service) failingLocked(g *group, id herald.NodeID, err error) {
	if g.failing == nil {
		g.failing = map[herald.NodeID]bool{}
	}
	if g.failing[id] {
		return
	}
	g.failing[id] = true
	s.log.Warn("consume: a node cannot be evaluated against its watch and is not delivered", "node", id, "watch", g.watch, "err", err)
}

// evalLocked decides whether g matches node n (nil: it does not), with the binding row.
// A node whose evaluation fails (say, a division by zero in WHERE) does not match: it is
// logged once and decided again when it changes; it never holds up the other messages.
func (s *Service) evalLocked(tx *graph.Tx, g *group, n *herald.Node) (*standing.Info, eval.Row) {
	if s.lettering[n.ID] {
		return nil, nil // its dead letter is committing
	}
	var intr func() error
	if !g.q.Alone() {
		intr = s.eng.Interrupt(g.limits, nil) // a join around n: bounded like any evaluation
	}
	info, row, err := g.q.Match(tx, n, intr)
	if err == nil {
		if n != nil && g.failing != nil {
			delete(g.failing, n.ID)
		}
		return info, row
	}
	s.failingLocked(g, n.ID, err)
	return nil, nil
}
