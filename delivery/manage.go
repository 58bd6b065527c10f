package delivery

import (
	"context"
	"strings"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// Managing consume watches: PAUSE, RESUME, CANCEL and ALTER WATCH reach a consume watch
// through a handle its stream bound (`c = WATCH … [mode: consume]`) or its _Watch node
// id. The statement applies to the whole group the stream belongs to: a group is one
// watch with one _Watch node, however many members consume it.

// handleKey names a handle: the session that bound it and its name.
type handleKey struct{ session, name string }

// alterable are the options ALTER WATCH may change on a live consume watch: how
// failures are handled. The others decide which messages the group holds, in what
// order, or how the stream is shaped; changing them means starting another group.
var alterable = map[string]bool{"ack_timeout": true, "max_redeliveries": true, "backoff": true, "dead_letter": true}

// HasHandle reports whether a consume stream of session is bound to name.
func (s *Service) HasHandle(session, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handles[handleKey{session, name}] != nil
}

// findGroupLocked returns the group name denotes in session: a stream's handle bound
// there (or without a session), or a group's _Watch node id.
// own is true for a handle of the caller's own session.
func (s *Service) findGroupLocked(session, name string) (g *group, own bool) {
	for _, key := range []handleKey{{session, name}, {"", name}} {
		if c := s.handles[key]; c != nil && !c.closed {
			return c.grp, key.session != ""
		}
	}
	for _, g := range s.groups {
		if string(g.watch) == name {
			return g, false
		}
	}
	return nil, false
}

// ControlWatch runs PAUSE, RESUME, CANCEL or (with opts) ALTER WATCH on the consume
// watch name denotes; found is false when there is none (watch.ConsumeWatches).
func (s *Service) ControlWatch(ctx context.Context, session, name string, op token.Token, opts []*ast.OptionList) (found bool, err error) {
	s.mu.Lock()
	g, own := s.findGroupLocked(session, name)
	if g == nil {
		s.mu.Unlock()
		return false, nil
	}
	if !own {
		// As for watch mode (watch's manageCheck): beyond its own sessions' handles a
		// principal needs the admin grant.
		if err := herald.PrincipalFrom(ctx).Check(herald.ActAdmin, ""); err != nil {
			s.mu.Unlock()
			return true, err
		}
	}
	status := ""
	switch op {
	case token.PAUSE:
		g.paused, status = true, "paused"
	case token.RESUME:
		g.paused, status = false, "active"
	case token.CANCEL:
		s.cancelGroupLocked(g)
		status = "cancelled"
	case token.ALTER:
		s.mu.Unlock()
		return true, s.alterGroup(ctx, g, opts)
	}
	s.mu.Unlock()
	s.kick()
	return true, s.setWatchStatus(ctx, g.watch, status)
}

// cancelGroupLocked ends every member's stream with E8002 and forgets the group; the
// leases they held are released (the attempt is not counted).
func (s *Service) cancelGroupLocked(g *group) {
	s.endGroupLocked(g, herald.Errorf(herald.CodeWatchNotFound, "the watch was cancelled"))
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

// setWatchStatus writes the status of a _Watch node. A cancelled one stays, so that
// what its stream did remains visible; a restart clears those of groups of one.
func (s *Service) setWatchStatus(ctx context.Context, id herald.NodeID, status string) error {
	_, _, err := s.eng.System(ctx, func(tx *engine.SysTx) error {
		if n := tx.Node(id); n != nil && n.Type == typeWatch {
			tx.PutNode(&herald.Node{ID: n.ID, Type: n.Type, Attrs: n.Attrs.With("status", herald.String(status))})
		}
		return nil
	})
	return err
}

// alterGroup applies ALTER WATCH … SET to a group: the options in opts replace the
// statement's, which must still compile, and only the failure handling may change.
// Leases held keep their deadlines; every failure from now on, theirs included, is
// handled by the new options, and new leases take the new ack_timeout.
func (s *Service) alterGroup(ctx context.Context, g *group, opts []*ast.OptionList) error {
	for _, ol := range opts {
		for _, o := range ol.Options {
			if name := strings.ToLower(o.Name.Name); !alterable[name] {
				return herald.Errorf(herald.CodeInvalidQuery, "ALTER WATCH on a consume watch changes ack_timeout, max_redeliveries, backoff or dead_letter; %s decides which messages the group holds or how they reach it: start another group for that", name)
			}
		}
	}
	s.mu.Lock()
	old := g.spec
	s.mu.Unlock()
	w, file, err := engine.ParseWatch(old.effective(), old.params)
	if err != nil {
		return err
	}
	w.Options = engine.MergeOptions(w.Options, opts)
	sp, err := compileWatch(w, file, old.params, old.actor, old.session, s.clock)
	if err != nil {
		return err
	}
	altered := printer.String(w)
	sp.text, sp.ident, sp.shown, sp.handle, sp.canRead = old.text, old.ident, altered, old.handle, old.canRead
	s.mu.Lock()
	if s.groups[g.key] != g {
		s.mu.Unlock()
		return herald.Errorf(herald.CodeWatchNotFound, "the watch has ended")
	}
	g.spec = sp
	for _, l := range s.leases {
		if l.grp == g {
			l.sp = sp
		}
	}
	s.mu.Unlock()
	if err := s.saveWatch(ctx, g.watch, sp, nil); err != nil {
		return err
	}
	if g.paused {
		return s.setWatchStatus(ctx, g.watch, "paused")
	}
	return nil
}
