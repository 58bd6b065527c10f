package parser

import (
	"strings"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/token"
)

// notPrec is the level of NOT: looser than comparisons, tighter than AND. A NOT
// expression may stand where an operand of AND or OR (or a whole expression) may, and
// its operand takes in every comparison and arithmetic operator to its right, so that
// `NOT a = b` means `NOT (a = b)`.
const notPrec = 3

// parseExpr parses a full expression.
func (p *parser) parseExpr() ast.Expr {
	return p.parseBinary(token.LowestPrec + 1)
}

// parseBinary parses an expression whose operators bind at least as tightly as prec1,
// by precedence climbing; all binary operators are left-associative.
func (p *parser) parseBinary(prec1 int) ast.Expr {
	var x ast.Expr
	if p.tok == token.NOT && prec1 <= notPrec {
		x = p.parseNot()
	} else {
		x = p.parseUnary()
	}
	for {
		op, oprec := p.tok, p.tok.Precedence()
		if oprec < prec1 {
			return x
		}
		opPos := p.pos
		p.next()
		if op == token.IS {
			not := p.got(token.NOT)
			if p.tok != token.NULL {
				p.errorExpected(p.pos, "NULL")
			}
			x = &ast.IsNullExpr{X: x, Not: not, Null: p.pos}
			p.next()
			continue
		}
		y := p.parseBinary(oprec + 1)
		x = &ast.BinaryExpr{X: x, OpPos: opPos, Op: op, Y: y}
	}
}

func (p *parser) parseNot() ast.Expr {
	p.enter()
	defer p.leave()
	pos := p.pos
	p.next()
	var x ast.Expr
	if p.tok == token.NOT {
		x = p.parseNot()
	} else {
		x = p.parseBinary(notPrec)
	}
	return &ast.UnaryExpr{OpPos: pos, Op: token.NOT, X: x}
}

func (p *parser) parseUnary() ast.Expr {
	switch p.tok {
	case token.SUB:
		p.enter()
		defer p.leave()
		pos := p.pos
		p.next()
		return &ast.UnaryExpr{OpPos: pos, Op: token.SUB, X: p.parseUnary()}
	case token.NOT:
		p.fail(p.pos, "NOT must be parenthesized here, as in a = (NOT b)")
	}
	return p.parsePostfix()
}

func (p *parser) parsePostfix() ast.Expr {
	x := p.parsePrimary()
	for p.tok == token.PERIOD {
		p.next()
		x = &ast.SelectorExpr{X: x, Sel: p.word("attribute name")}
	}
	return x
}

// parseOperand parses a single-token operand: identifier, parameter, node reference
// or literal.
func (p *parser) parseOperand() ast.Expr {
	var x ast.Expr
	switch p.tok {
	case token.IDENT:
		x = &ast.Ident{NamePos: p.pos, Name: p.lit}
	case token.PARAM:
		x = &ast.ParamRef{DollarPos: p.pos, Name: p.lit}
	case token.NODEREF:
		x = &ast.NodeRef{HashPos: p.pos, Name: p.lit}
	case token.INT, token.FLOAT, token.STRING, token.DURATION:
		x = &ast.BasicLit{ValuePos: p.pos, Kind: p.tok, Value: p.lit}
	case token.TRUE, token.FALSE, token.NULL:
		// Keep the canonical spelling; the length is the same.
		x = &ast.BasicLit{ValuePos: p.pos, Kind: p.tok, Value: p.tok.String()}
	default:
		p.errorExpected(p.pos, "operand")
	}
	p.next()
	return x
}

func (p *parser) parsePrimary() ast.Expr {
	switch p.tok {
	case token.IDENT:
		if p.peek(1) == token.LPAREN {
			return p.parseCall()
		}
		return p.parseOperand()
	case token.PARAM, token.NODEREF, token.INT, token.FLOAT, token.STRING, token.DURATION,
		token.TRUE, token.FALSE, token.NULL:
		return p.parseOperand()
	case token.LPAREN:
		p.enter()
		defer p.leave()
		x := &ast.ParenExpr{Lparen: p.pos}
		p.next()
		x.X = p.parseExpr()
		x.Rparen = p.expect(token.RPAREN)
		return x
	case token.LBRACK:
		p.enter()
		defer p.leave()
		x := &ast.ListLit{Lbrack: p.pos}
		p.next()
		for p.tok != token.RBRACK {
			x.Elems = append(x.Elems, p.parseExpr())
			if !p.got(token.COMMA) {
				break
			}
		}
		x.Rbrack = p.expect(token.RBRACK)
		return x
	}
	p.errorExpected(p.pos, "expression")
	return nil
}

// isAggregate reports whether name is an aggregate function (any letter case).
func isAggregate(name string) bool {
	switch strings.ToLower(name) {
	case "count", "sum", "avg", "min", "max":
		return true
	}
	return false
}

// parseCall parses `f(args)`, including the aggregate forms `COUNT(*)`,
// `COUNT(DISTINCT x)` and `COUNT(x WHERE cond)`.
func (p *parser) parseCall() *ast.CallExpr {
	p.enter()
	defer p.leave()
	c := &ast.CallExpr{Fun: p.ident()}
	c.Lparen = p.expect(token.LPAREN)
	agg := isAggregate(c.Fun.Name)
	switch {
	case p.tok == token.MUL:
		if !strings.EqualFold(c.Fun.Name, "count") {
			p.fail(p.pos, "'*' is only allowed in COUNT(*)")
		}
		c.Star = true
		p.next()
		c.Rparen = p.expect(token.RPAREN)
		return c
	case p.tok == token.DISTINCT:
		if !agg {
			p.fail(p.pos, "DISTINCT is only allowed in aggregates (COUNT, SUM, AVG, MIN, MAX)")
		}
		c.Distinct = true
		p.next()
	}
	for p.tok != token.RPAREN {
		c.Args = append(c.Args, p.parseExpr())
		if !p.got(token.COMMA) {
			break
		}
	}
	if p.tok == token.WHERE {
		if !agg || len(c.Args) != 1 {
			p.fail(p.pos, "WHERE inside a call is only allowed in an aggregate of one argument")
		}
		p.next()
		c.Where = p.parseExpr()
	}
	if c.Distinct && len(c.Args) == 0 {
		p.errorExpected(p.pos, "expression")
	}
	c.Rparen = p.expect(token.RPAREN)
	return c
}
