package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// Exec parses and runs query in the session named by sessionID ("" runs it in a
// throwaway session; a transaction left open at its end is rolled back and reported).
// Every parameter in params must be used by the query and every used one supplied.
//
// Statements outside an explicit transaction commit one by one. When a statement fails,
// Exec stops there and returns the error; statements before it keep their effect, and an
// open explicit transaction is rolled back.
func (e *Engine) Exec(ctx context.Context, sessionID, query string, params map[string]herald.Value) (*Response, error) {
	if e.closing.Load() {
		return nil, herald.Errorf(herald.CodeShuttingDown, "the engine is closing")
	}
	script, file, err := Parse(query)
	if err != nil {
		return nil, err
	}
	return e.run(ctx, sessionID, script, file, params)
}

// run executes a parsed script for Exec and ExecPrepared.
func (e *Engine) run(ctx context.Context, sessionID string, script *ast.Script, file *token.File, params map[string]herald.Value) (*Response, error) {
	e.inflight.Add(1)
	defer e.inflight.Done()
	if e.closing.Load() {
		return nil, herald.Errorf(herald.CodeShuttingDown, "the engine is closing")
	}
	if err := checkParams(script, params); err != nil {
		return nil, err
	}
	var err error
	var sess *Session
	if sessionID == "" {
		sess = newSession("")
	} else if sess, err = e.session(ctx, sessionID); err != nil {
		return nil, err
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()

	resp := &Response{Results: make([]Result, 0, len(script.Stmts))}
	// Commits of this call are acknowledged together: each statement's commit is applied
	// in memory and queued at once, and the answer waits until all of them are durable.
	var commits []*pending
	var pos position
	waitCommits := func() error {
		for _, p := range commits {
			if err := p.wait(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	for _, st := range script.Stmts {
		x := &execution{ctx: ctx, e: e, sess: sess, file: file, params: params, commits: &commits, pos: &pos, principal: herald.PrincipalFrom(ctx)}
		x.limit(st)
		inTx := sess.tx != nil
		res, err := x.stmt(ctx, st)
		if sessionID != "" {
			e.reportTx(sess, inTx, st, err, &pos)
		}
		if err != nil {
			if werr := waitCommits(); werr != nil {
				return nil, werr
			}
			if sess.tx != nil {
				sess.tx, sess.parts = nil, nil
				if he, ok := err.(*herald.Error); ok && he.Code != herald.CodeTxState {
					c := *he
					c.Message += " (the open transaction was rolled back)"
					err = &c
				}
			}
			return nil, err
		}
		resp.Results = append(resp.Results, res)
	}
	if sessionID == "" && sess.tx != nil {
		return nil, herald.Errorf(herald.CodeTxState, "the transaction was not committed before the request ended and was rolled back; use COMMIT, or a session to span requests")
	}
	if err := waitCommits(); err != nil {
		return nil, err
	}
	if !pos.set {
		// Nothing was read or written: report the current position.
		resp.Seq, resp.Tick = e.Position()
		return resp, nil
	}
	// The answer may show only durable data: wait for the newest position it read (its
	// own commits are durable already; others' may still be syncing).
	resp.Seq, resp.Tick = pos.seq, pos.tick
	if err := e.pipe.waitDurable(ctx, resp.Seq); err != nil {
		return nil, err
	}
	return resp, nil
}

// position is the newest (seq, tick) one Exec call read or wrote.
type position struct {
	seq, tick uint64
	set       bool
}

func (p *position) observe(seq, tick uint64) {
	if !p.set || seq > p.seq {
		p.seq, p.tick = seq, tick
	}
	p.set = true
}

// Parse parses query text into a script, turning syntax errors into a coded error that
// carries the first error's line and column (and lists the others in the message).
func Parse(query string) (*ast.Script, *token.File, error) {
	if strings.TrimSpace(stripComments(query)) == "" {
		return nil, nil, herald.Errorf(herald.CodeEmptyQuery, "the query holds no statement")
	}
	script, file, err := parser.ParseScript(query)
	if err != nil {
		var list parser.ErrorList
		if errors.As(err, &list) && len(list) > 0 {
			msgs := make([]string, len(list))
			for i, e := range list {
				msgs[i] = e.Error()
			}
			code := herald.CodeSyntax
			if strings.Contains(list[0].Msg, "nesting") {
				code = herald.CodeNestingTooDeep
			}
			msg := list[0].Msg
			if len(list) > 1 {
				msg += fmt.Sprintf(" (and %d more: %s)", len(list)-1, strings.Join(msgs[1:], "; "))
			}
			return nil, nil, (&herald.Error{Code: code, Message: msg, Err: err}).At(list[0].Pos.Line, list[0].Pos.Column)
		}
		return nil, nil, &herald.Error{Code: herald.CodeSyntax, Message: err.Error(), Err: err}
	}
	if len(script.Stmts) == 0 {
		return nil, nil, herald.Errorf(herald.CodeEmptyQuery, "the query holds no statement")
	}
	return script, file, nil
}

func stripComments(q string) string {
	var b strings.Builder
	for _, line := range strings.Split(q, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(strings.TrimSpace(strings.ReplaceAll(line, ";", "")))
	}
	return b.String()
}

func checkParams(script *ast.Script, params map[string]herald.Value) error {
	return CheckParams(script, params)
}

// CheckParams reports a parameter the statements use but params lacks (E4004), or one
// params supplies but the statements do not use (E4003).
func CheckParams(n ast.Node, params map[string]herald.Value) error {
	used := map[string]bool{}
	var missing []string
	{
		for _, name := range ast.Params(n) {
			if !used[name] {
				used[name] = true
				if _, ok := params[name]; !ok {
					missing = append(missing, "$"+name)
				}
			}
		}
	}
	var unknown []string
	for name := range params {
		if !used[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		return herald.Errorf(herald.CodeUnknownParameter, "parameter(s) %s supplied but not used by the query", strings.Join(unknown, ", "))
	}
	if len(missing) > 0 {
		return herald.Errorf(herald.CodeMissingParameter, "the query uses %s but no value was supplied", strings.Join(missing, ", "))
	}
	return nil
}

// execution runs the statements of one Exec call.
type execution struct {
	ctx    context.Context // the caller's: a statement stops when it is done
	e      *Engine
	sess   *Session
	file   *token.File
	params map[string]herald.Value
	tx     *graph.Tx // the transaction the current statement writes to
	stats  Stats
	// commits collects the queued commits of the whole Exec call.
	commits *[]*pending
	// pos is the newest position the call read or wrote.
	pos *position
	// The statement's limits (see limit): checked every few thousand bindings scanned.
	limits   *interrupter
	limitPos token.Pos
	// principal is who the call acts for (nil: a server without authentication);
	// readAct is the grant its reads need (ActRead; a WATCH's trigger reads with the
	// watch's action).
	principal *herald.Principal
	readAct   string
	// redriven counts the letters `MATCH d: _DeadLetter … REDRIVE d` put back.
	redriven int
}

// limit starts the limits of statement st (LimitsFor the call's principal), and its
// client going away stops it.
func (x *execution) limit(st ast.Stmt) {
	x.limitPos = st.Pos()
	var gone func() bool
	if ctx := x.ctx; ctx != nil {
		gone = func() bool { return ctx.Err() != nil }
	}
	x.limits = x.e.newInterrupter(x.e.LimitsFor(x.principal), gone)
}

func (x *execution) queued(p *pending) {
	if p != nil {
		*x.commits = append(*x.commits, p)
	}
}

func (x *execution) errAt(code herald.Code, pos token.Pos, format string, args ...any) *herald.Error {
	return eval.ErrorAt(x.file, code, pos, format, args...)
}

// interrupted is asked every graph.InterruptEvery bindings a statement scans: E4011 once
// the caller has gone away, E4012 once the statement has run past its time or scanned
// past its limit (positioned at the statement).
func (x *execution) interrupted() error {
	if x.limits == nil {
		return nil
	}
	err := x.limits.check()
	if he, ok := err.(*herald.Error); ok && he.Code == herald.CodeStatementLimit {
		return x.errAt(he.Code, x.limitPos, "%s", he.Message)
	}
	return err
}

func (x *execution) evalCtx() *eval.Context {
	ctx := &eval.Context{Params: x.params, Now: x.e.clock.Now().UTC(), Actor: x.sess.actor, Session: x.sess.id, Interrupt: x.interrupted}
	if x.tx != nil {
		ctx.Node = x.tx.Node
	}
	if p := x.principal; p != nil {
		// The grant check before the statement ran decided from its syntax; this is the
		// same rule applied to what the run actually meets (a node named by id that
		// changed type since, an endpoint the schema did not constrain), and a refusal
		// fails the statement before anything of it commits.
		act := x.readAct
		if act == "" {
			act = herald.ActRead
		}
		ctx.CanRead = func(typ string) error {
			if err := p.Check(act, typ); err != nil {
				return x.errAt(herald.CodePermissionDenied, x.limitPos, "%s", err.(*herald.Error).Message)
			}
			return nil
		}
	}
	return ctx
}

func (x *execution) stmt(ctx context.Context, st ast.Stmt) (Result, error) {
	if err := x.authorize(st); err != nil {
		return Result{}, err
	}
	return x.stmtRun(ctx, st)
}

// authorize refuses a statement whose Access the principal's grants do not cover,
// before any of it runs. The nodes it names by id are looked up in the session's open
// transaction, or else in the current graph.
func (x *execution) authorize(st ast.Stmt) error {
	if x.principal == nil {
		return nil
	}
	env := AccessEnv{Params: x.params, Vars: x.sess.vars, Actor: x.sess.actor}
	if x.sess.tx != nil {
		env.Graph = x.sess.tx
		return AccessOf(st, env).Check(x.principal, x.file)
	}
	var acc Access
	_ = x.e.View(func(tx *graph.Tx, _, _ uint64) error {
		env.Graph = tx
		acc = AccessOf(st, env)
		return nil
	})
	return acc.Check(x.principal, x.file)
}

func (x *execution) stmtRun(ctx context.Context, st ast.Stmt) (Result, error) {
	e, sess := x.e, x.sess
	switch s := st.(type) {
	case *ast.BeginStmt:
		if sess.tx != nil {
			return Result{}, x.errAt(herald.CodeTxState, s.Pos(), "BEGIN inside an open transaction")
		}
		// The transaction reads a snapshot taken now (snapshot isolation) and holds no
		// lock between or during its statements; COMMIT checks what it wrote against
		// the graph as it is then.
		g, _, _ := e.snapshot()
		sess.tx, sess.parts = g.Begin(), nil
		return Result{}, nil
	case *ast.CommitStmt:
		if sess.tx == nil {
			return Result{}, x.errAt(herald.CodeTxState, s.Pos(), "COMMIT without an open transaction")
		}
		tx, parts := sess.tx, sess.parts
		sess.tx, sess.parts = nil, nil
		return x.commit(ctx, tx, parts)
	case *ast.RollbackStmt:
		if sess.tx == nil {
			return Result{}, x.errAt(herald.CodeTxState, s.Pos(), "ROLLBACK without an open transaction")
		}
		sess.tx, sess.parts = nil, nil
		return Result{}, nil
	case *ast.BeginSessionStmt:
		if sess.actor != "" {
			return Result{}, x.errAt(herald.CodeSession, s.Pos(), "a session is already active (as #%s); END SESSION first", sess.actor)
		}
		id, err := x.nodeIDOf(s.Actor, nil, nil)
		if err != nil {
			return Result{}, err
		}
		sess.actor = id
		return Result{}, nil
	case *ast.EndSessionStmt:
		if sess.actor == "" {
			return Result{}, x.errAt(herald.CodeSession, s.Pos(), "END SESSION without an active session")
		}
		sess.actor = ""
		return Result{}, nil
	case *ast.TickStmt:
		return x.tick(ctx, s)
	case *ast.WatchStmt, *ast.AckStmt, *ast.NackStmt, *ast.ExtendStmt, *ast.WatchControlStmt, *ast.AlterWatchStmt, *ast.RedriveStmt:
		ext := e.extension(st)
		if ext == nil {
			return Result{}, x.errAt(herald.CodeNotImplemented, st.Pos(), "%s parses, but this server does not execute it yet", stmtName(st))
		}
		env := StmtEnv{SessionID: sess.id, Actor: sess.actor, Params: x.params, File: x.file, InTx: sess.tx != nil, Observe: x.pos.observe}
		if env.InTx {
			env.Enlist = func(p TxPart) { sess.parts = append(sess.parts, p) }
		}
		return ext.ExecStmt(ctx, env, st)
	case *ast.BadStmt:
		return Result{}, x.errAt(herald.CodeSyntax, s.Pos(), "invalid statement")
	}

	switch {
	case sess.tx != nil:
		return x.runRead(st, sess.tx)
	case !ast.IsMutation(st):
		return x.runRead(st, nil)
	}
	res, p, err := x.runWrite(st)
	if err != nil {
		return Result{}, err
	}
	x.queued(p)
	return res, nil
}

// runRead runs st against tx, the session's open transaction over the snapshot its
// BEGIN took, or outside a transaction against a fresh snapshot. It holds no lock, so a
// long read never holds up a commit.
func (x *execution) runRead(st ast.Stmt, tx *graph.Tx) (Result, error) {
	g, seq, tick := x.e.snapshot()
	x.pos.observe(seq, tick)
	if tx == nil {
		tx = g.Begin()
	}
	x.tx = tx
	return x.run(st)
}

// runWrite runs st as its own transaction with the graph locked for writing, and
// applies and queues its commit.
func (x *execution) runWrite(st ast.Stmt) (Result, *pending, error) {
	if err := x.e.spaceOK(); err != nil {
		return Result{}, nil, err
	}
	x.e.mu.Lock()
	defer x.e.mu.Unlock()
	x.tx = x.e.g.Begin()
	res, err := x.run(st)
	if err != nil {
		return Result{}, nil, err
	}
	p, err := x.e.commitLocked(x.tx, 0, x.sess.actor)
	x.pos.observe(x.e.seq, x.e.tick)
	return res, p, err
}

func (x *execution) tick(ctx context.Context, s *ast.TickStmt) (Result, error) {
	if x.sess.tx != nil {
		return Result{}, x.errAt(herald.CodeTxState, s.Pos(), "TICK cannot run inside a transaction")
	}
	n := uint64(1)
	if s.Count != nil {
		v, err := x.constant(s.Count)
		if err != nil {
			return Result{}, err
		}
		if v.Kind() != herald.KindInt || v.AsInt() < 1 {
			return Result{}, x.errAt(herald.CodeTypeMismatch, s.Count.Pos(), "TICK needs a positive Int, got %s", v)
		}
		n = uint64(v.AsInt())
	}
	p, seq, tick, err := x.e.queueTick(n)
	x.pos.observe(seq, tick)
	x.queued(p)
	return Result{}, err
}

// constant evaluates an expression that may use parameters but no variables.
func (x *execution) constant(ex ast.Expr) (herald.Value, error) {
	c := &eval.Compiler{Scope: eval.NewScope(), File: x.file}
	f, err := c.Compile(ex)
	if err != nil {
		return herald.Null, err
	}
	return f(x.evalCtx(), nil)
}

func stmtName(st ast.Stmt) string {
	switch s := st.(type) {
	case *ast.WatchStmt:
		return "WATCH"
	case *ast.AckStmt:
		return "ACK"
	case *ast.RedriveStmt:
		return "REDRIVE"
	case *ast.NackStmt:
		return "NACK"
	case *ast.ExtendStmt:
		return "EXTEND"
	case *ast.WatchControlStmt:
		return s.Op.String() + " WATCH"
	case *ast.AlterWatchStmt:
		return "ALTER WATCH"
	}
	return fmt.Sprintf("%T", st)
}

// run executes a data statement against x.tx.
func (x *execution) run(st ast.Stmt) (Result, error) {
	if _, bad := checkNames(st, x.tx, x.sess.vars, x.file, false); bad != nil {
		return Result{}, bad
	}
	switch s := st.(type) {
	case *ast.NodeDeclStmt:
		return x.declareNode(s)
	case *ast.EdgeDeclStmt:
		return x.declareEdge(s)
	case *ast.ConstraintDeclStmt:
		return x.declareConstraint(s)
	case *ast.DropConstraintStmt:
		return x.dropConstraint(s)
	case *ast.MatchStmt:
		return x.match(s)
	}
	// A standalone mutation sees the session's variables.
	plan, err := graph.Compile(&ast.Pattern{}, nil, x.outer(), x.file)
	if err != nil {
		return Result{}, err
	}
	var row eval.Row
	if _, err := plan.Run(x.tx, x.evalCtx(), func(r eval.Row) error { row = append(eval.Row(nil), r...); return nil }); err != nil {
		return Result{}, err
	}
	if row, err = x.action(st, plan.Scope, row, false); err != nil {
		return Result{}, err
	}
	res := Result{Stats: x.stats}
	if ret := returningOf(st); ret != nil {
		return x.project(res, ret, plan.Scope, []eval.Row{row})
	}
	return res, nil
}

// outer returns the session variables that still name live nodes.
func (x *execution) outer() map[string]*herald.Node {
	out := make(map[string]*herald.Node, len(x.sess.vars))
	for name, id := range x.sess.vars {
		if n := x.tx.Node(id); n != nil {
			out[name] = n
		}
	}
	return out
}

func returningOf(st ast.Stmt) *ast.ReturnClause {
	switch s := st.(type) {
	case *ast.SpawnStmt:
		return s.Returning
	case *ast.KillStmt:
		return s.Returning
	case *ast.LinkStmt:
		return s.Returning
	case *ast.UnlinkStmt:
		return s.Returning
	case *ast.SetStmt:
		return s.Returning
	}
	return nil
}

func (x *execution) match(s *ast.MatchStmt) (Result, error) {
	if typ, ok := countOnly(s); ok {
		// `MATCH v: T RETURN COUNT(v)`: the type index keeps its size.
		col := printer.String(s.Return.Items[0].X)
		if a := s.Return.Items[0].Alias; a != nil {
			col = a.Name
		}
		n := x.tx.CountOfType(typ)
		return Result{Columns: []string{col}, Rows: [][]herald.Value{{herald.Int(int64(n))}}, Stats: Stats{Plan: "count " + typ}}, nil
	}
	plan, err := graph.Compile(s.Pattern, s.Where, x.outer(), x.file)
	if err != nil {
		return Result{}, err
	}
	ctx := x.evalCtx()
	if len(s.Actions) == 0 {
		proj, err := graph.CompileProjection(s.Return, s.OrderBy, s.Limit, s.Offset, plan.Scope, x.file)
		if err != nil {
			return Result{}, err
		}
		col := proj.NewCollector()
		scanned, err := plan.Run(x.tx, ctx, func(r eval.Row) error { return col.Add(ctx, r) })
		if err != nil {
			return Result{}, err
		}
		rows, err := col.Rows(ctx)
		if err != nil {
			return Result{}, err
		}
		if rows == nil {
			rows = [][]herald.Value{}
		}
		return Result{Columns: proj.Columns, Rows: rows, Stats: Stats{RowsScanned: scanned, Plan: plan.Describe()}}, nil
	}
	// Compound: find every match first, then apply the actions to each.
	var rows []eval.Row
	scanned, err := plan.Run(x.tx, ctx, func(r eval.Row) error {
		rows = append(rows, append(eval.Row(nil), r...))
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	for i := range rows {
		for _, act := range s.Actions {
			if rows[i], err = x.action(act, plan.Scope, rows[i], true); err != nil {
				return Result{}, err
			}
		}
	}
	x.stats.RowsScanned, x.stats.Plan = scanned, plan.Describe()
	res := Result{Stats: x.stats}
	if s.Return != nil {
		return x.project(res, s.Return, plan.Scope, rows)
	}
	if redrives(s) {
		// A bulk redrive answers how many letters it put back.
		res.Columns, res.Rows = []string{"redriven"}, [][]herald.Value{{herald.Int(int64(x.redriven))}}
	}
	return res, nil
}

// redrives reports whether one of s's actions is REDRIVE.
func redrives(s *ast.MatchStmt) bool {
	for _, a := range s.Actions {
		if _, ok := a.(*ast.RedriveStmt); ok {
			return true
		}
	}
	return false
}

// countOnly reports whether s is `MATCH v: T RETURN COUNT(v)` (or COUNT(*)), and T.
func countOnly(s *ast.MatchStmt) (string, bool) {
	if s.Where != nil || len(s.Actions) > 0 || s.Return == nil || s.Return.Distinct || len(s.Return.Items) != 1 ||
		len(s.OrderBy) > 0 || s.Limit != nil || s.Offset != nil || len(s.Pattern.Elems) != 1 {
		return "", false
	}
	np, ok := s.Pattern.Elems[0].(*ast.NodePattern)
	if !ok {
		return "", false
	}
	call, ok := s.Return.Items[0].X.(*ast.CallExpr)
	if !ok || !strings.EqualFold(call.Fun.Name, "COUNT") || call.Distinct || call.Where != nil {
		return "", false
	}
	if !call.Star {
		if len(call.Args) != 1 {
			return "", false
		}
		if id, ok := call.Args[0].(*ast.Ident); !ok || id.Name != np.Var.Name {
			return "", false
		}
	}
	return np.Type.Name, true
}

func (x *execution) project(res Result, ret *ast.ReturnClause, scope *eval.Scope, rows []eval.Row) (Result, error) {
	proj, err := graph.CompileProjection(ret, nil, nil, nil, scope, x.file)
	if err != nil {
		return Result{}, err
	}
	ctx := x.evalCtx()
	col := proj.NewCollector()
	for _, r := range rows {
		if err := col.Add(ctx, r); err != nil {
			return Result{}, err
		}
	}
	out, err := col.Rows(ctx)
	if err != nil {
		return Result{}, err
	}
	res.Columns, res.Rows = proj.Columns, out
	if res.Rows == nil {
		res.Rows = [][]herald.Value{}
	}
	return res, nil
}

// commit commits an explicit transaction with the parts extensions joined to it: each is
// prepared first (any failure fails the whole COMMIT, nothing applied), written into the
// transaction under the writer lock, and told the outcome once it is known. Without
// parts the answer waits for durability with the request's other commits; with parts
// COMMIT waits here, since the parts must learn it.
func (x *execution) commit(ctx context.Context, tx *graph.Tx, parts []TxPart) (Result, error) {
	e, sess := x.e, x.sess
	if tx.Dirty() || len(parts) > 0 {
		if err := e.spaceOK(); err != nil {
			return Result{}, err // the transaction is rolled back, its leases as they were
		}
	}
	for i, p := range parts {
		if err := p.Prepare(); err != nil {
			for _, q := range parts[:i] {
				q.Done(err)
			}
			return Result{}, err
		}
	}
	e.mu.Lock()
	tx.Rebase(e.g)
	sys := &SysTx{Tx: tx}
	for _, p := range parts {
		p.Apply(sys)
	}
	// A session watching its own transaction hears of the commit before the commit
	// can reach anyone as durable.
	var announce func(uint64)
	if sess.id != "" && e.hasSessionListeners(sess.id) {
		announce = func(seq uint64) { e.notifySession(sess.id, TxEvent{Ended: true, Committed: true, Seq: seq}) }
	}
	p, err := e.commitLockedAnnounce(tx, sys.aux, 0, sess.actor, announce)
	x.pos.observe(e.seq, e.tick)
	e.mu.Unlock()
	if err == nil && len(parts) > 0 {
		err = p.wait(context.WithoutCancel(ctx))
	}
	for _, part := range parts {
		part.Done(err)
	}
	if err != nil {
		return Result{}, err
	}
	x.queued(p)
	return Result{}, nil
}
