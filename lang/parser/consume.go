package parser

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/lang/token"
)

// ConsumeMode reports whether src is a WATCH in consume mode (`[mode: consume]`): what
// a surface routes to the consume engine rather than to watch mode. Text that is not
// one WATCH statement counts as consume mode, whose engine reports the error.
func ConsumeMode(src string) bool {
	script, _, err := ParseScript(src)
	if err != nil || len(script.Stmts) != 1 {
		return true
	}
	w, ok := script.Stmts[0].(*ast.WatchStmt)
	return !ok || option.ModeOf(w) == option.Consume
}

// ConsumeWatch checks that src is one WATCH statement that is not in watch mode and
// returns it with mode: consume and, when group is set, that group: the statement a
// consumer opens (the command line's "herald consume" prints and runs it).
func ConsumeWatch(src, group string) (*ast.WatchStmt, error) {
	script, _, err := ParseScript(src)
	if err != nil {
		return nil, err
	}
	if len(script.Stmts) != 1 {
		return nil, fmt.Errorf("want one WATCH statement, got %d statements", len(script.Stmts))
	}
	w, ok := script.Stmts[0].(*ast.WatchStmt)
	if !ok {
		return nil, errors.New("want a WATCH statement")
	}
	if w.Handle != nil {
		return nil, errors.New("a handle (h = WATCH …) belongs to a session's script; give the WATCH alone")
	}
	if o := option.Find(w.Options, "mode"); o != nil {
		if id, ok := o.Value.(*ast.Ident); !ok || id.Name != "consume" {
			return nil, errors.New("this WATCH is not in consume mode: print its events with herald watch")
		}
	} else {
		setOption(w, "mode", &ast.Ident{Name: "consume"})
	}
	if group != "" {
		setOption(w, "group", &ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(group)})
	}
	return w, nil
}

// setOption gives w's option name the value v, adding it to the first option group
// when w has none by that name.
func setOption(w *ast.WatchStmt, name string, v ast.Expr) {
	if o := option.Find(w.Options, name); o != nil {
		o.Value = v
		return
	}
	if len(w.Options) == 0 {
		w.Options = []*ast.OptionList{{}}
	}
	w.Options[0].Options = append(w.Options[0].Options, &ast.WatchOption{Name: &ast.Ident{Name: name}, Value: v})
}
