package printer

import (
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/token"
)

// Parenthesization follows the parser exactly. An expression is printed in a slot
// described by two numbers: prec, the lowest binary precedence the parser accepts in
// that slot, and stop, the precedence of the operator that follows the slot (0 when
// none). NOT stands at level 3: it may appear where prec <= 3, and its operand takes
// in every following operator of precedence 3 or more.
const notPrec = 3

// unaryPrec is the slot of the operand of unary minus: only primaries fit there.
const unaryPrec = token.HighestPrec

func (p *printer) expr(x ast.Expr) { p.exprIn(x, token.LowestPrec+1, 0) }

func needsParens(x ast.Expr, prec, stop int) bool {
	switch x := x.(type) {
	case *ast.BinaryExpr:
		q := x.Op.Precedence()
		return q != token.LowestPrec && (q < prec || q < stop)
	case *ast.IsNullExpr:
		return notPrec < prec
	case *ast.UnaryExpr:
		if x.Op == token.NOT {
			return notPrec < prec || notPrec <= stop
		}
	}
	return false
}

func (p *printer) exprIn(x ast.Expr, prec, stop int) {
	if needsParens(x, prec, stop) {
		p.print("(")
		p.exprIn(x, token.LowestPrec+1, 0)
		p.print(")")
		return
	}
	switch x := x.(type) {
	case *ast.Ident:
		p.print(x.Name)
	case *ast.BasicLit:
		p.print(x.Value)
	case *ast.ParamRef:
		p.print("$", x.Name)
	case *ast.NodeRef:
		p.print("#", x.Name)
	case *ast.ListLit:
		p.print("[")
		p.exprList(x.Elems)
		p.print("]")
	case *ast.SelectorExpr:
		switch x.X.(type) {
		case *ast.Ident, *ast.BasicLit, *ast.ParamRef, *ast.NodeRef, *ast.ListLit,
			*ast.SelectorExpr, *ast.CallExpr, *ast.ParenExpr:
			p.expr(x.X)
		default:
			p.print("(")
			p.expr(x.X)
			p.print(")")
		}
		p.print(".", x.Sel.Name)
	case *ast.CallExpr:
		p.print(x.Fun.Name, "(")
		switch {
		case x.Star:
			p.print("*")
		case x.Distinct:
			p.print("DISTINCT ")
		}
		p.exprList(x.Args)
		if x.Where != nil {
			p.print(" WHERE ")
			p.expr(x.Where)
		}
		p.print(")")
	case *ast.UnaryExpr:
		switch x.Op {
		case token.NOT:
			p.print("NOT ")
			p.exprIn(x.X, notPrec, stop)
		case token.SUB:
			p.print("-")
			if u, ok := x.X.(*ast.UnaryExpr); ok && u.Op == token.SUB {
				p.print(" ") // `--` would start a comment
			}
			p.exprIn(x.X, unaryPrec, 0)
		default:
			panic(badNode{x})
		}
	case *ast.BinaryExpr:
		q := x.Op.Precedence()
		if q == token.LowestPrec {
			panic(badNode{x})
		}
		p.exprIn(x.X, prec, q)
		p.print(" ", x.Op.String(), " ")
		p.exprIn(x.Y, q+1, stop)
	case *ast.IsNullExpr:
		p.exprIn(x.X, prec, token.IS.Precedence())
		if x.Not {
			p.print(" IS NOT NULL")
		} else {
			p.print(" IS NULL")
		}
	case *ast.ParenExpr:
		p.print("(")
		p.expr(x.X)
		p.print(")")
	case *ast.OrderingExpr:
		p.print("attribute(")
		for i, k := range x.Keys {
			if i > 0 {
				p.print(", ")
			}
			p.orderItem(k)
		}
		p.print(")")
	default:
		panic(badNode{x})
	}
}

func (p *printer) exprList(list []ast.Expr) {
	for i, x := range list {
		if i > 0 {
			p.print(", ")
		}
		p.expr(x)
	}
}
