package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// The server routes a WATCH by its mode; the command line reads the statement itself
// only to refuse one that belongs to the other command, and to write "herald consume"'s
// options into it. It parses with the language's own front end.

// oneWatch parses src as one WATCH statement without a handle.
func oneWatch(src string) (*ast.WatchStmt, error) {
	script, _, err := parser.ParseScript(src)
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
	return w, nil
}

// option returns the option name of w (case-insensitive), or nil.
func option(w *ast.WatchStmt, name string) *ast.WatchOption {
	for _, ol := range w.Options {
		for _, o := range ol.Options {
			if strings.EqualFold(o.Name.Name, name) {
				return o
			}
		}
	}
	return nil
}

// isConsume reports whether the mode option o says consume.
func isConsume(o *ast.WatchOption) bool {
	id, ok := o.Value.(*ast.Ident)
	return ok && strings.EqualFold(id.Name, "consume")
}

// consumeMode reports whether src is one WATCH statement in consume mode. Text that is
// not one is not: the server reports what is wrong with it.
func consumeMode(src string) bool {
	w, err := oneWatch(src)
	if err != nil {
		return false
	}
	o := option(w, "mode")
	return o != nil && isConsume(o)
}

// consumeStatement checks that src is one WATCH statement that is not in watch mode and
// returns it in canonical form with mode: consume and, when group is set, that group.
func consumeStatement(src, group string) (string, error) {
	w, err := oneWatch(src)
	if err != nil {
		return "", err
	}
	if o := option(w, "mode"); o == nil {
		setOption(w, "mode", &ast.Ident{Name: "consume"})
	} else if !isConsume(o) {
		return "", errors.New("this WATCH is not in consume mode: print its events with herald watch")
	}
	if group != "" {
		setOption(w, "group", &ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(group)})
	}
	var b strings.Builder
	if err := printer.Fprint(&b, w); err != nil {
		return "", err
	}
	return b.String(), nil
}

// setOption gives w's option name the value, adding it to the first option list when
// w has none of that name.
func setOption(w *ast.WatchStmt, name string, value ast.Expr) {
	if o := option(w, name); o != nil {
		o.Value = value
		return
	}
	if len(w.Options) == 0 {
		w.Options = []*ast.OptionList{{}}
	}
	w.Options[0].Options = append(w.Options[0].Options, &ast.WatchOption{Name: &ast.Ident{Name: name}, Value: value})
}
