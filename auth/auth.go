// Package auth keeps Herald's principals and bearer tokens and turns a request's
// credentials into a herald.Principal. Principals (_Principal: a name and its grants)
// and tokens (_Token: the principal, a label and the token's SHA-256) are system nodes
// of the graph, so they are durable, replicated with it and readable with MATCH by
// whoever holds read on those types; a token itself is shown once, when it is made.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
)

// Layer 0 types of the store.
const (
	TypePrincipal = "_Principal"
	TypeToken     = "_Token"
)

// tokenPrefix starts every token, so that one found in a log or a repository is
// recognisable.
const tokenPrefix = "hrd_"

// Store holds the principals and the hashes of their tokens in memory, loaded from the
// graph at Open and written through to it.
type Store struct {
	eng *engine.Engine

	mu         sync.RWMutex
	principals map[string]*herald.Principal // by name
	tokens     map[string]Token             // by hash
	// What a request authenticated now ends with: each token's life, until it is
	// revoked, and each principal's current grants, until they change (valid).
	tokenLife map[string]*life // by hash
	valid     map[string]*life // by principal name
}

// life is a context that ends, with a cause, when a credential stops being what a
// request was authenticated with.
type life struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newLife() *life {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &life{ctx: ctx, cancel: cancel}
}

// lifeOf returns m[key], made when missing (under s.mu held for writing).
func lifeOf(m map[string]*life, key string) *life {
	l := m[key]
	if l == nil {
		l = newLife()
		m[key] = l
	}
	return l
}

// Token describes an issued token (never the token itself).
type Token struct {
	ID        string `json:"id"`
	Principal string `json:"principal"`
	Label     string `json:"label,omitempty"`
	hash      string
}

// Open loads the principals and tokens from the engine's graph.
func Open(eng *engine.Engine) (*Store, error) {
	s := &Store{eng: eng, principals: map[string]*herald.Principal{}, tokens: map[string]Token{}, tokenLife: map[string]*life{}, valid: map[string]*life{}}
	err := eng.ViewSnapshot(func(tx *graph.Tx, _, _ uint64) error {
		for _, id := range tx.NodesOfType(TypePrincipal) {
			p := principalOf(tx.Node(id))
			s.principals[p.Name] = p
		}
		for _, id := range tx.NodesOfType(TypeToken) {
			t := tokenOf(tx.Node(id))
			s.tokens[t.hash] = t
		}
		return nil
	})
	return s, err
}

func strings1(v herald.Value) []string {
	var out []string
	for _, x := range v.AsList() {
		out = append(out, x.AsString())
	}
	return out
}

func hashOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Principal returns the principal named name, or nil.
func (s *Store) Principal(name string) *herald.Principal {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.principals[name]
}

// Authenticate returns the principal of a bearer token, or nil when it is not one of
// the store's (or its principal is gone).
func (s *Store) Authenticate(token string) *herald.Principal {
	p, _ := s.AuthenticateUntil(token)
	return p
}

// AuthenticateUntil is Authenticate, with the contexts that end when what it returned
// stops holding: when the token is revoked, and when the principal's grants change.
// Their cause is an E4014 saying which. A request ends with them, so a stream opened
// with a token ends when the token is revoked.
func (s *Store) AuthenticateUntil(token string) (*herald.Principal, []context.Context) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return nil, nil
	}
	h := hashOf(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[h]
	if !ok || subtle.ConstantTimeCompare([]byte(t.hash), []byte(h)) != 1 {
		return nil, nil
	}
	p := s.principals[t.Principal]
	if p == nil {
		return nil, nil
	}
	return p, []context.Context{lifeOf(s.tokenLife, h).ctx, lifeOf(s.valid, p.Name).ctx}
}

// PrincipalUntil is Principal, with the context that ends when the principal's grants
// change (see AuthenticateUntil): for requests a client certificate names it on.
func (s *Store) PrincipalUntil(name string) (*herald.Principal, context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.principals[name]
	if p == nil {
		return nil, nil
	}
	return p, lifeOf(s.valid, name).ctx
}

// Empty reports whether the store has no principal yet.
func (s *Store) Empty() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.principals) == 0
}

// Limits are a principal's own statement limits; zero keeps the server's.
type Limits struct {
	StatementTimeout time.Duration
	MaxRowsScanned   int
}

// SetPrincipal creates the principal name or replaces its grants and limits.
func (s *Store) SetPrincipal(ctx context.Context, name string, grants []string, lim Limits) error {
	if lim.StatementTimeout < 0 || lim.MaxRowsScanned < 0 {
		return herald.Errorf(herald.CodeMalformedRequest, "a principal's limits must not be negative")
	}
	if err := checkName(name); err != nil {
		return err
	}
	for _, g := range grants {
		if !herald.ValidGrant(g) {
			return herald.Errorf(herald.CodeMalformedRequest, "grant %q: want admin, or action:Type (or action:*) with action read, write, watch, consume or settle", g)
		}
	}
	grants = append([]string(nil), grants...)
	sort.Strings(grants)
	list := make([]herald.Value, len(grants))
	for i, g := range grants {
		list[i] = herald.String(g)
	}
	attrs := map[string]herald.Value{"name": herald.String(name), "grants": herald.List(list...)}
	if lim.StatementTimeout > 0 {
		attrs["statement_timeout"] = herald.Duration(lim.StatementTimeout)
	}
	if lim.MaxRowsScanned > 0 {
		attrs["max_rows_scanned"] = herald.Int(int64(lim.MaxRowsScanned))
	}
	_, _, err := s.eng.System(ctx, func(tx *engine.SysTx) error {
		tx.PutNode(&herald.Node{ID: herald.PrincipalNodeID(name), Type: TypePrincipal, Attrs: herald.AttrsOf(attrs)})
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.principals[name] = &herald.Principal{Name: name, Grants: grants, StatementTimeout: lim.StatementTimeout, MaxRowsScanned: lim.MaxRowsScanned}
	s.endGrants(name)
	s.mu.Unlock()
	return nil
}

// Issue makes a new token for an existing principal and returns it; only its hash is
// kept.
func (s *Store) Issue(ctx context.Context, principal, label string) (token string, t Token, err error) {
	if s.Principal(principal) == nil {
		return "", Token{}, herald.Errorf(herald.CodeNotFound, "no principal %q: create it first", principal)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", Token{}, err
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	t = Token{ID: string(herald.NewID("tk")), Principal: principal, Label: label, hash: hashOf(token)}
	_, _, err = s.eng.System(ctx, func(tx *engine.SysTx) error {
		tx.PutNode(&herald.Node{ID: herald.NodeID(t.ID), Type: TypeToken, Attrs: herald.AttrsOf(map[string]herald.Value{
			"principal": herald.String(principal), "label": herald.String(label), "hash": herald.String(t.hash),
		})})
		return nil
	})
	if err != nil {
		return "", Token{}, err
	}
	s.mu.Lock()
	s.tokens[t.hash] = t
	s.mu.Unlock()
	return token, t, nil
}

// Tokens lists the issued tokens, by principal and id.
func (s *Store) Tokens() []Token {
	s.mu.RLock()
	out := make([]Token, 0, len(s.tokens))
	for _, t := range s.tokens {
		out = append(out, t)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Principal != out[j].Principal {
			return out[i].Principal < out[j].Principal
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Revoke deletes a token: requests carrying it are refused from then on.
func (s *Store) Revoke(ctx context.Context, id string) error {
	s.mu.RLock()
	var hash string
	for h, t := range s.tokens {
		if t.ID == id {
			hash = h
		}
	}
	s.mu.RUnlock()
	if hash == "" {
		return herald.Errorf(herald.CodeNotFound, "no token %q", id)
	}
	s.dropToken(hash) // refused at once, before the commit is durable
	_, _, err := s.eng.System(ctx, func(tx *engine.SysTx) error {
		if tx.Node(herald.NodeID(id)) != nil {
			tx.DeleteNode(herald.NodeID(id))
		}
		return nil
	})
	return err
}

func checkName(name string) error {
	if name == "" || len(name) > 128 || strings.ContainsAny(name, " \t\r\n") {
		return herald.Errorf(herald.CodeMalformedRequest, "principal name %q: want 1 to 128 characters without spaces", name)
	}
	return nil
}

// String is for logs.
func (t Token) String() string { return fmt.Sprintf("%s (%s)", t.ID, t.Principal) }
