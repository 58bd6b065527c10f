package engine

import (
	"context"
	"sync"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	hid "github.com/herald-mq/herald/internal/id"
)

// Session is the state that outlives one statement: the open transaction, the session
// actor (`BEGIN SESSION AS #actor`) and variables bound by SPAWN.
type Session struct {
	id       string
	mu       sync.Mutex // serializes Exec calls on the session
	tx       *graph.Tx
	parts    []TxPart // what extensions joined to tx (settlements), applied at COMMIT
	actor    herald.NodeID
	vars     map[string]herald.NodeID
	lastUsed time.Time

	// Guarded by Engine.sessMu (layer0.go): the watches opened in the session.
	slots   int                   // watch slots taken, both modes
	watches map[herald.NodeID]int // slots per _Watch node linked
	node    bool                  // its _Session node was written
	created time.Time

	// principal is the name of the principal that opened the session ("" without
	// authentication): only it may use the session.
	principal string
}

func newSession(id string) *Session {
	return &Session{id: id, vars: map[string]herald.NodeID{}, watches: map[herald.NodeID]int{}}
}

// OpenSession creates a server-side session that keeps an open transaction, bound
// variables and the session actor across Exec calls. It returns the session id.
//
// With a principal in ctx (herald.PrincipalFrom) the session is that principal's: no
// other may use or close it (to them it does not exist, E3004), and when the principal
// has a _Principal node, that node is the session's actor (#self).
func (e *Engine) OpenSession(ctx context.Context) (string, error) {
	if e.closing.Load() {
		return "", herald.Errorf(herald.CodeShuttingDown, "the engine is closing")
	}
	id := hid.Token(16)
	s := newSession(id)
	if p := herald.PrincipalFrom(ctx); p != nil {
		s.principal = p.Name
		e.mu.RLock()
		if n := e.g.Node(herald.PrincipalNodeID(p.Name)); n != nil {
			s.actor = n.ID
		}
		e.mu.RUnlock()
	}
	s.lastUsed = e.clock.Now()
	e.sessMu.Lock()
	e.sweepSessionsLocked()
	e.sessions[id] = s
	s.created = s.lastUsed
	e.sessMu.Unlock()
	return id, nil
}

// CloseSession ends a session, rolling back its open transaction.
func (e *Engine) CloseSession(ctx context.Context, id string) error {
	e.sessMu.Lock()
	s, ok := e.sessions[id]
	if ok && !s.usableBy(herald.PrincipalFrom(ctx)) {
		ok = false
	}
	if ok {
		delete(e.sessions, id)
	}
	e.sessMu.Unlock()
	if !ok {
		return herald.Errorf(herald.CodeNoSession, "unknown or closed session %q", id)
	}
	e.sessMu.Lock()
	written := s.node
	e.sessMu.Unlock()
	if written {
		e.dropSessionNode(id)
	}
	s.mu.Lock()
	open := s.tx != nil
	s.tx = nil
	s.mu.Unlock()
	if open {
		e.notifySession(id, TxEvent{Ended: true})
	}
	return nil
}

// usableBy reports whether p may use the session: any caller when it was opened
// without a principal, else only its own.
func (s *Session) usableBy(p *herald.Principal) bool {
	return s.principal == "" || (p != nil && p.Name == s.principal)
}

// session finds a session by id for the principal ctx carries and marks it used.
func (e *Engine) session(ctx context.Context, id string) (*Session, error) {
	e.sessMu.Lock()
	defer e.sessMu.Unlock()
	e.sweepSessionsLocked()
	s, ok := e.sessions[id]
	if ok && !s.usableBy(herald.PrincipalFrom(ctx)) {
		ok = false
	}
	if !ok {
		return nil, herald.Errorf(herald.CodeNoSession, "unknown, closed or expired session %q", id)
	}
	s.lastUsed = e.clock.Now()
	return s, nil
}

// sweepSessionsLocked drops sessions idle for longer than Config.SessionIdle; their open
// transactions are discarded with them. A session that holds watches is in use.
func (e *Engine) sweepSessionsLocked() {
	now := e.clock.Now()
	for id, s := range e.sessions {
		if s.slots == 0 && now.Sub(s.lastUsed) > e.cfg.SessionIdle {
			delete(e.sessions, id)
			if s.node {
				e.dropSessionNode(id)
			}
		}
	}
}

// newNodeID returns a random node id (80 random bits) usable as `#id` in queries.
func newNodeID() herald.NodeID { return herald.NewID("n") }

// SessionActor returns the actor of a session's `BEGIN SESSION AS #actor` ("" when none);
// services use it to resolve `#self` and `current_actor()` for statements tied to a
// session, such as a consume watch opened with a session id.
func (e *Engine) SessionActor(ctx context.Context, id string) (herald.NodeID, error) {
	s, err := e.session(ctx, id)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.actor, nil
}
