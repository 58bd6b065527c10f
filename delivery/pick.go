package delivery

import (
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
)

// A round leases in two steps. Under the service's lock and a read view of the graph it
// picks, group by group, the next ready message for each member with room; it leases
// a group's picks at once when their bodies are in memory. Otherwise it holds them back
// (picking: no other group or pull takes them meanwhile) until it has let go of both,
// read the bodies (a read from the store may wait on the disk, and neither commits nor
// settlements wait on it), and taken the lock again; then it leases each pick that is
// still as it was picked, and gives the others back.

// pick is a candidate chosen in a round: for a member of its group, or for a pull
// (c nil) by holder.
type pick struct {
	g      *group
	c      *consumer
	holder string
	cand   candidate
}

// dispatchLocked leases ready messages to members with room, round robin, and returns
// the picks held back for their bodies to be read (leaseAfterRead).
func (s *Service) dispatchLocked(tx *graph.Tx, now time.Time, w *work) (held []pick) {
	for _, g := range s.groups {
		if len(g.recheck) > 0 {
			s.recheckLocked(tx, g)
		}
		if g.paused {
			continue // PAUSE WATCH: held leases stay, nothing new goes out
		}
		scanned := 0
		picks := s.picks[:0]
		for {
			c, next := g.nextMember()
			if c == nil {
				break
			}
			cand, ok := s.nextReadyLocked(tx, g, now, &scanned)
			if !ok {
				break
			}
			g.rr = next
			c.reserved++
			picks = append(picks, pick{g: g, c: c, holder: c.principal, cand: cand})
		}
		if !needsRead(picks) {
			s.leasePickedLocked(tx, picks, now, w, false)
		} else {
			held = s.holdBackLocked(held, picks)
			clear(picks)
		}
		s.picks = picks[:0]
	}
	return held
}

// holdBackLocked appends picks to held, each marked as picking until it is leased or
// given back.
func (s *Service) holdBackLocked(held, picks []pick) []pick {
	for _, p := range picks {
		s.picking[p.cand.node.ID] = true
	}
	return append(held, picks...)
}

// needsRead reports whether a pick's message has a body that is not in memory.
func needsRead(picks []pick) bool {
	for _, p := range picks {
		if p.needsRead() {
			return true
		}
	}
	return false
}

// needsRead reports whether the pick's message has a body that is not in memory.
func (p pick) needsRead() bool {
	if b := p.cand.node.Body; b != nil {
		_, ok := b.Data()
		return !ok
	}
	return false
}

// leaseAfterRead reads the bodies of picks held back with no lock held, then leases them
// under the service's lock (held on entry and on return, released meanwhile).
func (s *Service) leaseAfterRead(picks []pick, now time.Time, w *work) error {
	s.mu.Unlock()
	held := holdBodies(picks)
	s.mu.Lock()
	err := s.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		s.leasePickedLocked(tx, picks, now, w, true)
		return nil
	})
	for _, b := range held {
		b.Release()
	}
	return err
}

// holdBodies makes the bodies of the picks' messages resident: in one pass per store
// that reads many at once (they usually lie together), else one at a time. It returns
// the bodies it made resident, for the caller to release.
func holdBodies(picks []pick) []*herald.Body {
	nodes := make([]*herald.Node, 0, len(picks))
	for _, p := range picks {
		nodes = append(nodes, p.cand.node)
	}
	held := herald.HoldBodies(nodes)
	for _, n := range nodes {
		if n.Body != nil && n.Body.Hold(n.ID) {
			held = append(held, n.Body)
		}
	}
	return held
}

// leasePickedLocked leases the picks in the order picked. With recheck the locks were
// let go since they were picked: a pick whose message has changed, been leased or gone,
// or whose group or member has gone (or, for a member, been paused) meanwhile is put
// back instead.
func (s *Service) leasePickedLocked(tx *graph.Tx, picks []pick, now time.Time, w *work, recheck bool) {
	for _, p := range picks {
		if p.c != nil {
			p.c.reserved = 0
		}
	}
	for _, p := range picks {
		if recheck {
			delete(s.picking, p.cand.node.ID)
			if !s.stillPickedLocked(tx, p) {
				s.putBackLocked(tx, p)
				continue
			}
		}
		if l := s.leaseLocked(tx, p.g, p.c, p.holder, p.cand, now); l != nil {
			w.leases = append(w.leases, l)
		}
	}
	clear(picks) // the scratch is kept for the next round, without what it pointed to
}

// stillPickedLocked reports whether pick p may still be leased as it was picked.
func (s *Service) stillPickedLocked(tx *graph.Tx, p pick) bool {
	n := p.cand.node
	if s.stopped || s.groups[p.g.key] != p.g || tx.Node(n.ID) != n || s.lettering[n.ID] {
		return false
	}
	if sub := s.subjects[n.ID]; sub != nil && sub.lease != nil {
		return false
	}
	return p.c == nil || (!p.c.closed && !p.g.paused)
}

// putBackLocked gives back a pick that was not leased: while it was held back other
// groups passed it over, so it is queued again wherever it matches, as a message whose
// lease ended is (requeueLocked); a message deleted meanwhile is left alone.
func (s *Service) putBackLocked(tx *graph.Tx, p pick) {
	n := tx.Node(p.cand.node.ID)
	if n == nil {
		return
	}
	s.requeueLocked(s.subjectLocked(n)) // lazy groups whose cursor passed it decide it again
}
