package printer_test

import (
	"testing"
	"time"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// A statement built with the ast constructors prints as text that parses back to the
// same statement, whatever its strings hold.
func TestBuiltStatementsRoundTrip(t *testing.T) {
	for _, s := range []string{"", "plain", `quo"te`, `back\slash`, "new\nline\ttab\r", "\x01\x7f", "ünïcødé ✓", `"]; KILL x`} {
		for _, d := range []time.Duration{time.Nanosecond, 250 * time.Millisecond, 90 * time.Second, 2 * time.Minute, 3 * time.Hour, 1500 * time.Microsecond} {
			w := &ast.WatchStmt{
				Pattern: ast.Bind("i", "QueueItem"),
				Where:   ast.Binary(ast.Sel(ast.NewIdent("i"), "queue"), token.EQL, ast.Str(s)),
				Options: []*ast.OptionList{ast.Options(
					ast.Option("mode", ast.NewIdent("consume")),
					ast.Option("group", ast.Str("g:"+s)),
					ast.Option("ordering", ast.Ordering(ast.Asc(ast.Sel(ast.NewIdent("i"), "priority")), ast.Desc(ast.Sel(ast.NewIdent("i"), "at")))),
					ast.Option("ack_timeout", ast.Dur(d)),
					ast.Option("max_redeliveries", ast.Int(7)),
				)},
				Return: ast.Returning(ast.NewIdent("i")),
			}
			text := printer.String(w)
			script, _, err := parser.ParseScript(text)
			if err != nil {
				t.Fatalf("%q: %v", text, err)
			}
			if again := printer.String(script.Stmts[0]); again != text {
				t.Fatalf("printed %q, read back as %q", text, again)
			}
			lit := script.Stmts[0].(*ast.WatchStmt).Where.(*ast.BinaryExpr).Y.(*ast.BasicLit)
			if lit.Value != ast.Quote(s) {
				t.Fatalf("string %q came back as %s", s, lit.Value)
			}
			dl := script.Stmts[0].(*ast.WatchStmt).Options[0].Options[3].Value.(*ast.BasicLit)
			if got, err := time.ParseDuration(dl.Value); err != nil || got != d {
				t.Fatalf("duration %v came back as %s (%v)", d, dl.Value, err)
			}
		}
	}
}

func TestBuiltNegativeInt(t *testing.T) {
	x := ast.Binary(ast.Sel(ast.NewIdent("i"), "p"), token.EQL, ast.Int(-3))
	text := printer.String(x)
	back, err := parser.ParseExpr(text)
	if err != nil || printer.String(back) != text || text != "i.p = -3" {
		t.Fatalf("%q read back as %v (%v)", text, back, err)
	}
}
