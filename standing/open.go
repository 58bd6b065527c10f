package standing

import (
	"context"
	"encoding/binary"
	"strings"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/option"
)

// Opening a standing query: the checks every open makes, in both modes, before a
// stream runs — who the session acts as, the statement compiled (or shared), what it
// touches against the principal's grants and the server's policy, and the names it
// reads.

// OpenRequest is a stream's statement and what it is opened with.
type OpenRequest struct {
	Session string
	Query   string
	Params  map[string]herald.Value
	Mode    option.Mode
	Policy  herald.WatchPolicy
}

// Opened is a statement that passed the open-time checks: its compiled query, held for
// the stream until Release (or Core.Release of its Hold), and what the stream runs with.
type Opened struct {
	Query     *Query
	Handle    string            // `h = WATCH …`: the stream's handle ("" when unbound)
	Principal *herald.Principal // who opened it (nil without authentication)
	Limits    engine.Limits     // the bounds of each evaluation of its pattern
	// Warning, when set, is the first event of the stream: a type nobody has declared
	// or used yet (see herald.EventWarning).
	Warning *herald.Error

	core *Core
	key  string
	once bool
}

// Release gives the query back; identical opens share it while one holds it. It is
// idempotent.
func (o *Opened) Release() {
	if o == nil || o.once {
		return
	}
	o.once = true
	o.core.release(o.key)
}

// Hold returns the open's hold on its query, for a holder that keeps it apart from the
// Opened and gives it back with Core.Release; the Opened is not to be released then.
func (o *Opened) Hold() string { return o.key }

// Open runs the open-time checks of req for the principal ctx carries: the session's
// actor (E3004 for an unknown session), the statement compiled for its mode (shared
// with identical opens), its grants (E8001, or E4013 for what a trigger writes), the
// policy (E8001), #self without an actor (consume mode), and the names it reads (an
// unknown attribute is an error, an unknown type a warning).
func (c *Core) Open(ctx context.Context, req OpenRequest) (*Opened, error) {
	p := herald.PrincipalFrom(ctx)
	var actor herald.NodeID
	if req.Session != "" {
		var err error
		if actor, err = c.eng.SessionActor(ctx, req.Session); err != nil {
			return nil, err
		}
	}
	o := &Opened{core: c, Principal: p, Limits: c.eng.LimitsFor(p)}
	q, key, err := c.acquire(openKey(req, actor, p), func() (*Query, error) {
		w, file, err := Parse(req.Query, req.Params)
		if err != nil {
			return nil, err
		}
		return Compile(Source{Stmt: w, File: file, Mode: req.Mode, Params: req.Params, Actor: actor, Session: req.Session,
			Clock: c.clock, CanRead: Reads(p, req.Mode, req.Policy)})
	})
	if err != nil {
		return nil, err
	}
	o.Query, o.key = q, key
	if err := c.check(ctx, o, req.Policy); err != nil {
		o.Release()
		return nil, err
	}
	if q.Stmt.Handle != nil {
		o.Handle = q.Stmt.Handle.Name
	}
	return o, nil
}

// check makes the checks of an open that depend on the graph and the principal.
func (c *Core) check(ctx context.Context, o *Opened, policy herald.WatchPolicy) error {
	q := o.Query
	acc, err := c.Authorize(ctx, q)
	if err != nil {
		return err
	}
	if q.Mode == option.Consume && q.selfRef && q.Actor == "" {
		return herald.Errorf(herald.CodeSession, "#self needs a session bound to an actor (BEGIN SESSION AS #actor); open the stream in that session")
	}
	if err := policy.Check(q.Mode.String(), q.typ, acc.Types()); err != nil {
		return err
	}
	var bad *herald.Error
	_ = c.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		o.Warning, bad = engine.CheckNames(q.Stmt, tx, q.File, true)
		return nil
	})
	if bad != nil {
		return bad
	}
	return nil
}

// Authorize decides what q touches — its engine.Access — and checks it against the
// principal ctx carries: a refusal is E8001 for the pattern and the nodes it names,
// E4013 for what its ON MATCH DO writes. The Access is returned for the watch policy
// (Access.Types).
func (c *Core) Authorize(ctx context.Context, q *Query) (engine.Access, error) {
	var acc engine.Access
	_ = c.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		acc = engine.AccessOf(q.Stmt, engine.AccessEnv{Graph: tx, Params: q.Params, Actor: q.Actor})
		return nil
	})
	return acc, acc.Check(herald.PrincipalFrom(ctx), q.File)
}

// Reads returns the eval.Context.CanRead of a standing query of mode m opened by p
// under policy: each type an evaluation meets — a node named by id that has since
// changed type, a node an untyped endpoint binds — must be one p may watch (or consume)
// and the policy does not deny (E8001). It returns nil when neither restricts anything.
func Reads(p *herald.Principal, m option.Mode, policy herald.WatchPolicy) func(typ string) error {
	if p == nil && len(policy.DenyTypes) == 0 {
		return nil
	}
	action := herald.ActWatch
	if m == option.Consume {
		action = herald.ActConsume
	}
	return func(typ string) error {
		if err := policy.Check(action, "", []string{typ}); err != nil {
			return err
		}
		if !p.Can(action, typ) {
			return herald.Errorf(herald.CodeWatchPatternDenied, "%s may not %s %s: the watch met a node of that type and needs the grant %s:%s", p.Name, action, typ, action, typ)
		}
		return nil
	}
}

// openKey identifies a compilation: the text as written, the mode, the actor, the
// session, the principal (whose grants bound what an evaluation may read), the policy
// and the parameters.
func openKey(req OpenRequest, actor herald.NodeID, p *herald.Principal) string {
	b := []byte(req.Query)
	b = append(b, 0, byte(req.Mode))
	b = append(b, actor...)
	b = append(b, 0)
	b = append(b, req.Session...)
	b = AppendPrincipal(b, p)
	b = append(b, 0)
	b = append(b, strings.Join(req.Policy.DenyTypes, "\x00")...)
	b, _ = AppendParams(b, req.Params)
	return string(b)
}

// AppendPrincipal appends who a watch acts for: what an evaluation may read is decided
// by the principal's grants, so they are part of what identical watches share.
func AppendPrincipal(b []byte, p *herald.Principal) []byte {
	if p == nil {
		return b
	}
	b = append(b, 1)
	b = append(b, p.Name...)
	for _, g := range p.Grants {
		b = append(b, 0)
		b = append(b, g...)
	}
	return b
}

// AppendParams appends the parameters, in the order of their names, and returns how
// many there are.
func AppendParams(b []byte, params map[string]herald.Value) ([]byte, int) {
	names := sortedNames(params)
	for _, n := range names {
		b = append(b, 0)
		b = append(b, n...)
		b = params[n].AppendBinary(b)
	}
	return b, len(names)
}

// ShareKey identifies what identical watch-mode streams may share of their evaluation:
// the statement, its parameters, its actor and the principal whose grants bound what
// it may read ("" for a query that shows its session's uncommitted changes, which
// evaluates alone).
func (q *Query) ShareKey(p *herald.Principal) string {
	if q.Opts.Immediate {
		return ""
	}
	b := []byte(q.Text)
	b = append(b, 0)
	b = append(b, q.Actor...)
	b = AppendPrincipal(b, p)
	b, n := AppendParams(b, q.Params)
	return string(binary.AppendUvarint(b, uint64(n)))
}
