// Package parser turns query text into the syntax tree of package ast. It recovers from
// errors at statement boundaries and reports them as a sorted ErrorList.
package parser

import (
	"fmt"
	"strings"
	"sync"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/scanner"
	"github.com/herald-mq/herald/lang/token"
)

// Error is one syntax error; its Error method prints `line:col: message`.
type Error = scanner.Error

// ErrorList is the error returned by ParseScript and ParseExpr, sorted by position.
type ErrorList = scanner.ErrorList

const (
	// MaxErrors is the number of errors after which parsing stops.
	MaxErrors = 10
	// MaxNesting is the deepest allowed nesting of parentheses, lists, calls and unary
	// operators. Deeper input fails with an error whose message mentions "nesting".
	MaxNesting = 100
)

// ParseScript parses a whole query text: statements separated by optional semicolons.
// It returns the statements it could parse, with BadStmt in place of broken ones, the
// File that resolves positions, and an ErrorList when there were syntax errors.
func ParseScript(src string) (*ast.Script, *token.File, error) {
	var p parser
	p.init(src)
	defer p.release()
	script := &ast.Script{}
	func() {
		defer p.recoverBailout()
		p.parseStmtList(script)
	}()
	return script, p.file, p.err()
}

// ParseExpr parses a single expression.
func ParseExpr(src string) (x ast.Expr, err error) {
	var p parser
	p.init(src)
	defer p.release()
	func() {
		defer p.recoverBailout()
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(stmtError); !ok {
					panic(r)
				}
			}
		}()
		x = p.parseExpr()
		if p.tok != token.EOF {
			p.errorExpected(p.pos, "end of expression")
		}
	}()
	if err = p.err(); err != nil && x == nil {
		x = &ast.BadExpr{From: 1, To: token.Pos(len(src) + 1)}
	}
	return x, err
}

// tokenPool holds token slices between parses.
var tokenPool = sync.Pool{New: func() any { return new([]tokenInfo) }}

// maxPooledTokens bounds the token slices kept in tokenPool: a rare long script's
// tokens are left to the collector.
const maxPooledTokens = 1024

// release gives the parser's token slice back to tokenPool. The syntax tree keeps
// nothing of it: literals are strings of their own.
func (p *parser) release() {
	if p.buf == nil {
		return
	}
	if cap(p.toks) <= maxPooledTokens {
		clear(p.toks) // let the literals go
		*p.buf = p.toks[:0]
		tokenPool.Put(p.buf)
	}
	p.buf, p.toks = nil, nil
}

// bailout stops the whole parse (too many errors, or nesting too deep).
type bailout struct{}

// stmtError abandons the current statement; the statement loop recovers from it.
type stmtError struct{}

type tokenInfo struct {
	pos token.Pos
	end token.Pos
	tok token.Token
	lit string
}

type parser struct {
	file   *token.File
	errors ErrorList
	toks   []tokenInfo
	buf    *[]tokenInfo // where toks came from in tokenPool
	idx    int

	// current token
	pos token.Pos
	tok token.Token
	lit string

	prevEnd  token.Pos    // end of the last consumed token
	depth    int          // expression nesting
	errLines map[int]bool // lines with an error
}

func (p *parser) init(src string) {
	b := []byte(src)
	p.file = token.NewFile(b)
	var s scanner.Scanner
	s.Init(b, func(pos token.Pos, msg string) {
		p.errors.Add(p.file.Position(pos), msg)
		p.errorLine(p.file.Position(pos).Line)
	}, 0)
	// A statement is parsed for every watch opened and every query run, and its tokens
	// are needed only while it is: their slice comes from a pool, with room for the
	// tokens at once (a token takes three bytes of source or more, most often).
	p.buf = tokenPool.Get().(*[]tokenInfo)
	p.toks = (*p.buf)[:0]
	if n := len(src)/3 + 2; cap(p.toks) < n {
		p.toks = make([]tokenInfo, 0, n)
	}
	for {
		pos, tok, lit := s.Scan()
		end := pos + token.Pos(len(lit))
		switch {
		case tok == token.PARAM || tok == token.NODEREF:
			end++
		case tok.IsOperator():
			end = pos + token.Pos(len(tok.String()))
			if tok == token.NEQ && src[pos-1] == '<' {
				end = pos + 2
			}
		}
		p.toks = append(p.toks, tokenInfo{pos, end, tok, lit})
		if tok == token.EOF {
			break
		}
	}
	p.idx = -1
	p.next()
}

func (p *parser) err() error {
	if len(p.errors) == 0 {
		return nil
	}
	p.errors.RemoveMultiples()
	if len(p.errors) > MaxErrors {
		p.errors = p.errors[:MaxErrors]
	}
	return p.errors
}

func (p *parser) recoverBailout() {
	if r := recover(); r != nil {
		if _, ok := r.(bailout); !ok {
			panic(r)
		}
	}
}

func (p *parser) next() {
	if p.idx >= 0 {
		p.prevEnd = p.toks[p.idx].end
	}
	if p.idx < len(p.toks)-1 {
		p.idx++
	}
	t := p.toks[p.idx]
	p.pos, p.tok, p.lit = t.pos, t.tok, t.lit
}

// peek returns the kind of the token n places after the current one.
func (p *parser) peek(n int) token.Token {
	if i := p.idx + n; i < len(p.toks) {
		return p.toks[i].tok
	}
	return token.EOF
}

// peekLit returns the literal of the token n ahead.
func (p *parser) peekLit(n int) string {
	if i := p.idx + n; i < len(p.toks) {
		return p.toks[i].lit
	}
	return ""
}

// ---------------------------------------------------------------------------
// Errors

// errorLine records that line has an error; the map is made by the first one.
func (p *parser) errorLine(line int) {
	if p.errLines == nil {
		p.errLines = map[int]bool{}
	}
	p.errLines[line] = true
}

func (p *parser) error(pos token.Pos, msg string) {
	position := p.file.Position(pos)
	p.errors.Add(position, msg)
	p.errorLine(position.Line)
	if len(p.errLines) > MaxErrors {
		panic(bailout{})
	}
}

// found describes the current token for an error message.
func (p *parser) found() string {
	switch {
	case p.tok == token.EOF:
		return "end of input"
	case p.tok == token.PARAM:
		return "'$" + p.lit + "'"
	case p.tok == token.NODEREF:
		return "'#" + p.lit + "'"
	case p.tok == token.STRING:
		return p.lit
	case p.tok.IsLiteral():
		return "'" + p.lit + "'"
	}
	return "'" + p.tok.String() + "'"
}

// fail reports an error and abandons the current statement.
func (p *parser) fail(pos token.Pos, msg string) {
	p.error(pos, msg)
	panic(stmtError{})
}

// errorExpected reports that what was expected is missing at pos, naming the current
// token, and abandons the statement. An illegal token was already reported by the
// scanner, so it is not reported twice.
func (p *parser) errorExpected(pos token.Pos, what string) {
	if p.tok == token.ILLEGAL && pos == p.pos {
		panic(stmtError{})
	}
	msg := "expected " + what
	if pos == p.pos {
		msg += ", found " + p.found()
	}
	p.fail(pos, msg)
}

func (p *parser) expect(tok token.Token) token.Pos {
	pos := p.pos
	if p.tok != tok {
		p.errorExpected(pos, "'"+tok.String()+"'")
	}
	p.next()
	return pos
}

func (p *parser) got(tok token.Token) bool {
	if p.tok == tok {
		p.next()
		return true
	}
	return false
}

func (p *parser) enter() {
	p.depth++
	if p.depth > MaxNesting {
		p.error(p.pos, fmt.Sprintf("exceeded maximum nesting depth of %d", MaxNesting))
		panic(bailout{})
	}
}

func (p *parser) leave() { p.depth-- }

// ---------------------------------------------------------------------------
// Statement list and recovery

// atStmtStart reports whether the current token begins a statement.
func (p *parser) atStmtStart() bool {
	switch p.tok {
	case token.SPAWN, token.KILL, token.LINK, token.UNLINK, token.SET, token.MATCH,
		token.WATCH, token.NODE, token.EDGE, token.BEGIN, token.COMMIT, token.ROLLBACK,
		token.END, token.TICK, token.ACK, token.NACK, token.REDRIVE, token.EXTEND, token.PAUSE,
		token.RESUME, token.CANCEL, token.ALTER:
		return true
	case token.IDENT:
		switch {
		case p.peek(1) == token.EQL && p.peek(2) == token.WATCH:
			return true
		case strings.EqualFold(p.lit, "constraint"):
			return (p.peek(1) == token.IDENT || p.peek(1).IsKeyword()) && p.peek(2) == token.COLON
		case strings.EqualFold(p.lit, "drop"):
			return p.peek(1) == token.IDENT && strings.EqualFold(p.peekLit(1), "constraint")
		}
	}
	return false
}

func (p *parser) parseStmtList(script *ast.Script) {
	for {
		for p.got(token.SEMI) {
		}
		if p.tok == token.EOF {
			return
		}
		start := p.pos
		if s := p.parseStmtRecover(); s != nil {
			script.Stmts = append(script.Stmts, s)
			if p.tok != token.SEMI && p.tok != token.EOF && !p.atStmtStart() {
				pos := p.pos
				func() {
					defer p.recoverStmt()
					p.errorExpected(pos, "';' or a new statement")
				}()
				p.sync(pos)
				script.Stmts[len(script.Stmts)-1] = &ast.BadStmt{From: start, To: p.prevEnd}
			}
		} else {
			p.sync(start)
			script.Stmts = append(script.Stmts, &ast.BadStmt{From: start, To: max(p.prevEnd, start)})
		}
	}
}

func (p *parser) recoverStmt() {
	if r := recover(); r != nil {
		if _, ok := r.(stmtError); !ok {
			panic(r)
		}
	}
}

// parseStmtRecover parses one statement, returning nil when it had an error.
func (p *parser) parseStmtRecover() (s ast.Stmt) {
	defer p.recoverStmt()
	p.depth = 0
	return p.parseStmt()
}

// sync skips to the next `;` (consumed), statement keyword or end of input. When the
// statement failed at its first token, it skips at least that token.
func (p *parser) sync(start token.Pos) {
	if p.pos == start && p.tok != token.EOF && p.tok != token.SEMI {
		p.next()
	}
	for p.tok != token.EOF && !p.atStmtStart() {
		if p.got(token.SEMI) {
			return
		}
		p.next()
	}
}

// ---------------------------------------------------------------------------
// Names

// ident parses an identifier (not a keyword).
func (p *parser) ident() *ast.Ident {
	if p.tok != token.IDENT {
		p.errorExpected(p.pos, "identifier")
	}
	id := &ast.Ident{NamePos: p.pos, Name: p.lit}
	p.next()
	return id
}

// word parses an identifier or a keyword used as a name, such as an attribute name
// after `.`, in declarations and in bodies, where keywords are not ambiguous.
func (p *parser) word(what string) *ast.Ident {
	if p.tok != token.IDENT && !p.tok.IsKeyword() {
		p.errorExpected(p.pos, what)
	}
	id := &ast.Ident{NamePos: p.pos, Name: p.lit}
	p.next()
	return id
}

func (p *parser) isWord() bool { return p.tok == token.IDENT || p.tok.IsKeyword() }

// lowerWord parses an option name or option word; these are case-insensitive and kept
// in lower case.
func (p *parser) lowerWord(what string) *ast.Ident {
	id := p.word(what)
	id.Name = strings.ToLower(id.Name)
	return id
}
