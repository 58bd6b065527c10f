package parser

import (
	"strings"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/lang/token"
)

func (p *parser) parseStmt() ast.Stmt {
	switch p.tok {
	case token.NODE:
		return p.parseNodeDecl()
	case token.EDGE:
		return p.parseEdgeDecl()
	case token.SPAWN, token.KILL, token.LINK, token.UNLINK, token.SET:
		return p.parseAction(true)
	case token.MATCH:
		return p.parseMatch()
	case token.BEGIN:
		pos := p.pos
		p.next()
		if p.tok != token.SESSION {
			return &ast.BeginStmt{Begin: pos}
		}
		p.next()
		p.expect(token.AS)
		if p.tok != token.NODEREF && p.tok != token.PARAM {
			p.errorExpected(p.pos, "node reference or parameter")
		}
		return &ast.BeginSessionStmt{Begin: pos, Actor: p.parseOperand()}
	case token.COMMIT:
		pos := p.pos
		p.next()
		return &ast.CommitStmt{Commit: pos}
	case token.ROLLBACK:
		pos := p.pos
		p.next()
		return &ast.RollbackStmt{Rollback: pos}
	case token.END:
		pos := p.pos
		p.next()
		return &ast.EndSessionStmt{EndPos: pos, Session: p.expect(token.SESSION)}
	case token.TICK:
		s := &ast.TickStmt{Tick: p.pos}
		p.next()
		if p.tok == token.INT || p.tok == token.PARAM {
			s.Count = p.parseOperand()
		}
		return s
	case token.WATCH:
		return p.parseWatch(nil)
	case token.IDENT:
		switch {
		case strings.EqualFold(p.lit, "constraint") && (p.peek(1) == token.IDENT || p.peek(1).IsKeyword()):
			return p.parseConstraintDecl()
		case strings.EqualFold(p.lit, "drop") && p.peek(1) != token.EQL:
			s := &ast.DropConstraintStmt{Drop: p.pos}
			p.next()
			if p.tok != token.IDENT || !strings.EqualFold(p.lit, "constraint") {
				p.errorExpected(p.pos, "'CONSTRAINT'")
			} else {
				p.next()
			}
			s.Name = p.word("constraint name")
			return s
		}
		if p.peek(1) == token.EQL {
			h := p.ident()
			p.next()
			if p.tok != token.WATCH {
				p.errorExpected(p.pos, "'WATCH'")
			}
			return p.parseWatch(h)
		}
	case token.ACK:
		pos := p.pos
		p.next()
		return &ast.AckStmt{Ack: pos, ID: p.parseDeliveryID()}
	case token.REDRIVE:
		pos := p.pos
		p.next()
		return &ast.RedriveStmt{Redrive: pos, ID: p.parseDeliveryID()}
	case token.NACK:
		s := &ast.NackStmt{Nack: p.pos}
		p.next()
		s.ID = p.parseDeliveryID()
		if p.tok == token.LBRACK {
			s.Options = p.parseOptionList(option.NackShape, map[string]bool{})
		}
		return s
	case token.EXTEND:
		s := &ast.ExtendStmt{Extend: p.pos}
		p.next()
		s.ID = p.parseDeliveryID()
		if p.tok == token.LBRACK {
			s.Options = p.parseOptionList(option.ExtendShape, map[string]bool{})
		}
		return s
	case token.PAUSE, token.RESUME, token.CANCEL:
		s := &ast.WatchControlStmt{OpPos: p.pos, Op: p.tok}
		p.next()
		p.expect(token.WATCH)
		s.Handle = p.parseWatchHandle()
		return s
	case token.ALTER:
		s := &ast.AlterWatchStmt{Alter: p.pos}
		p.next()
		p.expect(token.WATCH)
		s.Handle = p.parseWatchHandle()
		p.expect(token.SET)
		if p.tok != token.LBRACK {
			p.errorExpected(p.pos, "'['")
		}
		seen := map[string]bool{}
		for p.tok == token.LBRACK {
			s.Options = append(s.Options, p.parseOptionList(watchShape, seen))
		}
		return s
	}
	p.errorExpected(p.pos, "statement")
	return nil
}

// ---------------------------------------------------------------------------
// Declarations

// parseConstraintDecl parses `constraint name: pattern => condition`.
func (p *parser) parseConstraintDecl() *ast.ConstraintDeclStmt {
	s := &ast.ConstraintDeclStmt{Constraint: p.pos}
	p.next()
	s.Name = p.word("constraint name")
	s.Colon = p.expect(token.COLON)
	s.Pattern = p.parsePattern()
	s.Arrow = p.expect(token.ARROW)
	s.Cond = p.parseExpr()
	return s
}

func (p *parser) parseNodeDecl() *ast.NodeDeclStmt {
	s := &ast.NodeDeclStmt{Node: p.pos}
	p.next()
	s.Name = p.word("type name")
	if p.tok == token.LBRACK {
		s.Mods = p.parseModifiers()
	}
	s.Lbrace, s.Attrs, s.Rbrace = p.parseAttrDecls()
	return s
}

func (p *parser) parseEdgeDecl() *ast.EdgeDeclStmt {
	s := &ast.EdgeDeclStmt{Edge: p.pos}
	p.next()
	s.Name = p.ident()
	s.Lparen = p.expect(token.LPAREN)
	for {
		e := &ast.EndpointDecl{Name: p.word("endpoint name")}
		e.Colon = p.expect(token.COLON)
		e.Type = p.word("type name")
		s.Endpoints = append(s.Endpoints, e)
		if !p.got(token.COMMA) {
			break
		}
	}
	s.Rparen = p.expect(token.RPAREN)
	if p.tok == token.LBRACK {
		s.Mods = p.parseModifiers()
	}
	if p.tok == token.LBRACE {
		s.Lbrace, s.Attrs, s.Rbrace = p.parseAttrDecls()
	}
	return s
}

// parseAttrDecls parses `{ name: Type [= default] [mods], ... }`; commas are optional.
func (p *parser) parseAttrDecls() (lbrace token.Pos, attrs []*ast.AttrDecl, rbrace token.Pos) {
	lbrace = p.expect(token.LBRACE)
	for p.tok != token.RBRACE {
		if !p.isWord() {
			p.errorExpected(p.pos, "attribute name or '}'")
		}
		a := &ast.AttrDecl{Name: p.word("attribute name")}
		a.Colon = p.expect(token.COLON)
		a.Type = p.parseTypeRef()
		if p.got(token.EQL) {
			a.Default = p.parseExpr()
		}
		if p.tok == token.LBRACK {
			a.Mods = p.parseModifiers()
		}
		attrs = append(attrs, a)
		p.got(token.COMMA)
	}
	rbrace = p.expect(token.RBRACE)
	return lbrace, attrs, rbrace
}

func (p *parser) parseTypeRef() *ast.TypeRef {
	t := &ast.TypeRef{}
	if p.tok == token.LBRACK {
		t.Lbrack = p.pos
		p.next()
		t.Name = p.ident()
		t.Rbrack = p.expect(token.RBRACK)
	} else {
		if p.tok != token.IDENT {
			p.errorExpected(p.pos, "type name")
		}
		t.Name = p.ident()
	}
	if p.tok == token.QUEST {
		t.Optional, t.Quest = true, p.pos
		p.next()
	}
	return t
}

func (p *parser) parseModifiers() *ast.Modifiers {
	m := &ast.Modifiers{Lbrack: p.expect(token.LBRACK)}
	for {
		m.Words = append(m.Words, p.word("modifier"))
		if !p.got(token.COMMA) {
			break
		}
	}
	m.Rbrack = p.expect(token.RBRACK)
	return m
}

// ---------------------------------------------------------------------------
// Mutations

// parseAction parses SPAWN, KILL, LINK, UNLINK or SET. Standalone statements may carry
// RETURNING; actions inside MATCH and ON MATCH DO may not (MATCH takes it itself).
func (p *parser) parseAction(returning bool) ast.Stmt {
	var s ast.Stmt
	var ret **ast.ReturnClause
	switch p.tok {
	case token.SPAWN:
		x := &ast.SpawnStmt{Spawn: p.pos}
		p.next()
		switch p.tok {
		case token.IDENT:
			x.Var = p.ident()
		case token.NODEREF:
			x.ID = &ast.NodeRef{HashPos: p.pos, Name: p.lit}
			p.next()
		default:
			p.errorExpected(p.pos, "variable or node reference")
		}
		x.Colon = p.expect(token.COLON)
		x.Type = p.word("type name")
		if p.tok == token.LBRACE {
			x.Body = p.parseBody()
		}
		s, ret = x, &x.Returning
	case token.KILL:
		x := &ast.KillStmt{Kill: p.pos}
		p.next()
		if p.tok != token.IDENT && p.tok != token.NODEREF && p.tok != token.PARAM {
			p.errorExpected(p.pos, "variable, node reference or parameter")
		}
		x.Target = p.parseOperand()
		s, ret = x, &x.Returning
	case token.LINK:
		x := &ast.LinkStmt{Link: p.pos}
		p.next()
		x.Edge = p.parseEdgeAtom(nil, token.NoPos)
		if p.tok == token.LBRACE {
			x.Body = p.parseBody()
		}
		s, ret = x, &x.Returning
	case token.UNLINK:
		x := &ast.UnlinkStmt{Unlink: p.pos}
		p.next()
		x.Edge = p.parseEdgeAtom(nil, token.NoPos)
		s, ret = x, &x.Returning
	case token.SET:
		x := &ast.SetStmt{Set: p.pos}
		p.next()
		for {
			x.Assigns = append(x.Assigns, p.parseSetAssign())
			if !p.got(token.COMMA) {
				break
			}
		}
		s, ret = x, &x.Returning
	default:
		p.errorExpected(p.pos, "action (SET, KILL, LINK, UNLINK or SPAWN)")
	}
	if returning && p.tok == token.RETURNING {
		*ret = p.parseReturn()
	}
	return s
}

// redriveAction reports whether the parser is at `REDRIVE variable`, the action of a
// MATCH; `REDRIVE "id"` (or #id, $param) on a line of its own is a statement.
func (p *parser) redriveAction() bool {
	return p.tok == token.REDRIVE && p.peek(1) == token.IDENT
}

func isAction(tok token.Token) bool {
	switch tok {
	case token.SPAWN, token.KILL, token.LINK, token.UNLINK, token.SET:
		return true
	}
	return false
}

// parseSetAssign parses `x.attr = expr` where x is a variable, node reference or
// parameter.
func (p *parser) parseSetAssign() *ast.Assign {
	if p.tok != token.IDENT && p.tok != token.NODEREF && p.tok != token.PARAM {
		p.errorExpected(p.pos, "attribute reference such as x.attr")
	}
	x := p.parseOperand()
	if p.tok != token.PERIOD {
		p.errorExpected(p.pos, "'.'")
	}
	p.next()
	target := &ast.SelectorExpr{X: x, Sel: p.word("attribute name")}
	a := &ast.Assign{Target: target, Eq: p.expect(token.EQL)}
	a.Value = p.parseExpr()
	return a
}

// parseBody parses `{ name = expr, ... }`; commas are optional.
func (p *parser) parseBody() *ast.Body {
	b := &ast.Body{Lbrace: p.expect(token.LBRACE)}
	for p.tok != token.RBRACE {
		if !p.isWord() {
			p.errorExpected(p.pos, "attribute name or '}'")
		}
		a := &ast.Assign{Target: p.word("attribute name")}
		a.Eq = p.expect(token.EQL)
		a.Value = p.parseExpr()
		b.Assigns = append(b.Assigns, a)
		p.got(token.COMMA)
	}
	b.Rbrace = p.expect(token.RBRACE)
	return b
}

// ---------------------------------------------------------------------------
// Queries

func (p *parser) parsePattern() *ast.Pattern {
	pat := &ast.Pattern{}
	for {
		pat.Elems = append(pat.Elems, p.parsePatternElem())
		if !p.got(token.COMMA) {
			break
		}
	}
	return pat
}

func (p *parser) parsePatternElem() ast.PatternElem {
	if p.tok != token.IDENT {
		p.errorExpected(p.pos, "node binding (v: Type) or edge atom (e(x, y))")
	}
	if p.peek(1) == token.LPAREN {
		return p.parseEdgeAtom(nil, token.NoPos)
	}
	v := p.ident()
	colon := p.expect(token.COLON)
	if p.tok == token.IDENT && p.peek(1) == token.LPAREN {
		return p.parseEdgeAtom(v, colon)
	}
	// Type names may be keywords (`o: Order`): after the colon nothing else can stand.
	return &ast.NodePattern{Var: v, Colon: colon, Type: p.word("type name")}
}

// parseEdgeAtom parses `name(arg, ...)`, where every argument is a variable, `_`, a
// node reference or a parameter.
func (p *parser) parseEdgeAtom(v *ast.Ident, colon token.Pos) *ast.EdgePattern {
	e := &ast.EdgePattern{Var: v, Colon: colon}
	if p.tok != token.IDENT {
		p.errorExpected(p.pos, "edge type")
	}
	e.Type = p.ident()
	e.Lparen = p.expect(token.LPAREN)
	for {
		if p.tok != token.IDENT && p.tok != token.NODEREF && p.tok != token.PARAM {
			p.errorExpected(p.pos, "endpoint (variable, '_', node reference or parameter)")
		}
		e.Args = append(e.Args, p.parseOperand())
		if !p.got(token.COMMA) {
			break
		}
	}
	e.Rparen = p.expect(token.RPAREN)
	return e
}

func (p *parser) parseMatch() *ast.MatchStmt {
	s := &ast.MatchStmt{Match: p.pos}
	p.next()
	s.Pattern = p.parsePattern()
	if p.got(token.WHERE) {
		s.Where = p.parseExpr()
	}
	switch {
	case p.tok == token.RETURN:
		s.Return = p.parseReturn()
		if p.tok == token.ORDER {
			p.next()
			p.expect(token.BY)
			for {
				s.OrderBy = append(s.OrderBy, p.parseOrderItem())
				if !p.got(token.COMMA) {
					break
				}
			}
		}
		if p.got(token.LIMIT) {
			s.Limit = p.parseExpr()
			if p.got(token.OFFSET) {
				s.Offset = p.parseExpr()
			}
		}
	case isAction(p.tok) || p.redriveAction():
		for isAction(p.tok) || p.redriveAction() {
			if p.tok == token.REDRIVE {
				// `MATCH d: _DeadLetter … REDRIVE d`: every letter the match binds.
				pos := p.pos
				p.next()
				s.Actions = append(s.Actions, &ast.RedriveStmt{Redrive: pos, ID: p.ident()})
				continue
			}
			s.Actions = append(s.Actions, p.parseAction(false))
		}
		if p.tok == token.RETURNING {
			s.Return = p.parseReturn()
		}
	default:
		p.errorExpected(p.pos, "WHERE, RETURN or an action (SET, KILL, LINK, UNLINK, SPAWN, REDRIVE)")
	}
	s.EndPos = p.prevEnd
	return s
}

// parseReturn parses `RETURN [DISTINCT] items` or `RETURNING items`.
func (p *parser) parseReturn() *ast.ReturnClause {
	r := &ast.ReturnClause{Return: p.pos, Returning: p.tok == token.RETURNING}
	p.next()
	if !r.Returning && p.got(token.DISTINCT) {
		r.Distinct = true
	}
	for {
		it := &ast.ReturnItem{X: p.parseExpr()}
		if p.got(token.AS) {
			it.Alias = p.ident()
		}
		r.Items = append(r.Items, it)
		if !p.got(token.COMMA) {
			break
		}
	}
	return r
}

func (p *parser) parseOrderItem() *ast.OrderItem {
	o := &ast.OrderItem{X: p.parseExpr()}
	if p.tok == token.ASC || p.tok == token.DESC {
		o.DirPos, o.Dir = p.pos, p.tok
		p.next()
	}
	return o
}

// ---------------------------------------------------------------------------
// Watches

func (p *parser) parseWatch(handle *ast.Ident) *ast.WatchStmt {
	s := &ast.WatchStmt{Handle: handle, Watch: p.expect(token.WATCH)}
	s.Pattern = p.parsePattern()
	seen := map[string]bool{}
	for {
		switch {
		case p.tok == token.LBRACK:
			s.Options = append(s.Options, p.parseOptionList(watchShape, seen))
			continue
		case p.tok == token.WHERE && s.Where == nil:
			p.next()
			s.Where = p.parseExpr()
			continue
		}
		break
	}
	if p.tok == token.RETURN {
		s.Return = p.parseReturn()
	}
	if p.tok == token.ON {
		o := &ast.OnMatch{On: p.pos}
		p.next()
		p.expect(token.MATCH)
		p.expect(token.DO)
		if !isAction(p.tok) {
			p.errorExpected(p.pos, "action (SET, KILL, LINK, UNLINK or SPAWN)")
		}
		for isAction(p.tok) {
			o.Actions = append(o.Actions, p.parseAction(false))
		}
		s.OnMatch = o
	}
	if s.Return == nil && s.OnMatch == nil {
		what := "'[', RETURN or ON MATCH DO"
		if s.Where == nil {
			what = "WHERE, '[', RETURN or ON MATCH DO"
		}
		p.errorExpected(p.pos, what)
	}
	return s
}

// parseDeliveryID parses the id of ACK, NACK and EXTEND: a string, $param or #ref.
func (p *parser) parseDeliveryID() ast.Expr {
	if p.tok != token.STRING && p.tok != token.PARAM && p.tok != token.NODEREF {
		p.errorExpected(p.pos, "delivery id (string, parameter or node reference)")
	}
	return p.parseOperand()
}

// parseWatchHandle parses a watch handle: #ref, identifier, string or $param.
func (p *parser) parseWatchHandle() ast.Expr {
	switch p.tok {
	case token.NODEREF, token.IDENT, token.STRING, token.PARAM:
		return p.parseOperand()
	}
	p.errorExpected(p.pos, "watch handle (node reference, identifier, string or parameter)")
	return nil
}
