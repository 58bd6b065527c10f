package cli

import (
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/lang/parser"
)

// The server routes a WATCH by its mode; the command line reads the statement itself
// only to refuse one that belongs to the other command, and to write "herald consume"'s
// options into it (consumeStatement, with lang/parser.ConsumeWatch). It parses with the
// language's own front end.

// consumeMode reports whether src is one WATCH statement in consume mode. Text that is
// not one is not: the server reports what is wrong with it.
func consumeMode(src string) bool {
	script, _, err := parser.ParseScript(src)
	if err != nil || len(script.Stmts) != 1 {
		return false
	}
	w, ok := script.Stmts[0].(*ast.WatchStmt)
	return ok && option.ModeOf(w) == option.Consume
}
