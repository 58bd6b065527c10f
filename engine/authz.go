package engine

import (
	"context"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/token"
)

// AuthorizeWatch decides what the WATCH w (parsed from file, opened with params for
// actor) touches — its Access, see AccessOf — and checks it against the principal ctx
// carries: a refusal is E8001 for the pattern and the nodes it names, E4013 for what
// its ON MATCH DO writes. The Access is returned for the watch policy (Access.Types).
func (e *Engine) AuthorizeWatch(ctx context.Context, w *ast.WatchStmt, file *token.File, params map[string]herald.Value, actor herald.NodeID) (Access, error) {
	var acc Access
	_ = e.View(func(tx *graph.Tx, _, _ uint64) error {
		acc = AccessOf(w, AccessEnv{Graph: tx, Params: params, Actor: actor})
		return nil
	})
	return acc, acc.Check(herald.PrincipalFrom(ctx), file)
}

// WatchReads returns the eval.Context.CanRead of a standing query opened by p with
// action (herald.ActWatch or herald.ActConsume) under policy: each type an evaluation
// meets — a node named by id that has since changed type, a node an untyped endpoint
// binds — must be one p may act on and the policy does not deny (E8001). It returns nil
// when neither restricts anything.
func WatchReads(p *herald.Principal, action string, policy herald.WatchPolicy) func(typ string) error {
	if p == nil && len(policy.DenyTypes) == 0 {
		return nil
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
