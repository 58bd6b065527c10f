package standing

import (
	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/token"
)

// Parse parses query as exactly one WATCH statement, as the streams take it, and checks
// its parameters.
func Parse(query string, params map[string]herald.Value) (*ast.WatchStmt, *token.File, error) {
	script, file, err := engine.Parse(query)
	if err != nil {
		return nil, nil, err
	}
	if len(script.Stmts) != 1 {
		return nil, nil, herald.Errorf(herald.CodeInvalidQuery, "a stream takes exactly one WATCH statement, got %d statements", len(script.Stmts))
	}
	w, ok := script.Stmts[0].(*ast.WatchStmt)
	if !ok {
		return nil, nil, herald.Errorf(herald.CodeInvalidQuery, "a stream takes a WATCH statement")
	}
	if err := engine.CheckParams(w, params); err != nil {
		return nil, nil, err
	}
	return w, file, nil
}
