package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"sync"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/token"
)

// This file holds the two ways to run a statement without sending its text each time:
// prepared statements (parsed once, run by name with new parameters) and publishing
// (a typed SPAWN of many messages, committed together).

// MaxPrepared bounds the statements the engine keeps prepared; preparing one more drops
// the least recently used.
const MaxPrepared = 10000

// Prepared is statement text parsed and checked once, run by ExecPrepared.
type Prepared struct {
	Name   string   // derived from the text: preparing the same text again gives it back
	Query  string   // the text
	Params []string // the parameters it uses, sorted
	script *ast.Script
	file   *token.File
	used   uint64 // for least-recently-used eviction
}

// prepared is the engine's table of prepared statements.
type prepared struct {
	mu    sync.Mutex
	byKey map[string]*Prepared
	clock uint64
}

// Prepare parses query and keeps it under a name derived from its text.
func (e *Engine) Prepare(query string) (*Prepared, error) {
	name := "s" + preparedName(query)
	t := &e.prep
	t.mu.Lock()
	if p := t.byKey[name]; p != nil {
		t.clock++
		p.used = t.clock
		t.mu.Unlock()
		return p, nil
	}
	t.mu.Unlock()
	script, file, err := Parse(query)
	if err != nil {
		return nil, err
	}
	p := &Prepared{Name: name, Query: query, Params: ast.Params(script), script: script, file: file}
	sort.Strings(p.Params)
	p.Params = dedupe(p.Params)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byKey == nil {
		t.byKey = map[string]*Prepared{}
	}
	if len(t.byKey) >= MaxPrepared {
		var oldest *Prepared
		for _, q := range t.byKey {
			if oldest == nil || q.used < oldest.used {
				oldest = q
			}
		}
		delete(t.byKey, oldest.Name)
	}
	t.clock++
	p.used = t.clock
	t.byKey[name] = p
	return p, nil
}

func preparedName(query string) string {
	sum := sha256.Sum256([]byte(query))
	return hex.EncodeToString(sum[:12])
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// Lookup returns the prepared statement name, or E4010 when the engine does not hold it
// (never prepared, dropped, or the server restarted: prepare it again).
func (e *Engine) Lookup(name string) (*Prepared, error) {
	t := &e.prep
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.byKey[name]
	if p == nil {
		return nil, herald.Errorf(herald.CodeUnknownStatement, "no prepared statement %q; prepare it again", name)
	}
	t.clock++
	p.used = t.clock
	return p, nil
}

// Unprepare drops a prepared statement; it reports whether there was one.
func (e *Engine) Unprepare(name string) bool {
	t := &e.prep
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byKey[name]
	delete(t.byKey, name)
	return ok
}

// ExecPrepared runs a prepared statement as Exec runs text.
func (e *Engine) ExecPrepared(ctx context.Context, sessionID string, p *Prepared, params map[string]herald.Value) (*Response, error) {
	return e.run(ctx, sessionID, p.script, p.file, params)
}

// Publication and Published are what Publish takes and answers (see the root package).
type (
	Publication = herald.Publication
	Published   = herald.Published
)

// Publish creates the nodes of msgs as SPAWN would, in one commit, and waits until it
// is durable. A publication that SPAWN would refuse (a sealed or edge type, a taken id,
// attributes its declaration does not allow) is answered with its error and left out;
// the others commit. A commit refused as a whole (a constraint that one of the nodes
// breaks) is retried node by node, so only the offending ones fail. err reports a
// failure of the whole call (the engine closing, an unknown session).
func (e *Engine) Publish(ctx context.Context, sessionID string, msgs []Publication) ([]Published, error) {
	out, durable, err := e.PublishAsync(ctx, sessionID, msgs)
	if err != nil {
		return nil, err
	}
	if err := durable(ctx); err != nil {
		for i := range out {
			if out[i].Err == nil {
				out[i] = Published{Err: err}
			}
		}
	}
	return out, nil
}

// PublishAsync is Publish without the wait: the nodes are committed (applied and handed
// to the pipeline) when it returns, and durable reports when they are durable (nil) or
// failed. Nothing may be told of them before that.
// ctx carries the principal (herald.PrincipalFrom) that needs the write grant on each
// type; it does not bound the call.
func (e *Engine) PublishAsync(ctx context.Context, sessionID string, msgs []Publication) ([]Published, func(context.Context) error, error) {
	e.inflight.Add(1)
	defer e.inflight.Done()
	if e.closing.Load() {
		return nil, nil, herald.Errorf(herald.CodeShuttingDown, "the engine is closing")
	}
	if err := e.spaceOK(); err != nil {
		return nil, nil, err
	}
	sess := newSession("")
	if sessionID != "" {
		s, err := e.session(ctx, sessionID)
		if err != nil {
			return nil, nil, err
		}
		sess.id = s.id
		s.mu.Lock()
		sess.actor = s.actor
		s.mu.Unlock()
	}
	out := make([]Published, len(msgs))
	pends := e.publishLocked(sess, herald.PrincipalFrom(ctx), msgs, out)
	return out, func(ctx context.Context) error {
		for _, p := range pends {
			if err := p.wait(ctx); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

func (e *Engine) publishLocked(sess *Session, p *herald.Principal, msgs []Publication, out []Published) []*pending {
	e.mu.Lock()
	defer e.mu.Unlock()
	var pos position
	var pends []*pending
	// try commits the publications idx together; those it commits get its position.
	try := func(idx []int) error {
		x := &execution{e: e, sess: sess, tx: e.g.Begin(), pos: &pos, principal: p}
		x.tx.Reserve(len(idx))
		var kept []int
		for _, i := range idx {
			m := msgs[i]
			// The map is the engine's (see Publication); checking it again in a retry
			// finds it as the first check left it, which passes the same way.
			n, err := x.create(m.Type, m.ID, m.Attrs, nil, noNode{}, noNode{}, noNode{})
			if err != nil {
				out[i] = Published{Err: err}
				continue
			}
			out[i] = Published{ID: n.ID}
			kept = append(kept, i)
		}
		pd, err := e.commitLocked(x.tx, 0, sess.actor)
		if err != nil {
			return err
		}
		pends = append(pends, pd)
		for _, i := range kept {
			out[i].Seq, out[i].Tick = e.seq, e.tick
		}
		return nil
	}
	all := make([]int, len(msgs))
	for i := range all {
		all[i] = i
	}
	if err := try(all); err != nil {
		// One of them broke the commit as a whole: try each alone.
		for _, i := range all {
			if out[i].Err != nil {
				continue
			}
			if err := try([]int{i}); err != nil {
				out[i] = Published{Err: err}
			}
		}
	}
	return pends
}
