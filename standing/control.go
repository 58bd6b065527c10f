package standing

import (
	"context"
	"strings"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// Managing watches of both modes: handles (`h = WATCH …`) and _Watch node ids name
// them, and PAUSE, RESUME, CANCEL and ALTER WATCH act on them, here once for both modes.
// A consume group is one watch, however many members consume it: a member's handle
// names the group.

// Watch is an open watch as the core manages it: a watch-mode stream or a consume
// group.
type Watch interface {
	// Node is the watch's _Watch node.
	Node() herald.NodeID
	// Query is the statement the watch runs now.
	Query() *Query
	// Owner is the principal the watch acts for (nil without authentication).
	Owner() *herald.Principal
	// Control applies PAUSE, RESUME or CANCEL and returns the status its node is to
	// show ("" when the watch records it itself as it ends).
	Control(ctx context.Context, op token.Token) (status string, err error)
	// Alter runs the watch with q from now on (ALTER WATCH) and returns the status its
	// node is to show ("" when the watch has ended meanwhile), or why it cannot.
	Alter(ctx context.Context, q *Query) (status string, err error)
	// Record is what the watch's node shows, with status.
	Record(status string) Record
}

// handleKey names a handle: the session that bound it and its name.
type handleKey struct{ session, name string }

// Register makes w known by its node's id until Unregister.
func (c *Core) Register(w Watch) {
	c.mu.Lock()
	c.watches[w.Node()] = w
	c.mu.Unlock()
}

// Unregister ends Register.
func (c *Core) Unregister(w Watch) {
	id := w.Node()
	c.mu.Lock()
	if c.watches[id] == w {
		delete(c.watches, id)
	}
	c.mu.Unlock()
}

// Bind binds handle name of session to w until Unbind. One name denotes one watch in a
// session, whichever its mode: a name bound already is refused (E1004).
func (c *Core) Bind(session, name string, w Watch) error {
	k := handleKey{session, name}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handles[k] != nil {
		return herald.Errorf(herald.CodeInvalidQuery, "the handle %s is already bound to a watch in this session; CANCEL it first", name)
	}
	c.handles[k] = w
	return nil
}

// Unbind ends Bind of name in session to w.
func (c *Core) Unbind(session, name string, w Watch) {
	k := handleKey{session, name}
	c.mu.Lock()
	if c.handles[k] == w {
		delete(c.handles, k)
	}
	c.mu.Unlock()
}

// find returns the watch name denotes: a handle bound in session (or without a
// session), or a _Watch node id; nil when there is none. own is true for a handle of
// the caller's own session.
func (c *Core) find(session, name string) (w Watch, own bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, key := range []handleKey{{session, name}, {"", name}} {
		if w := c.handles[key]; w != nil {
			return w, key.session != ""
		}
	}
	return c.watches[herald.NodeID(name)], false
}

// Handles reports the statements ExecStmt runs (engine.Extension): WATCH, which the
// query API cannot stream, and PAUSE, RESUME, CANCEL and ALTER WATCH.
func (c *Core) Handles(st ast.Stmt) bool {
	switch st.(type) {
	case *ast.WatchStmt, *ast.WatchControlStmt, *ast.AlterWatchStmt:
		return true
	}
	return false
}

// ExecStmt runs PAUSE, RESUME, CANCEL or ALTER WATCH on the watch a handle or a _Watch
// id names, in either mode (engine.Extension). A principal manages the watches of its
// own sessions by handle; any other watch needs the admin grant. WATCH itself needs a
// stream.
func (c *Core) ExecStmt(ctx context.Context, env engine.StmtEnv, st ast.Stmt) (engine.Result, error) {
	var (
		h    ast.Expr
		op   token.Token
		opts []*ast.OptionList
	)
	switch x := st.(type) {
	case *ast.WatchStmt:
		return engine.Result{}, eval.ErrorAt(env.File, herald.CodeStreamRequired, st.Pos(), "WATCH streams its events: open it with GET /v1/watch?query=… or the Consume RPC")
	case *ast.WatchControlStmt:
		h, op = x.Handle, x.Op
	case *ast.AlterWatchStmt:
		h, op, opts = x.Handle, token.ALTER, x.Options
	default:
		return engine.Result{}, herald.Errorf(herald.CodeNotImplemented, "not a watch management statement")
	}
	name := handleName(h, env)
	w, own := c.find(env.SessionID, name)
	if w == nil {
		return engine.Result{}, eval.ErrorAt(env.File, herald.CodeWatchNotFound, h.Pos(), "no watch %q: the handle is unknown, or its watch was cancelled or has ended", name)
	}
	if !own {
		if err := herald.PrincipalFrom(ctx).Check(herald.ActAdmin, ""); err != nil {
			return engine.Result{}, err
		}
	}
	if op == token.ALTER {
		return engine.Result{}, c.alter(ctx, w, opts)
	}
	status, err := w.Control(ctx, op)
	if err != nil || status == "" {
		return engine.Result{}, err
	}
	return engine.Result{}, c.Save(ctx, w.Record(status))
}

// alter applies ALTER WATCH … SET: the options in opts replace the statement's, which
// must compile again (and pass the grant check of the watch's owner); a consume watch
// may change its failure handling only.
func (c *Core) alter(ctx context.Context, w Watch, opts []*ast.OptionList) error {
	old := w.Query()
	if old.Mode == option.Consume {
		if err := alterable(opts); err != nil {
			return err
		}
	}
	next := *old.Stmt
	next.Options = option.Merge(old.Stmt.Options, opts)
	next.Handle = nil
	stmt, file, err := Parse(printer.String(&next), old.Params)
	if err != nil {
		return err
	}
	q, err := Compile(Source{Stmt: stmt, File: file, Mode: old.Mode, Params: old.Params, Actor: old.Actor,
		Session: old.Session, Clock: c.clock, CanRead: old.canRead})
	if err != nil {
		return err
	}
	// The new options may name nodes the old ones did not: the watch's principal needs
	// the grants for them too.
	if _, err := c.Authorize(herald.WithPrincipal(ctx, w.Owner()), q); err != nil {
		return err
	}
	status, err := w.Alter(ctx, q)
	if err != nil || status == "" {
		return err
	}
	return c.Save(ctx, w.Record(status))
}

// alterable refuses the options ALTER WATCH may not change on a live consume watch
// (see option.Option.Alter).
func alterable(opts []*ast.OptionList) error {
	for _, ol := range opts {
		for _, o := range ol.Options {
			name := strings.ToLower(o.Name.Name)
			if opt := option.Lookup(name); opt != nil && opt.Alter {
				continue
			}
			var may []string
			for _, opt := range option.All() {
				if opt.Alter {
					may = append(may, opt.Name)
				}
			}
			list := strings.Join(may[:len(may)-1], ", ") + " or " + may[len(may)-1]
			return herald.Errorf(herald.CodeInvalidQuery, "ALTER WATCH on a consume watch changes %s; %s decides which messages the group holds or how they reach it: start another group for that", list, name)
		}
	}
	return nil
}

// handleName resolves what PAUSE / RESUME / CANCEL / ALTER WATCH name: a handle bound
// with `h = WATCH …`, or a _Watch node id (as #id, a string or a parameter).
func handleName(h ast.Expr, env engine.StmtEnv) string {
	switch x := h.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.NodeRef:
		return x.Name
	case *ast.BasicLit:
		v, _ := eval.Literal(x)
		return v.AsString()
	case *ast.ParamRef:
		return env.Params[x.Name].AsString()
	}
	return ""
}
