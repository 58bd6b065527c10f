package engine

import (
	"context"
	"sync"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/token"
)

// This file is the engine's interface to the services built on it (consume mode, watch
// mode): durable-commit notifications, read views, system transactions, and the
// statements the engine hands over to them.

// Listener receives change sets once they are durable, in seq order, on the pipeline's
// goroutine. It must return quickly and never block: queue the work and return.
type Listener func(sets []*herald.ChangeSet)

type listeners struct {
	mu   sync.Mutex
	next int
	fns  map[int]Listener
}

// Listen registers fn for every durable commit from now on. The returned function
// unregisters it.
func (e *Engine) Listen(fn Listener) (cancel func()) { return e.pipe.listeners.add(fn) }

// ListenApplied registers fn for every commit from now on as soon as it is applied to
// the graph, before it is durable, in seq order, with the engine's writer lock held:
// fn must only queue the work. A service that reacts to commits this way must not let
// anything depend on a commit reach a client before the commit is durable; what it
// commits itself in reaction is durable only after the commit it reacted to (the
// pipeline keeps seq order). The returned function unregisters fn.
func (e *Engine) ListenApplied(fn Listener) (cancel func()) { return e.appliedListeners.add(fn) }

// add registers fn; the returned function unregisters it.
func (l *listeners) add(fn Listener) (cancel func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fns == nil {
		l.fns = map[int]Listener{}
	}
	id := l.next
	l.next++
	l.fns[id] = fn
	return func() {
		l.mu.Lock()
		delete(l.fns, id)
		l.mu.Unlock()
	}
}

func (l *listeners) notify(sets []*herald.ChangeSet) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, fn := range l.fns {
		fn(sets)
	}
}

// View runs fn with a read view of the committed graph and its position. Change sets
// with a larger seq reach listeners afterwards; those up to seq may be delivered to
// listeners too (they may still be syncing), and must be recognized by their seq.
func (e *Engine) View(fn func(tx *graph.Tx, seq, tick uint64) error) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return fn(e.g.Begin(), e.seq, e.tick)
}

// ViewSnapshot is View on a snapshot of the committed graph, with no lock held while fn
// runs: for reads that may be long (a watch's initial result over a join), which must
// not hold up commits. The same promise about later change sets holds.
func (e *Engine) ViewSnapshot(fn func(tx *graph.Tx, seq, tick uint64) error) error {
	g, seq, tick := e.snapshot()
	return fn(g.Begin(), seq, tick)
}

// System runs fn as one transaction with system privileges (it may write `_` types and
// auxiliary records), commits it and waits until it is durable. fn returning an error
// aborts it. It returns the commit's seq and tick, or the current position when fn
// changed nothing in the graph.
func (e *Engine) System(ctx context.Context, fn func(tx *SysTx) error) (seq, tick uint64, err error) {
	seq, tick, durable, err := e.SystemAsync(fn)
	if err != nil {
		return 0, 0, err
	}
	return seq, tick, durable(ctx)
}

// SystemAsync is System without the wait: the transaction is committed (applied to the
// graph and handed to the pipeline) when it returns, and durable reports when it is
// durable (nil) or failed. Services use it to commit their next batch while the last
// one syncs; nothing that depends on the commit may be told before durable returns nil.
func (e *Engine) SystemAsync(fn func(tx *SysTx) error) (seq, tick uint64, durable func(context.Context) error, err error) {
	if e.closing.Load() {
		return 0, 0, nil, herald.Errorf(herald.CodeShuttingDown, "the engine is closing")
	}
	p, seq, tick, err := e.system(fn)
	if err != nil {
		return 0, 0, nil, err
	}
	return seq, tick, p.wait, nil
}

func (e *Engine) system(fn func(tx *SysTx) error) (*pending, uint64, uint64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tx := &SysTx{Tx: e.g.Begin()}
	if err := fn(tx); err != nil {
		return nil, 0, 0, err
	}
	p, err := e.commitLockedAnnounce(tx.Tx, tx.aux, 0, "", nil)
	return p, e.seq, e.tick, err
}

// WaitDurable blocks until the commit at seq is durable.
func (e *Engine) WaitDurable(ctx context.Context, seq uint64) error {
	return e.pipe.waitDurable(ctx, seq)
}

// Durable returns the newest durable position (seq, tick). Every change set up to it has
// already been handed to the listeners.
func (e *Engine) Durable() (seq, tick uint64) { return e.pipe.durablePosition() }

// Clock returns the engine's clock.
func (e *Engine) Clock() herald.Clock { return e.clock }

// TxPart is an extension's share of an explicit transaction, such as an ACK inside
// BEGIN … COMMIT. At COMMIT, before the writer lock is taken, every part is prepared
// (it claims what it needs, or fails the whole commit); under the lock each writes its
// effect into the transaction; after the commit each learns how it ended.
type TxPart interface {
	// Prepare claims what the part needs. An error fails the COMMIT: nothing of the
	// transaction is applied, and the parts prepared before it are told (Done).
	Prepare() error
	// Apply writes the part's effect into the committing transaction. It runs under
	// the engine's writer lock and must not wait for anything.
	Apply(tx *SysTx)
	// Done reports the outcome to a prepared part: nil once the commit is durable,
	// otherwise why the commit failed (nothing of it was applied, or its sync failed).
	Done(err error)
}

// StmtEnv is what a statement handed to an Extension runs with.
type StmtEnv struct {
	SessionID string
	Actor     herald.NodeID // the session actor, "" outside BEGIN SESSION
	Params    map[string]herald.Value
	File      *token.File // resolves positions for errors
	InTx      bool        // an explicit transaction is open in the session
	// Enlist joins part to the open transaction (set only when InTx): COMMIT prepares
	// it, writes it with the transaction's own changes in one commit, and reports the
	// outcome; ROLLBACK, or an error that ends the transaction, drops it unprepared.
	Enlist func(part TxPart)
	// Observe reports the position (seq, tick) the statement read or wrote; the answer
	// carries the newest one observed.
	Observe func(seq, tick uint64)
}

// Extension executes the statements the engine does not: the WATCH family (WATCH, ACK,
// NACK, EXTEND, PAUSE/RESUME/CANCEL/ALTER WATCH, REDRIVE). Without one they answer
// NOT_IMPLEMENTED.
type Extension interface {
	// Handles reports whether the extension executes st.
	Handles(st ast.Stmt) bool
	ExecStmt(ctx context.Context, env StmtEnv, st ast.Stmt) (Result, error)
}

// AddExtension installs x; a statement goes to the first extension that handles it. A
// service installs its extension when it starts and removes it (with the returned
// function) when it stops, so a stopped service handles no statement.
func (e *Engine) AddExtension(x Extension) (remove func()) {
	e.extMu.Lock()
	e.exts = append(e.exts, x)
	e.extMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.extMu.Lock()
			defer e.extMu.Unlock()
			for i, y := range e.exts {
				if y == x {
					e.exts = append(e.exts[:i:i], e.exts[i+1:]...)
					return
				}
			}
		})
	}
}

func (e *Engine) extension(st ast.Stmt) Extension {
	e.extMu.Lock()
	defer e.extMu.Unlock()
	for _, x := range e.exts {
		if x.Handles(st) {
			return x
		}
	}
	return nil
}

// letterRedriver is the installed extension that redrives dead letters, or nil.
func (e *Engine) letterRedriver() LetterRedriver {
	e.extMu.Lock()
	defer e.extMu.Unlock()
	for _, x := range e.exts {
		if r, ok := x.(LetterRedriver); ok {
			return r
		}
	}
	return nil
}

// RunActions executes mutation statements (SET, KILL, LINK, UNLINK, SPAWN) as one
// transaction of their own, with row bound in scope (the variables of a match), and
// waits until it is durable. Watch-mode triggers (`ON MATCH DO`) use it. The actions
// follow the same rules as a compound MATCH: user types only, schema checks, and a node
// already gone is skipped. They act for the principal ctx carries (the watch's): each
// write needs its write grant and each node they read by id the watch grant on its type,
// as the watch was checked for when it opened, so a grant revoked since or a node that
// changed type since refuses the trigger, and nothing of it commits.
func (e *Engine) RunActions(ctx context.Context, actions []ast.Stmt, scope *eval.Scope, row eval.Row, file *token.File, actor herald.NodeID) (uint64, error) {
	if e.closing.Load() {
		return 0, herald.Errorf(herald.CodeShuttingDown, "the engine is closing")
	}
	sess := newSession("")
	sess.actor = actor
	var commits []*pending
	var pos position
	x := &execution{e: e, sess: sess, file: file, commits: &commits, pos: &pos, principal: herald.PrincipalFrom(ctx), readAct: herald.ActWatch}
	p, seq, err := func() (*pending, uint64, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		x.tx = e.g.Begin()
		r := append(eval.Row(nil), row...)
		for _, st := range actions {
			var err error
			if r, err = x.action(st, scope, r, true); err != nil {
				return nil, 0, err
			}
		}
		p, err := e.commitLocked(x.tx, 0, actor)
		return p, e.seq, err
	}()
	if err != nil {
		return 0, err
	}
	return seq, p.wait(ctx)
}

// TxEvent tells a session's listeners about its explicit transaction: its net changes
// so far (Changes, after each statement inside BEGIN … COMMIT), or its end (Ended, with
// Committed and the commit's Seq). Watches with `visibility: immediate` use it.
type TxEvent struct {
	Changes   []herald.Change
	Ended     bool
	Committed bool
	Seq       uint64
}

type sessionListeners struct {
	mu   sync.Mutex
	next int
	fns  map[string]map[int]func(TxEvent)
}

// ListenSession registers fn for the transaction events of one session. fn runs on the
// goroutine of the session's request and must not block.
func (e *Engine) ListenSession(sessionID string, fn func(TxEvent)) (cancel func()) {
	l := &e.sessListeners
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fns == nil {
		l.fns = map[string]map[int]func(TxEvent){}
	}
	if l.fns[sessionID] == nil {
		l.fns[sessionID] = map[int]func(TxEvent){}
	}
	id := l.next
	l.next++
	l.fns[sessionID][id] = fn
	return func() {
		l.mu.Lock()
		delete(l.fns[sessionID], id)
		if len(l.fns[sessionID]) == 0 {
			delete(l.fns, sessionID)
		}
		l.mu.Unlock()
	}
}

func (e *Engine) notifySession(sessionID string, ev TxEvent) {
	l := &e.sessListeners
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, fn := range l.fns[sessionID] {
		fn(ev)
	}
}

func (e *Engine) hasSessionListeners(sessionID string) bool {
	l := &e.sessListeners
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.fns[sessionID]) > 0
}

// reportTx tells the session's listeners what a statement did to its transaction.
func (e *Engine) reportTx(sess *Session, wasInTx bool, st ast.Stmt, err error, pos *position) {
	if !e.hasSessionListeners(sess.id) {
		return
	}
	switch {
	case err != nil && (wasInTx || sess.tx != nil):
		e.notifySession(sess.id, TxEvent{Ended: true})
	case sess.tx != nil && ast.IsMutation(st):
		e.mu.RLock()
		changes := sess.tx.Changes()
		e.mu.RUnlock()
		e.notifySession(sess.id, TxEvent{Changes: changes})
	case wasInTx && sess.tx == nil:
		if _, committed := st.(*ast.CommitStmt); !committed {
			e.notifySession(sess.id, TxEvent{Ended: true})
		}
		// A commit was announced by the COMMIT itself, before its change set could be
		// durable.
	}
}
