package parser

import (
	"strings"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/lang/token"
)

// shapeOf looks an option name up for one kind of statement: ok is false when the
// statement has no such option.
type shapeOf func(name string) (option.Shape, bool)

// watchShape is the shape of a WATCH or ALTER WATCH option (lang/option's table).
func watchShape(name string) (option.Shape, bool) {
	if o := option.Lookup(name); o != nil {
		return o.Shape, true
	}
	return option.Shape{}, false
}

// parseOptionList parses one `[name: value, ...]` group, each value by the shape the
// option table gives it. Options already in seen (from earlier groups of the same
// statement) are errors.
func (p *parser) parseOptionList(allowed shapeOf, seen map[string]bool) *ast.OptionList {
	l := &ast.OptionList{Lbrack: p.expect(token.LBRACK)}
	for {
		if !p.isWord() {
			p.errorExpected(p.pos, "option name")
		}
		name := p.lowerWord("option name")
		shape, ok := allowed(name.Name)
		if !ok {
			p.fail(name.Pos(), "unknown option '"+name.Name+"'")
		}
		if seen[name.Name] {
			p.fail(name.Pos(), "option '"+name.Name+"' given more than once")
		}
		seen[name.Name] = true
		o := &ast.WatchOption{Name: name}
		if shape.Kind != option.Flag {
			o.Colon = p.expect(token.COLON)
			o.Value = p.optionValue(shape)
		} else if p.tok == token.COLON {
			p.fail(p.pos, "option '"+name.Name+"' takes no value")
		}
		l.Options = append(l.Options, o)
		if !p.got(token.COMMA) {
			break
		}
	}
	if p.tok != token.RBRACK {
		p.errorExpected(p.pos, "',' or ']'")
	}
	l.Rbrack = p.pos
	p.next()
	return l
}

// optionValue parses an option's value of the given shape.
func (p *parser) optionValue(sh option.Shape) ast.Expr {
	switch sh.Kind {
	case option.Words:
		return p.words(sh.Words)
	case option.Literal:
		return p.literal(sh.Token)
	case option.Expr:
		return p.parseExpr()
	case option.Ordering:
		return p.ordering(sh.Expected)
	case option.Choice:
		return p.choice(sh)
	case option.Name:
		if p.tok != token.IDENT && p.tok != token.STRING {
			p.errorExpected(p.pos, sh.Expected)
		}
		return p.parseOperand()
	}
	return nil
}

func quoteAll(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = "'" + w + "'"
	}
	switch len(q) {
	case 1:
		return q[0]
	case 2:
		return q[0] + " or " + q[1]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// words accepts one of the given option words, in any letter case.
func (p *parser) words(ws []string) ast.Expr {
	if p.isWord() {
		for _, w := range ws {
			if strings.EqualFold(p.lit, w) {
				return p.lowerWord("")
			}
		}
	}
	p.errorExpected(p.pos, quoteAll(ws))
	return nil
}

func kindName(tok token.Token) string {
	switch tok {
	case token.INT:
		return "integer"
	case token.DURATION:
		return "duration (such as 30s)"
	case token.STRING:
		return "string"
	case token.NODEREF:
		return "node reference (#name)"
	}
	return tok.String()
}

// literal accepts a literal of the given kind.
func (p *parser) literal(kind token.Token) ast.Expr {
	if p.tok != kind {
		p.errorExpected(p.pos, kindName(kind))
	}
	return p.parseOperand()
}

// call parses `name(args)` where name was already checked and every argument is a
// literal of the given kinds (alternatives separated in each slot).
func (p *parser) callOf(args ...[]token.Token) *ast.CallExpr {
	c := &ast.CallExpr{Fun: p.lowerWord("")}
	c.Lparen = p.expect(token.LPAREN)
	for i, kinds := range args {
		if i > 0 {
			p.expect(token.COMMA)
		}
		ok := false
		for _, k := range kinds {
			ok = ok || p.tok == k
		}
		if !ok {
			names := make([]string, len(kinds))
			for j, k := range kinds {
				names[j] = kindName(k)
			}
			p.errorExpected(p.pos, strings.Join(names, " or "))
		}
		c.Args = append(c.Args, p.parseOperand())
	}
	c.Rparen = p.expect(token.RPAREN)
	return c
}

// wordIs reports whether the current token is the option word w.
func (p *parser) wordIs(w string) bool { return p.isWord() && strings.EqualFold(p.lit, w) }

// ordering: arrival | causal | attribute(expr [ASC|DESC], ...)
func (p *parser) ordering(expected string) ast.Expr {
	switch {
	case p.wordIs("arrival"), p.wordIs("causal"):
		return p.lowerWord("")
	case p.wordIs("attribute") && p.peek(1) == token.LPAREN:
		o := &ast.OrderingExpr{Attribute: p.pos}
		p.next()
		o.Lparen = p.expect(token.LPAREN)
		for {
			o.Keys = append(o.Keys, p.parseOrderItem())
			if !p.got(token.COMMA) {
				break
			}
		}
		o.Rparen = p.expect(token.RPAREN)
		return o
	}
	p.errorExpected(p.pos, expected)
	return nil
}

// choice accepts one of a shape's words or one of its calls, each argument a literal
// of the kinds the call takes there.
func (p *parser) choice(sh option.Shape) ast.Expr {
	for _, w := range sh.Words {
		if p.wordIs(w) {
			return p.lowerWord("")
		}
	}
	for _, c := range sh.Calls {
		if p.wordIs(c.Name) && p.peek(1) == token.LPAREN {
			return p.callOf(c.Args...)
		}
	}
	p.errorExpected(p.pos, sh.Expected)
	return nil
}
