package delivery

import (
	"context"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/token"
)

// Handles reports the statements ExecStmt runs (engine.Extension).
func (s *Service) Handles(st ast.Stmt) bool {
	switch st.(type) {
	case *ast.AckStmt, *ast.NackStmt, *ast.ExtendStmt, *ast.RedriveStmt:
		return true
	}
	return false
}

// ExecStmt runs the consume-mode statements that arrive through the query API
// (engine.Extension): ACK, NACK, EXTEND and REDRIVE.
func (s *Service) ExecStmt(ctx context.Context, env engine.StmtEnv, st ast.Stmt) (engine.Result, error) {
	errAt := func(code herald.Code, pos token.Pos, format string, args ...any) error {
		return eval.ErrorAt(env.File, code, pos, format, args...)
	}
	id := func(x ast.Expr) (string, error) {
		c := &eval.Compiler{Scope: eval.NewScope(), File: env.File}
		var v herald.Value
		switch r := x.(type) {
		case *ast.NodeRef:
			v = herald.String(r.Name)
		default:
			f, err := c.Compile(x)
			if err != nil {
				return "", err
			}
			if v, err = f(&eval.Context{Params: env.Params}, nil); err != nil {
				return "", err
			}
		}
		if v.Kind() != herald.KindString {
			return "", errAt(herald.CodeTypeMismatch, x.Pos(), "a delivery id is a String, got %s", v.Kind())
		}
		return v.AsString(), nil
	}
	duration := func(l *ast.OptionList, name string) (time.Duration, bool, error) {
		if l == nil {
			return 0, false, nil
		}
		for _, o := range l.Options {
			if o.Name.Name != name || o.Value == nil {
				continue
			}
			c := &eval.Compiler{Scope: eval.NewScope(), File: env.File}
			f, err := c.Compile(o.Value)
			if err != nil {
				return 0, false, err
			}
			v, err := f(&eval.Context{Params: env.Params}, nil)
			if err != nil {
				return 0, false, err
			}
			if v.Kind() != herald.KindDuration || v.AsDuration() < 0 {
				return 0, false, errAt(herald.CodeTypeMismatch, o.Value.Pos(), "%s needs a duration", name)
			}
			return v.AsDuration(), true, nil
		}
		return 0, false, nil
	}
	// ACK and NACK inside BEGIN … COMMIT join the transaction (see inTx); EXTEND and
	// REDRIVE commit on their own.
	settle := func(it Settle) (engine.Result, error) {
		it.Principal = herald.PrincipalFrom(ctx)
		if env.InTx {
			return engine.Result{}, s.inTx(env, it)
		}
		r, err := s.settleOne(ctx, it)
		observe(env, r.at)
		return engine.Result{}, err
	}
	if env.InTx {
		switch st.(type) {
		case *ast.ExtendStmt, *ast.RedriveStmt:
			return engine.Result{}, errAt(herald.CodeTxState, st.Pos(), "EXTEND and REDRIVE commit on their own; run them outside BEGIN … COMMIT")
		}
	}
	switch x := st.(type) {
	case *ast.AckStmt:
		d, err := id(x.ID)
		if err != nil {
			return engine.Result{}, err
		}
		return settle(Settle{DeliveryID: d, Action: ActAck})
	case *ast.NackStmt:
		d, err := id(x.ID)
		if err != nil {
			return engine.Result{}, err
		}
		o := NackOptions{}
		if x.Options != nil {
			for _, opt := range x.Options.Options {
				if opt.Name.Name == "no_retry" {
					o.NoRetry = true
				}
			}
		}
		if o.Delay, _, err = duration(x.Options, "delay"); err != nil {
			return engine.Result{}, err
		}
		act := ActNack
		if o.NoRetry {
			act = ActReject
		}
		return settle(Settle{DeliveryID: d, Action: act, Delay: o.Delay})
	case *ast.ExtendStmt:
		d, err := id(x.ID)
		if err != nil {
			return engine.Result{}, err
		}
		by, _, err := duration(x.Options, "by")
		if err != nil {
			return engine.Result{}, err
		}
		r, err := s.settleOne(ctx, Settle{DeliveryID: d, Action: ActExtend, By: by})
		observe(env, r.at)
		if err != nil {
			return engine.Result{}, err
		}
		return engine.Result{Columns: []string{"deadline"}, Rows: [][]herald.Value{{herald.Timestamp(r.Deadline)}}}, nil
	case *ast.RedriveStmt:
		d, err := id(x.ID)
		if err != nil {
			return engine.Result{}, err
		}
		n, err := s.Redrive(ctx, herald.NodeID(d))
		if err != nil {
			return engine.Result{}, err
		}
		return engine.Result{Columns: []string{"id"}, Rows: [][]herald.Value{{herald.String(string(n))}}, Stats: engine.Stats{NodesCreated: 1, NodesDeleted: 1}}, nil
	}
	return engine.Result{}, errAt(herald.CodeNotImplemented, st.Pos(), "not a consume-mode statement")
}

// observe reports a settlement's commit position to the query call that ran it.
func observe(env engine.StmtEnv, pos at) {
	if env.Observe != nil && pos.seq > 0 {
		env.Observe(pos.seq, pos.tick)
	}
}
