package printer_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.hq")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			s, _, err := parser.ParseScript(string(src))
			if err != nil {
				t.Fatal(err)
			}
			got := printer.String(s)
			golden := strings.TrimSuffix(in, ".hq") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s:\n%s", golden, got)
			}
			// The canonical form is a fixed point.
			s2, _, err := parser.ParseScript(got)
			if err != nil {
				t.Fatalf("canonical output does not parse: %v", err)
			}
			if again := printer.String(s2); again != got {
				t.Errorf("printing is not idempotent:\n%s", again)
			}
		})
	}
}

func id(name string) *ast.Ident { return &ast.Ident{Name: name} }

func bin(x ast.Expr, op token.Token, y ast.Expr) ast.Expr {
	return &ast.BinaryExpr{X: x, Op: op, Y: y}
}

func not(x ast.Expr) ast.Expr { return &ast.UnaryExpr{Op: token.NOT, X: x} }
func neg(x ast.Expr) ast.Expr { return &ast.UnaryExpr{Op: token.SUB, X: x} }

// Trees built by hand get the parentheses they need, and no more.
func TestParentheses(t *testing.T) {
	a, b, c := id("a"), id("b"), id("c")
	tests := []struct {
		x    ast.Expr
		want string
	}{
		{bin(bin(a, token.ADD, b), token.MUL, c), "(a + b) * c"},
		{bin(a, token.MUL, bin(b, token.ADD, c)), "a * (b + c)"},
		{bin(bin(a, token.SUB, b), token.SUB, c), "a - b - c"},
		{bin(a, token.SUB, bin(b, token.SUB, c)), "a - (b - c)"},
		{bin(not(a), token.EQL, b), "(NOT a) = b"},
		{bin(a, token.EQL, not(b)), "a = (NOT b)"},
		{not(bin(a, token.EQL, b)), "NOT a = b"},
		{not(bin(a, token.AND, b)), "NOT (a AND b)"},
		{bin(not(a), token.AND, b), "NOT a AND b"},
		{bin(a, token.OR, not(b)), "a OR NOT b"},
		{bin(bin(a, token.EQL, not(b)), token.AND, c), "a = (NOT b) AND c"},
		{neg(neg(a)), "- -a"},
		{neg(bin(a, token.ADD, b)), "-(a + b)"},
		{neg(not(a)), "-(NOT a)"},
		{&ast.IsNullExpr{X: bin(a, token.OR, b)}, "(a OR b) IS NULL"},
		{&ast.IsNullExpr{X: not(a), Not: true}, "(NOT a) IS NOT NULL"},
		{bin(a, token.EQL, &ast.IsNullExpr{X: b}), "a = (b IS NULL)"},
		{bin(a, token.AND, &ast.IsNullExpr{X: b}), "a AND b IS NULL"},
		{&ast.SelectorExpr{X: neg(a), Sel: id("x")}, "(-a).x"},
		{&ast.CallExpr{Fun: id("COUNT"), Star: true}, "COUNT(*)"},
	}
	for _, tc := range tests {
		got := printer.String(tc.x)
		if got != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
			continue
		}
		if _, err := parser.ParseExpr(got); err != nil {
			t.Errorf("%s does not parse: %v", got, err)
		}
	}
}

func TestBadNodes(t *testing.T) {
	s := &ast.Script{Stmts: []ast.Stmt{&ast.BadStmt{}}}
	var b strings.Builder
	if err := printer.Fprint(&b, s); err == nil {
		t.Error("printing a BadStmt succeeded")
	}
	if err := printer.Fprint(&b, &ast.BinaryExpr{X: id("a"), Op: token.COMMA, Y: id("b")}); err == nil {
		t.Error("printing a bad operator succeeded")
	}
}
