package delivery

import (
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/standing"
)

// group is the consumers sharing one ready queue: a named group, or one consumer.
//
// A lazy group (Query.Lazy: the subject alone, in arrival order, without fairness) reads
// its backlog from the type's arrival index as it delivers: every node up to cursor has
// been decided, nodes after it are read in order when members have room, and ready holds
// only what came back behind the cursor (NACKs, expired leases, nodes that changed to
// match). It starts in constant time however long the backlog, and holds nothing for a
// message it has not reached. Any other group queues every match when it starts and
// keeps that queue up to date as commits change the graph.
type group struct {
	svc *Service
	key string
	q   *standing.Query // the statement it runs (ALTER WATCH replaces it)
	// opened holds the query the group was made with, shared with identical opens (nil
	// once given back); ident and text are that statement's, which members agree on.
	opened    *standing.Opened
	ident     string
	text      string
	typ       string        // the subject's type
	seedRow   eval.Row      // projections of plain matches bind the subject here (under the service's lock)
	watch     herald.NodeID // its _Watch node
	members   []*consumer
	rr        int
	lazy      bool
	cursor    graph.Pos       // lazy: every node of the type up to here has been decided
	recheck   []herald.NodeID // lazy: subjects behind the cursor to decide again
	ready     *readyQueue
	delayed   *delayQueue
	matches   map[herald.NodeID]*entry
	failing   map[herald.NodeID]bool // nodes whose evaluation failed, logged once
	idleSince time.Time              // named groups: without members since (zero: has some)
	paused    bool                   // PAUSE WATCH: nothing new is leased until RESUME
	cancelled bool                   // CANCEL WATCH: its _Watch node stays, cancelled
	stats     *standing.Stats        // deliveries, for its _Watch node
	// owner is the principal that made the group (nil without authentication): only it,
	// or a principal with admin, may join or manage it. limits bound each evaluation of
	// its pattern (the owner's statement limits).
	owner  *herald.Principal
	limits engine.Limits
	// tally is the group's totals, and series the group label of its metrics: its name,
	// or one of the series that sum groups (see metrics.go). Under the service's lock.
	tally  tally
	series string
}

func newGroup(s *Service, key string, op *standing.Opened, watch herald.NodeID) *group {
	q := op.Query
	_, typ := q.Subject()
	g := &group{svc: s, key: key, q: q, opened: op, ident: q.Ident, text: q.Describe(), typ: typ, seedRow: make(eval.Row, 1),
		watch: watch, lazy: q.Lazy(), matches: map[herald.NodeID]*entry{}, delayed: newDelayQueue(), owner: op.Principal, limits: op.Limits}
	g.ready = newReadyQueue(g.less)
	return g
}

// joinable refuses principal p a group another principal owns, unless p has admin.
func (g *group) joinable(p *herald.Principal) error {
	if g.owner == nil || p == nil || p.Name == g.owner.Name || p.Can(herald.ActAdmin, "") {
		return nil
	}
	return herald.Errorf(herald.CodePermissionDenied, "%s may not join consume group %q: it belongs to %s (a group is its creator's; choose a group name of your own)", p.Name, g.q.Opts.Group, g.owner.Name)
}

// scanLimit bounds how many nodes a lazy group's cursor passes in one round, so that a
// WHERE that few nodes match does not hold the graph's read lock for long.
const scanLimit = 4096

// nextMember returns the next member in turn with room for another delivery, and the
// turn after it. The turn moves on (took) only when a message is given to that member:
// a member whose turn found nothing ready keeps it, so messages that arrive one at a
// time go round the members instead of all to the one after an empty turn.
func (g *group) nextMember() (c *consumer, next int) {
	for i := 0; i < len(g.members); i++ {
		c := g.members[(g.rr+i)%len(g.members)]
		if !c.closed && len(c.leases)-c.ending+c.reserved < c.capacity {
			return c, (g.rr + i + 1) % len(g.members)
		}
	}
	return nil, g.rr
}

// candidate is a message a group may lease now.
type candidate struct {
	node *herald.Node
	info *standing.Info
	row  eval.Row
}

// nextReadyLocked returns the group's next deliverable message, or false. For a lazy
// group it advances the cursor past what it decides on the way; scanned counts the nodes
// passed this round.
func (s *Service) nextReadyLocked(tx *graph.Tx, g *group, now time.Time, scanned *int) (candidate, bool) {
	for g.ready.len() > 0 {
		e := g.ready.pop()
		n := tx.Node(e.subj.id)
		if n == nil || e.subj.lease != nil || s.picking[n.ID] {
			continue // leased, or picked in a round that reads its body: requeued if not leased
		}
		info, row := s.evalLocked(tx, g, n)
		if info == nil {
			s.dropEntryLocked(g, n.ID)
			continue
		}
		if g.lazy {
			s.dropEntryLocked(g, n.ID) // it is behind the cursor: nothing keeps it but the lease
		}
		return candidate{n, info, row}, true
	}
	if !g.lazy {
		return candidate{}, false
	}
	var found candidate
	ok := false
	tx.Graph().AscendType(g.typ, g.cursor, func(n *herald.Node) bool {
		if *scanned >= scanLimit {
			s.kick() // more next round
			return false
		}
		*scanned++
		g.cursor = graph.PosOf(n)
		sub := s.subjects[n.ID]
		if (sub != nil && sub.lease != nil) || s.picking[n.ID] {
			return true // leased or picked elsewhere: it comes back through requeue
		}
		info, row := s.evalLocked(tx, g, n)
		if info == nil {
			return true
		}
		if until := s.holdUntil(sub, info); until.After(now) {
			e := s.setEntryLocked(g, n, info) // waits in the delay queue
			_ = e
			return true
		}
		found, ok = candidate{n, info, row}, true
		return false
	})
	return found, ok
}

// holdUntil returns when a subject may be delivered: after its NACK delay or backoff and
// its available_at.
func (s *Service) holdUntil(sub *subject, info *standing.Info) time.Time {
	var until time.Time
	if sub != nil {
		until = sub.notBefore
	}
	if info.AvailableAt.After(until) {
		until = info.AvailableAt
	}
	return until
}

// recheckLocked decides again the subjects a lazy group's cursor has passed that may be
// deliverable now (their lease ended, or they changed).
func (s *Service) recheckLocked(tx *graph.Tx, g *group) {
	ids := g.recheck
	g.recheck = nil
	for _, id := range ids {
		n := tx.Node(id)
		if n == nil || g.cursor.Less(graph.PosOf(n)) {
			continue // gone, or ahead of the cursor, which will reach it
		}
		s.decideBehindLocked(tx, g, n)
	}
}

// decideBehindLocked puts node n, which a lazy group's cursor has passed, into the
// group's queues when it matches and is not leased, or takes it out when it does not.
func (s *Service) decideBehindLocked(tx *graph.Tx, g *group, n *herald.Node) {
	if sub := s.subjects[n.ID]; sub != nil && sub.lease != nil && g.matches[n.ID] == nil {
		return // its release rechecks it (requeueLocked)
	}
	// A leased subject the group already holds an entry for is decided too: its release
	// queues that entry again as it is, so a change meanwhile (an earlier available_at,
	// say) must be in it; setEntryLocked queues nothing while the lease lasts.
	info, _ := s.evalLocked(tx, g, n)
	if info == nil {
		s.dropEntryLocked(g, n.ID)
		return
	}
	s.setEntryLocked(g, n, info)
}

// setEntryLocked records that g matches n with info, queueing it when it is deliverable.
func (s *Service) setEntryLocked(g *group, n *herald.Node, info *standing.Info) *entry {
	sub := s.subjectLocked(n)
	e := g.matches[n.ID]
	if e == nil {
		e = &entry{subj: sub, grp: g, info: info, index: -1}
		g.matches[n.ID] = e
		if sub.entries == nil {
			sub.entries = map[*group]*entry{} // most subjects never queue (a lazy group's cursor passes them)
		}
		sub.entries[g] = e
		s.queueLocked(e)
		return e
	}
	if e.where == inReady && e.info.FairKey == info.FairKey && !info.AvailableAt.After(s.clock.Now()) {
		e.info = info
		g.ready.fix(e)
		return e
	}
	s.unqueueLocked(e)
	e.info = info
	s.queueLocked(e)
	return e
}

// dropEntryLocked forgets that g matches subject id.
func (s *Service) dropEntryLocked(g *group, id herald.NodeID) {
	e := g.matches[id]
	if e == nil {
		return
	}
	s.unqueueLocked(e)
	delete(g.matches, id)
	delete(e.subj.entries, g)
	s.forgetLocked(e.subj)
}

// queueLocked puts e where it belongs: ready, delayed, or nowhere (leased or skipped).
func (s *Service) queueLocked(e *entry) {
	if e.where != inNone || e.skip || e.subj.lease != nil {
		return
	}
	until := s.holdUntil(e.subj, e.info)
	if until.After(s.clock.Now()) {
		e.until = until
		e.grp.delayed.push(e)
		return
	}
	e.grp.ready.push(e)
}

func (s *Service) unqueueLocked(e *entry) {
	switch e.where {
	case inReady:
		e.grp.ready.remove(e)
	case inDelayed:
		e.grp.delayed.remove(e)
	}
}
