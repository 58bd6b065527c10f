package herald

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// Principal is who a request acts for, once authenticated: a name and the grants that
// say what it may do. A nil *Principal stands for a server without authentication,
// where everything is allowed.
type Principal struct {
	Name string
	// Grants are "action:Type", "action:*" or "admin" (everything). The actions are
	// read, write, watch, consume and settle; admin covers schema changes, tokens,
	// BEGIN SESSION AS another actor and the other server-wide statements.
	Grants []string
	// StatementTimeout and MaxRowsScanned, when positive, lower the server's statement
	// limits for this principal (never raise them).
	StatementTimeout time.Duration
	MaxRowsScanned   int
}

// Actions a grant may name.
const (
	ActRead    = "read"
	ActWrite   = "write"
	ActWatch   = "watch"
	ActConsume = "consume"
	ActSettle  = "settle"
	ActAdmin   = "admin"
)

// ValidGrant reports whether g is a grant Principal understands.
func ValidGrant(g string) bool {
	if g == ActAdmin {
		return true
	}
	action, typ, ok := strings.Cut(g, ":")
	if !ok || typ == "" {
		return false
	}
	switch action {
	case ActRead, ActWrite, ActWatch, ActConsume, ActSettle:
		return true
	}
	return false
}

// Can reports whether p may do action on nodes or edges of type typ (typ is ignored
// for admin).
func (p *Principal) Can(action, typ string) bool {
	if p == nil {
		return true
	}
	for _, g := range p.Grants {
		if g == ActAdmin {
			return true
		}
		if a, t, ok := strings.Cut(g, ":"); ok && a == action && (t == "*" || t == typ) {
			return true
		}
	}
	return false
}

// Check is Can as an error: E4013 naming what was refused.
func (p *Principal) Check(action, typ string) error {
	if p.Can(action, typ) {
		return nil
	}
	if action == ActAdmin {
		return Errorf(CodePermissionDenied, "%s may not do this: it needs the admin grant", p.Name)
	}
	return Errorf(CodePermissionDenied, "%s may not %s %s: it needs the grant %s:%s", p.Name, action, typ, action, typ)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries, or nil.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// PrincipalNodeID is the id of the _Principal node of the principal named name: a
// session it opens has that node as its actor (#self).
func PrincipalNodeID(name string) NodeID {
	sum := sha256.Sum256([]byte("principal\x00" + name))
	return NodeID("pr" + hex.EncodeToString(sum[:10]))
}

// OnBehalf returns ctx for a statement that a built-in surface (the queue contracts)
// runs on its caller's behalf, once the caller's grants for the operation have been
// checked: the caller's name and limits, with every grant. A queue's consume group and
// its dead-letter destination are the surface's, not the caller's, so the statements
// that reach them need rights the caller need not hold.
func OnBehalf(ctx context.Context) context.Context {
	p := PrincipalFrom(ctx)
	if p == nil {
		return ctx
	}
	return WithPrincipal(ctx, &Principal{Name: p.Name, Grants: []string{ActAdmin},
		StatementTimeout: p.StatementTimeout, MaxRowsScanned: p.MaxRowsScanned})
}

// Holds reports whether the principal ctx carries may settle a lease made for holder:
// its own, any lease without authentication, and any lease with admin.
func Holds(ctx context.Context, holder string) bool {
	p := PrincipalFrom(ctx)
	return p == nil || holder == "" || holder == p.Name || p.Can(ActAdmin, "")
}
