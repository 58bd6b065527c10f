package delivery

import (
	"context"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/token"
	"github.com/herald-mq/herald/standing"
)

// Managing consume watches: a group is a standing.Watch, which the engine's
// standing.Core names by a member stream's handle (`c = WATCH … [mode: consume]`) or
// by its _Watch id, and on which it runs PAUSE, RESUME, CANCEL and ALTER WATCH. A
// statement applies to the whole group: a group is one watch with one _Watch node,
// however many members consume it.

var _ standing.Watch = (*group)(nil)

// Node is the group's _Watch node (standing.Watch).
func (g *group) Node() herald.NodeID { return g.watch }

// Query is the statement the group runs now (standing.Watch).
func (g *group) Query() *standing.Query {
	g.svc.mu.Lock()
	defer g.svc.mu.Unlock()
	return g.q
}

// Owner is the principal that made the group (standing.Watch).
func (g *group) Owner() *herald.Principal { return g.owner }

// Record is what the group's _Watch node shows (standing.Watch); its counters are the
// core's flusher's.
func (g *group) Record(status string) standing.Record {
	return standing.Record{ID: g.watch, Query: g.Query(), Status: status}
}

// Control pauses, resumes or cancels the group (standing.Watch). PAUSE keeps the
// leases held (they may be settled) and leases nothing new until RESUME; CANCEL ends
// every member's stream with E8002 and releases their leases (the attempt is not
// counted).
func (g *group) Control(_ context.Context, op token.Token) (string, error) {
	s := g.svc
	s.mu.Lock()
	if s.groups[g.key] != g {
		s.mu.Unlock()
		return "", herald.Errorf(herald.CodeWatchNotFound, "the watch has ended")
	}
	status := ""
	switch op {
	case token.PAUSE:
		g.paused, status = true, "paused"
	case token.RESUME:
		g.paused, status = false, "active"
	case token.CANCEL:
		s.endGroupLocked(g, herald.Errorf(herald.CodeWatchNotFound, "the watch was cancelled"))
		status = "cancelled"
	}
	s.mu.Unlock()
	s.kick()
	return status, nil
}

// endGroupLocked ends every member's stream with cause and forgets the group, its
// _Watch node kept as cancelled; the leases they held are released.
func (s *Service) endGroupLocked(g *group, cause *herald.Error) {
	for _, c := range append([]*consumer(nil), g.members...) {
		s.endConsumerLocked(c, cause, true)
	}
	if s.groups[g.key] == g {
		g.cancelled = true
		s.dropGroupLocked(g)
	}
}

// Alter runs the group with q from now on (standing.Watch): only the failure handling
// may change (the core refuses the other options). Leases held keep their deadlines;
// every failure from now on, theirs included, is handled by the new options, and new
// leases take the new ack_timeout.
func (g *group) Alter(_ context.Context, q *standing.Query) (string, error) {
	s := g.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups[g.key] != g {
		return "", herald.Errorf(herald.CodeWatchNotFound, "the watch has ended")
	}
	g.q = q
	g.opened.Release() // the altered statement is the group's own
	for _, l := range s.leases {
		if l.grp == g {
			l.q = q
		}
	}
	if g.paused {
		return "paused", nil
	}
	return "active", nil
}
