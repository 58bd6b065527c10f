package parser

import (
	"strings"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/token"
)

// optionValue parses and validates the value of one option.
type optionValue func(p *parser) ast.Expr

// watchOptions lists the options of WATCH and ALTER WATCH with their value shapes.
var watchOptions = map[string]optionValue{
	"mode":             words("watch", "consume"),
	"group":            lit(token.STRING),
	"ordering":         ordering,
	"delivery":         words("best_effort", "reliable"),
	"visibility":       words("committed", "immediate"),
	"window":           window,
	"buffer":           lit(token.INT),
	"on_full":          words("drop", "block", "error"),
	"ack_timeout":      lit(token.DURATION),
	"max_redeliveries": lit(token.INT),
	"dead_letter":      lit(token.NODEREF),
	"initial":          initial,
	"filter":           expr,
	"branch":           branch,
	"branches":         words("all"),
	"deliver_on":       words("tick", "commit"),
	"backoff":          backoff,
	"fairness":         expr,
	"weight":           expr,
	"available_at":     expr,
	"max_in_flight":    lit(token.INT),
	"heartbeat":        lit(token.DURATION),
}

// flag marks an option written without a value, such as `no_retry`.
var flag optionValue

var nackOptions = map[string]optionValue{
	"no_retry": flag,
	"delay":    lit(token.DURATION),
}

var extendOptions = map[string]optionValue{
	"by": lit(token.DURATION),
}

// WatchOptionNames returns the names of the options accepted by WATCH, in no order.
func WatchOptionNames() []string {
	names := make([]string, 0, len(watchOptions))
	for n := range watchOptions {
		names = append(names, n)
	}
	return names
}

// parseOptionList parses one `[name: value, ...]` group. Options already in seen
// (from earlier groups of the same statement) are errors.
func (p *parser) parseOptionList(allowed map[string]optionValue, seen map[string]bool) *ast.OptionList {
	l := &ast.OptionList{Lbrack: p.expect(token.LBRACK)}
	for {
		if !p.isWord() {
			p.errorExpected(p.pos, "option name")
		}
		name := p.lowerWord("option name")
		parse, ok := allowed[name.Name]
		if !ok {
			p.fail(name.Pos(), "unknown option '"+name.Name+"'")
		}
		if seen[name.Name] {
			p.fail(name.Pos(), "option '"+name.Name+"' given more than once")
		}
		seen[name.Name] = true
		o := &ast.WatchOption{Name: name}
		if parse != nil {
			o.Colon = p.expect(token.COLON)
			o.Value = parse(p)
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
func words(ws ...string) optionValue {
	return func(p *parser) ast.Expr {
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

// lit accepts a literal of the given kind.
func lit(kind token.Token) optionValue {
	return func(p *parser) ast.Expr {
		if p.tok != kind {
			p.errorExpected(p.pos, kindName(kind))
		}
		return p.parseOperand()
	}
}

func expr(p *parser) ast.Expr { return p.parseExpr() }

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

var (
	durationArg = []token.Token{token.DURATION}
	intArg      = []token.Token{token.INT}
	numberArg   = []token.Token{token.FLOAT, token.INT}
)

// wordIs reports whether the current token is the option word w.
func (p *parser) wordIs(w string) bool { return p.isWord() && strings.EqualFold(p.lit, w) }

// ordering: arrival | causal | attribute(expr [ASC|DESC], ...)
func ordering(p *parser) ast.Expr {
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
	p.errorExpected(p.pos, "'arrival', 'causal' or 'attribute(...)'")
	return nil
}

// window: none | tumbling(DURATION) | sliding(DURATION, DURATION)
func window(p *parser) ast.Expr {
	switch {
	case p.wordIs("none"):
		return p.lowerWord("")
	case p.wordIs("tumbling") && p.peek(1) == token.LPAREN:
		return p.callOf(durationArg)
	case p.wordIs("sliding") && p.peek(1) == token.LPAREN:
		return p.callOf(durationArg, durationArg)
	}
	p.errorExpected(p.pos, "'none', 'tumbling(duration)' or 'sliding(duration, duration)'")
	return nil
}

// initial: full | none | since(INT)
func initial(p *parser) ast.Expr {
	switch {
	case p.wordIs("full"), p.wordIs("none"):
		return p.lowerWord("")
	case p.wordIs("since") && p.peek(1) == token.LPAREN:
		return p.callOf(intArg)
	}
	p.errorExpected(p.pos, "'full', 'none' or 'since(tick)'")
	return nil
}

// backoff: none | fixed(DURATION) | exponential(DURATION, FLOAT|INT, DURATION)
func backoff(p *parser) ast.Expr {
	switch {
	case p.wordIs("none"):
		return p.lowerWord("")
	case p.wordIs("fixed") && p.peek(1) == token.LPAREN:
		return p.callOf(durationArg)
	case p.wordIs("exponential") && p.peek(1) == token.LPAREN:
		return p.callOf(durationArg, numberArg, durationArg)
	}
	p.errorExpected(p.pos, "'none', 'fixed(duration)' or 'exponential(initial, factor, max)'")
	return nil
}

// branch: IDENT | STRING. The identifier keeps its spelling: it names a branch.
func branch(p *parser) ast.Expr {
	if p.tok != token.IDENT && p.tok != token.STRING {
		p.errorExpected(p.pos, "branch name (identifier or string)")
	}
	return p.parseOperand()
}
