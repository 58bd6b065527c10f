package engine

import (
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
)

// Limits bound one evaluation of a statement: how long it may run and how many
// bindings it may examine (0: no bound). A MATCH is one evaluation; a WATCH evaluates
// its pattern when it opens and again for each commit that concerns it, and each such
// evaluation has the same bounds.
type Limits struct {
	Timeout time.Duration
	MaxRows int
}

// LimitsFor returns the statement limits of principal p: the server's
// (Config.StatementTimeout, Config.MaxRowsScanned), lowered by p's own where they are
// lower (nil: the server's).
func (e *Engine) LimitsFor(p *herald.Principal) Limits {
	l := Limits{Timeout: e.cfg.StatementTimeout, MaxRows: e.cfg.MaxRowsScanned}
	if p != nil {
		if p.StatementTimeout > 0 && (l.Timeout <= 0 || p.StatementTimeout < l.Timeout) {
			l.Timeout = p.StatementTimeout
		}
		if p.MaxRowsScanned > 0 && (l.MaxRows <= 0 || p.MaxRowsScanned < l.MaxRows) {
			l.MaxRows = p.MaxRowsScanned
		}
	}
	return l
}

// Interrupt returns the check for eval.Context.Interrupt of one evaluation starting
// now: it stops the evaluation with E4011 once gone (which may be nil) reports its
// client gone, and with E4012 once the evaluation has run past l.Timeout or scanned past
// l.MaxRows bindings. It is asked every graph.InterruptEvery bindings.
func (e *Engine) Interrupt(l Limits, gone func() bool) func() error {
	in := e.newInterrupter(l, gone)
	return in.check
}

type interrupter struct {
	l        Limits
	clock    herald.Clock
	deadline time.Time
	scanned  int
	gone     func() bool
}

func (e *Engine) newInterrupter(l Limits, gone func() bool) *interrupter {
	in := &interrupter{l: l, clock: e.clock, gone: gone}
	if l.Timeout > 0 {
		in.deadline = e.clock.Now().Add(l.Timeout)
	}
	return in
}

func (in *interrupter) check() error {
	if in.gone != nil && in.gone() {
		return herald.Errorf(herald.CodeCancelled, "the statement was stopped: its client went away")
	}
	in.scanned += graph.InterruptEvery
	if in.l.MaxRows > 0 && in.scanned > in.l.MaxRows {
		return herald.Errorf(herald.CodeStatementLimit, "the statement was stopped after scanning more than %d bindings (the limit of the server, herald serve --max-rows-scanned, or of the principal); narrow the pattern or use an index", in.l.MaxRows)
	}
	if !in.deadline.IsZero() && !in.clock.Now().Before(in.deadline) {
		return herald.Errorf(herald.CodeStatementLimit, "the statement was stopped after running for %s (the limit of the server, herald serve --statement-timeout, or of the principal)", in.l.Timeout)
	}
	return nil
}
