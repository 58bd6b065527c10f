package watch

import (
	"context"
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// Watch management: handles (`w = WATCH …`), PAUSE / RESUME / CANCEL / ALTER WATCH, and
// the Layer 0 _Watch node every watch-mode stream keeps.

const typeWatch = "_Watch"

// handleKey names a handle: the session that bound it and its name.
type handleKey struct{ session, name string }

// watchNodeID is the _Watch node of a stream.
func (w *watcher) nodeID() herald.NodeID { return herald.NodeID("ww" + strings.ToLower(idSafe(w.id))) }

func idSafe(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('x')
		}
	}
	return b.String()
}

// saveNode writes the stream's _Watch node: its statement, options, status and counters.
func (w *watcher) saveNode(ctx context.Context, status string) {
	sp := w.sp
	now := w.svc.clock.Now()
	w.statMu.Lock()
	delivered, last := w.delivered, w.lastAt
	w.statMu.Unlock()
	delivery := "best_effort"
	if sp.reliable {
		delivery = "reliable"
	}
	_, _, err := w.svc.eng.System(ctx, func(tx *engine.SysTx) error {
		id := w.nodeID()
		created := herald.Timestamp(now)
		if old := tx.Node(id); old != nil {
			created = old.Attrs.Get("created_at")
		}
		// Built in name order (what AttrsOf would sort a map into), without a map.
		n := 12 // the attributes every stream has; the node keeps this array
		if w.handle != "" {
			n++
		}
		if !last.IsZero() {
			n++
		}
		attrs := make(herald.Attrs, 0, n)
		add := func(name string, v herald.Value) {
			if !v.IsNull() {
				attrs = append(attrs, herald.Attr{Name: name, Value: v})
			}
		}
		add("buffer_size", herald.Int(int64(sp.buffer)))
		add("created_at", created)
		add("delivery", herald.String(delivery))
		add("events_delivered", herald.Int(int64(delivered)))
		add("events_pending", herald.Int(int64(len(w.events))+w.queued.Load()))
		if w.handle != "" {
			add("handle", herald.String(w.handle))
		}
		if !last.IsZero() {
			add("last_event_at", herald.Timestamp(last))
		}
		add("mode", herald.String("watch"))
		add("on_full", herald.String(sp.onFull))
		add("ordering", herald.String(sp.ordering()))
		add("pattern", herald.String(sp.text))
		add("position", herald.Int(int64(w.position())))
		add("status", herald.String(status))
		add("visibility", herald.String("committed"))
		tx.PutNode(&herald.Node{ID: id, Type: typeWatch, Attrs: attrs})
		w.link.Do(func() { w.slot.LinkIn(tx, id) })
		return nil
	})
	if err != nil {
		w.svc.log.Warn("watch: writing the _Watch node failed", "err", err)
	}
}

// dropNode removes the stream's _Watch node when it ends; a cancelled watch keeps it,
// with status "cancelled", until the server restarts.
func (w *watcher) dropNode() {
	w.mu.Lock()
	keep := w.cancelled || w.overflow // ended by the server, not by its client: say so
	w.mu.Unlock()
	if keep {
		w.saveNode(context.Background(), "cancelled")
		return
	}
	_, _, err := w.svc.eng.System(context.Background(), func(tx *engine.SysTx) error {
		if tx.Node(w.nodeID()) != nil {
			tx.DeleteNode(w.nodeID())
		}
		return nil
	})
	if err != nil {
		w.svc.log.Warn("watch: removing the _Watch node failed", "err", err)
	}
}

func (s *spec) ordering() string {
	if len(s.order) > 0 {
		return "attribute"
	}
	return "arrival"
}

// position returns the seq of the last event the stream sent.
func (w *watcher) position() uint64 {
	w.statMu.Lock()
	defer w.statMu.Unlock()
	return w.sentSeq
}

// cleanStale removes the _Watch nodes of watch-mode streams from before a restart: their
// connections are gone (a reliable client resumes by position, not by node).
func (s *Service) cleanStale(ctx context.Context) error {
	_, _, err := s.eng.System(ctx, func(tx *engine.SysTx) error {
		for _, id := range tx.NodesByAttr(typeWatch, "mode", herald.String("watch")) {
			tx.DeleteNode(id)
		}
		return nil
	})
	return err
}

// handleName resolves what PAUSE / RESUME / CANCEL / ALTER WATCH name: a handle bound
// with `h = WATCH …`, or a _Watch node id (as #id, a string or a parameter).
func handleName(h ast.Expr, env engine.StmtEnv) (string, error) {
	switch x := h.(type) {
	case *ast.Ident:
		return x.Name, nil
	case *ast.NodeRef:
		return x.Name, nil
	case *ast.BasicLit:
		c := &eval.Compiler{Scope: eval.NewScope(), File: env.File}
		f, err := c.Compile(x)
		if err != nil {
			return "", err
		}
		v, _ := f(&eval.Context{}, nil)
		return v.AsString(), nil
	case *ast.ParamRef:
		return env.Params[x.Name].AsString(), nil
	}
	return "", nil
}

// find returns the watch-mode stream name denotes: a handle bound in this session (or
// without a session), or a _Watch node id; nil when there is none. own is true for a
// handle of the caller's own session.
func (s *Service) find(session, name string) (w *watcher, own bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range []handleKey{{session, name}, {"", name}} {
		if w := s.handles[key]; w != nil {
			return w, key.session != ""
		}
	}
	for _, w := range s.watchers {
		if string(w.nodeID()) == name {
			return w, false
		}
	}
	return nil, false
}

// manageCheck is what managing a watch needs beyond naming it: a principal (with
// authentication) manages the watches of its own sessions by handle; any other watch
// — by _Watch id, or by a handle bound without a session — needs the admin grant.
func manageCheck(ctx context.Context, own bool) error {
	if own {
		return nil
	}
	return herald.PrincipalFrom(ctx).Check(herald.ActAdmin, "")
}

// HasHandle reports whether a watch-mode stream of session is bound to handle name.
func (s *Service) HasHandle(session, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handles[handleKey{session, name}] != nil
}

// Handles reports the statements ExecStmt runs (engine.Extension).
func (s *Service) Handles(st ast.Stmt) bool {
	switch st.(type) {
	case *ast.WatchControlStmt, *ast.AlterWatchStmt:
		return true
	}
	return false
}

// ExecStmt runs PAUSE / RESUME / CANCEL / ALTER WATCH (an engine extension's share) on
// a watch-mode stream, or hands it to the consume side when the name is one of its.
func (s *Service) ExecStmt(ctx context.Context, env engine.StmtEnv, st ast.Stmt) (engine.Result, error) {
	var (
		h    ast.Expr
		op   token.Token
		opts []*ast.OptionList
	)
	switch x := st.(type) {
	case *ast.WatchControlStmt:
		h, op = x.Handle, x.Op
	case *ast.AlterWatchStmt:
		h, op, opts = x.Handle, token.ALTER, x.Options
		if opts == nil {
			opts = []*ast.OptionList{}
		}
	default:
		return engine.Result{}, herald.Errorf(herald.CodeNotImplemented, "not a watch management statement")
	}
	name, err := handleName(h, env)
	if err != nil {
		return engine.Result{}, err
	}
	w, own := s.find(env.SessionID, name)
	if w != nil {
		if err := manageCheck(ctx, own); err != nil {
			return engine.Result{}, err
		}
	}
	if w == nil {
		if s.cfg.Consume != nil {
			found, err := s.cfg.Consume.ControlWatch(ctx, env.SessionID, name, op, opts)
			if found || err != nil {
				return engine.Result{}, err
			}
		}
		return engine.Result{}, eval.ErrorAt(env.File, herald.CodeWatchNotFound, h.Pos(), "no watch %q: the handle is unknown, or its watch was cancelled or has ended", name)
	}
	switch op {
	case token.PAUSE:
		w.setPaused(true)
		w.saveNode(ctx, "paused")
	case token.RESUME:
		w.setPaused(false)
		w.saveNode(ctx, "active")
	case token.CANCEL:
		w.cancel()
	case token.ALTER:
		return engine.Result{}, w.alter(ctx, opts)
	}
	return engine.Result{}, nil
}

// setPaused stops or restarts the stream's delivery. A paused watch keeps its position;
// on RESUME it catches up from the change log, so nothing is lost meanwhile.
func (w *watcher) setPaused(p bool) {
	w.mu.Lock()
	w.paused = p
	if !p {
		w.behind, w.queue = true, nil
	}
	w.mu.Unlock()
	w.signal(w.wake)
}

// cancel ends the stream for good.
func (w *watcher) cancel() {
	w.mu.Lock()
	w.cancelled = true
	w.mu.Unlock()
	w.Close()
}

// alter applies new options. Option groups replace the same options of the statement; a
// changed filter takes effect at once, and the difference it makes is sent as added and
// removed events.
func (w *watcher) alter(ctx context.Context, opts []*ast.OptionList) error {
	w.alterMu.Lock()
	defer w.alterMu.Unlock()
	stmt := w.stmt
	next := *stmt
	next.Options = engine.MergeOptions(stmt.Options, opts)
	next.Handle = nil
	sp, _, err := compile(w.svc.eng, printer.String(&next), w.params, w.actor, w.session, w.sp.canRead)
	if err != nil {
		return err
	}
	// The new options may name nodes the old ones did not: the stream's principal needs
	// the grants for them too.
	if _, err := w.svc.eng.AuthorizeWatch(herald.WithPrincipal(ctx, w.principal), &next, sp.file, w.params, w.actor); err != nil {
		return err
	}
	if sp.winSize != w.sp.winSize || sp.winSlide != w.sp.winSlide {
		return herald.Errorf(herald.CodeInvalidQuery, "ALTER WATCH cannot add, remove or resize a window")
	}
	req := alterReq{sp: sp, stmt: &next, done: make(chan error, 1)}
	w.call()
	select {
	case w.reqs <- request{alter: &req}:
	case <-w.done:
		w.uncall()
		return herald.Errorf(herald.CodeWatchNotFound, "the watch has ended")
	case <-ctx.Done():
		w.uncall()
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		if err == nil {
			w.saveNode(ctx, "active")
		}
		return err
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// request is a call served on the stream's goroutine: an ALTER WATCH (alter), or a
// Flush (sync, closed once the stream has caught up).
type request struct {
	alter *alterReq
	sync  chan struct{}
}

type alterReq struct {
	sp   *spec
	stmt *ast.WatchStmt
	done chan error
}

// applyAlter swaps in a new spec on the stream's goroutine and reports the matches the
// change adds or removes.
func (w *watcher) applyAlter(req alterReq) bool {
	// Everything up to the durable position reaches the queue: apply it, then the
	// difference is stated at that position.
	seq, tick := w.awaitDispatched()
	if !w.catchUp() {
		req.done <- herald.Errorf(herald.CodeWatchNotFound, "the watch has ended")
		return false
	}
	if w.cursor < seq {
		w.cursor, w.tick = seq, tick
	}
	// Both statements are run on the graph as of the cursor, so the difference is exact
	// at that position.
	var before, after map[string]row
	old := w.sp
	p := newPast(w.cursor, func(ch herald.Change) bool { return old.reads(ch) || req.sp.reads(ch) })
	err := w.withPast(p, func(g *graph.Graph) error {
		var err error
		if before, err = w.sp.matches(p.view(g), time.Time{}, w.interrupt()); err != nil {
			return err
		}
		after, err = req.sp.matches(p.view(g), time.Time{}, w.interrupt())
		return err
	})
	if err != nil {
		req.done <- err
		return true
	}
	// The dispatch index follows the new statement: its types, its nodes read by id,
	// deliver_on.
	w.svc.mu.Lock()
	w.svc.index(w, false)
	if w.svc.watchers[w.id] == w {
		w.svc.releaseCompiled(w) // the altered statement is its own
	}
	w.sp, w.stmt = req.sp, req.stmt
	if _, ok := feedType(w.sp); !ok {
		w.feed = nil // its own queue from now on (the stream's goroutine runs this)
	}
	w.svc.index(w, true)
	if w.svc.watchers[w.id] == w { // not yet removed: it holds a share to move
		w.svc.releaseShare(w.share)
		w.share = req.sp.shareKey(w.params, w.actor, w.principal)
		w.shareID, w.share = w.svc.internShare(w.share)
	}
	w.svc.mu.Unlock()
	// What came between the old index and the new is in neither the queue nor the feed
	// for certain: read on from the change log.
	w.setBehind()
	if w.sp.single {
		w.past = nil
	} else {
		w.past = p
	}
	req.done <- nil
	var evs []herald.Event
	for _, r := range w.sp.sorted(before) {
		if _, ok := after[r.key]; !ok {
			evs = append(evs, herald.Event{Type: herald.EventRemoved, Match: r.value, Seq: w.cursor, Tick: w.tick})
		}
	}
	for _, r := range w.sp.sorted(after) {
		if _, ok := before[r.key]; !ok {
			evs = append(evs, herald.Event{Type: herald.EventAdded, Match: r.value, Seq: w.cursor, Tick: w.tick})
		}
	}
	if len(evs) > 0 {
		evs[len(evs)-1].Last = true
	}
	for i := range evs {
		if !w.send(&evs[i]) {
			return false
		}
	}
	return true
}
