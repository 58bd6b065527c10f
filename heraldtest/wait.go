package heraldtest

import (
	"context"
	"fmt"
	"time"
	"unicode"

	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// The wait-until helpers wait for the server to reach a state a worker test expects,
// without sleeping: each opens a watch on what it waits for, then checks with a query,
// and checks again on every change the watch reports. They fail the test (or panic,
// for a server from Start) after the server's wait timeout, 10 seconds unless
// WithWaitTimeout says otherwise. With WithManualClock, advance the clock before
// waiting for what it holds back: a wait does not move time.

// DefaultWaitTimeout bounds the wait-until helpers unless WithWaitTimeout sets another.
const DefaultWaitTimeout = 10 * time.Second

// WithWaitTimeout bounds the wait-until helpers (WaitDrained, RequireAcked,
// RequireDeadLettered).
func WithWaitTimeout(d time.Duration) Option {
	return func(c *config) { c.wait = d }
}

// DeadLetter is a message's dead letter: the _DeadLetter node the server recorded when
// it gave up on it.
type DeadLetter struct {
	ID       string         // the _DeadLetter node's id, for REDRIVE
	Reason   string         // max_redeliveries_exceeded, no_retry, …
	Attempts int            // deliveries the message had
	Subject  string         // the message's node id
	Match    map[string]any // the letter's node as a whole
}

// WaitDrained waits until no node of type typ is left: every message of that type has
// been acknowledged (or dead-lettered).
func (s *Server) WaitDrained(typ string) {
	if s.tb != nil {
		s.tb.Helper()
	}
	s.checkType(typ)
	watch := watchOf("m", typ, nil)
	count := countOf("m", typ, nil)
	s.waitUntil("no "+typ+" is left", watch, count, nil, func(r *client.Response) bool {
		return r.Last().Rows[0][0] == int64(0)
	})
}

// RequireAcked waits until the message id of type typ is gone, and fails if it went
// to the dead letters rather than by ACK.
func (s *Server) RequireAcked(typ, id string) {
	if s.tb != nil {
		s.tb.Helper()
	}
	s.checkType(typ)
	byID := ast.Binary(ast.Sel(ast.NewIdent("m"), "id"), token.EQL, ast.Param("id"))
	params := map[string]any{"id": id}
	s.waitUntil(typ+" "+id+" is settled", watchOf("m", typ, byID), countOf("m", typ, byID), params, func(r *client.Response) bool {
		return r.Last().Rows[0][0] == int64(0)
	})
	if l, ok := s.deadLetter(id); ok {
		s.fail("%s %s was dead-lettered (%s after %d attempts), not acknowledged", typ, id, l.Reason, l.Attempts)
	}
}

// RequireDeadLettered waits until the message id of type typ has a dead letter, and
// returns it.
func (s *Server) RequireDeadLettered(typ, id string) DeadLetter {
	if s.tb != nil {
		s.tb.Helper()
	}
	s.checkType(typ)
	bySubject := ast.Binary(ast.Sel(ast.NewIdent("d"), "subject_id"), token.EQL, ast.Param("id"))
	params := map[string]any{"id": id}
	s.waitUntil(typ+" "+id+" is dead-lettered", watchOf("d", "_DeadLetter", bySubject), countOf("d", "_DeadLetter", bySubject), params,
		func(r *client.Response) bool { return r.Last().Rows[0][0] != int64(0) })
	l, _ := s.deadLetter(id)
	if l.Match["subject_type"] != typ {
		s.fail("the dead letter of %s is of a %v, not a %s", id, l.Match["subject_type"], typ)
	}
	return l
}

// deadLetter returns the dead letter of the message id, if it has one.
func (s *Server) deadLetter(id string) (DeadLetter, bool) {
	resp := s.Exec(`MATCH d: _DeadLetter WHERE d.subject_id = $id RETURN d`, map[string]any{"id": id})
	rows := resp.Last().Rows
	if len(rows) == 0 {
		return DeadLetter{}, false
	}
	m, _ := rows[0][0].(map[string]any)
	l := DeadLetter{Match: m, Subject: id}
	l.ID, _ = m["id"].(string)
	l.Reason, _ = m["failure_reason"].(string)
	if n, ok := m["delivery_attempts"].(int64); ok {
		l.Attempts = int(n)
	}
	return l, true
}

// waitUntil opens watch, then runs query until done says so, once at first and again
// after every event of the watch, for the server's wait timeout at most.
func (s *Server) waitUntil(what, watch, query string, params map[string]any, done func(*client.Response) bool) {
	if s.tb != nil {
		s.tb.Helper()
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.wait)
	defer cancel()
	w, err := s.Client().Watch(ctx, watch, client.WithParams(params))
	if err != nil {
		s.fail("waiting until %s: %v", what, err)
	}
	defer w.Close()
	for {
		resp, err := s.Client().Exec(ctx, query, params)
		if err != nil {
			s.fail("waiting until %s: %v", what, err)
		}
		if done(resp) {
			return
		}
		if _, err := w.Next(ctx); err != nil {
			s.fail("waiting until %s: %v", what, describeWaitErr(err, s.wait))
		}
	}
}

func describeWaitErr(err error, d time.Duration) error {
	if err == context.DeadlineExceeded {
		return fmt.Errorf("not within %v", d)
	}
	return err
}

// watchOf is `WATCH v: typ [WHERE cond] [initial: none] RETURN v.id`: the changes of
// the nodes waited for, without the snapshot (the query after it covers that).
func watchOf(v, typ string, cond ast.Expr) string {
	return printer.String(&ast.WatchStmt{
		Pattern: ast.Bind(v, typ),
		Where:   cond,
		Options: []*ast.OptionList{ast.Options(ast.Option("initial", ast.NewIdent("none")))},
		Return:  ast.Returning(ast.Sel(ast.NewIdent(v), "id")),
	})
}

// countOf is `MATCH v: typ [WHERE cond] RETURN COUNT(v)`.
func countOf(v, typ string, cond ast.Expr) string {
	return printer.String(&ast.MatchStmt{
		Pattern: ast.Bind(v, typ),
		Where:   cond,
		Return:  ast.Returning(ast.Call("COUNT", ast.NewIdent(v))),
	})
}

// checkType fails unless typ is an identifier, as a type name is.
func (s *Server) checkType(typ string) {
	ok := typ != ""
	for i, r := range typ {
		ok = ok && (r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r)))
	}
	if !ok {
		s.fail("type %q is not an identifier", typ)
	}
}
