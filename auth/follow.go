package auth

import (
	"github.com/herald-mq/herald"
)

// A node that follows another's change log learns of principals and tokens made,
// changed or revoked there through Follow, as it learns of any other commit, so that a
// token issued on the leader authenticates on every node and a revocation ends the
// requests it carries everywhere.

// Follow keeps the store current with the principals and tokens in the engine's
// durable commits, whoever made them, until the returned function is called.
func (s *Store) Follow() (stop func()) {
	return s.eng.Listen(s.apply)
}

// apply takes the changes of principals and tokens in sets into the store.
func (s *Store) apply(sets []*herald.ChangeSet) {
	for _, cs := range sets {
		for _, c := range cs.Changes {
			if c.Kind != herald.NodeChange {
				continue
			}
			switch n := c.NodeAfter; {
			case n != nil && n.Type == TypePrincipal:
				s.putPrincipal(principalOf(n))
			case n != nil && n.Type == TypeToken:
				t := tokenOf(n)
				s.mu.Lock()
				s.tokens[t.hash] = t
				s.mu.Unlock()
			case n == nil && c.NodeBefore != nil && c.NodeBefore.Type == TypeToken:
				s.dropToken(tokenOf(c.NodeBefore).hash)
			case n == nil && c.NodeBefore != nil && c.NodeBefore.Type == TypePrincipal:
				name := c.NodeBefore.Attrs.Get("name").AsString()
				s.mu.Lock()
				delete(s.principals, name)
				s.endGrants(name)
				s.mu.Unlock()
			}
		}
	}
}

func principalOf(n *herald.Node) *herald.Principal {
	return &herald.Principal{
		Name:             n.Attrs.Get("name").AsString(),
		Grants:           strings1(n.Attrs.Get("grants")),
		StatementTimeout: n.Attrs.Get("statement_timeout").AsDuration(),
		MaxRowsScanned:   int(n.Attrs.Get("max_rows_scanned").AsInt()),
	}
}

func tokenOf(n *herald.Node) Token {
	return Token{ID: string(n.ID), Principal: n.Attrs.Get("principal").AsString(), Label: n.Attrs.Get("label").AsString(), hash: n.Attrs.Get("hash").AsString()}
}

// putPrincipal records p; requests authenticated with other grants end.
func (s *Store) putPrincipal(p *herald.Principal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.principals[p.Name]; old != nil && sameGrants(old, p) {
		return
	}
	s.principals[p.Name] = p
	s.endGrants(p.Name)
}

// endGrants ends what was authenticated with name's grants (s.mu held).
func (s *Store) endGrants(name string) {
	if l := s.valid[name]; l != nil {
		// Requests and streams authenticated with the old grants end: they reconnect
		// with the new ones.
		l.cancel(herald.Errorf(herald.CodeUnauthenticated, "the grants of principal %s changed; authenticate again", name))
		delete(s.valid, name)
	}
}

// dropToken refuses a token from now on and ends the requests it carries.
func (s *Store) dropToken(hash string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, hash)
	if l := s.tokenLife[hash]; l != nil {
		l.cancel(herald.Errorf(herald.CodeUnauthenticated, "the token was revoked"))
		delete(s.tokenLife, hash)
	}
}

func sameGrants(a, b *herald.Principal) bool {
	if len(a.Grants) != len(b.Grants) || a.StatementTimeout != b.StatementTimeout || a.MaxRowsScanned != b.MaxRowsScanned {
		return false
	}
	for i := range a.Grants {
		if a.Grants[i] != b.Grants[i] {
			return false
		}
	}
	return true
}
