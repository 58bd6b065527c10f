// Package token defines the lexical tokens of Herald's query language and source
// positions. A Pos is a compact byte offset; a File resolves it to line and column.
package token

import (
	"fmt"
	"sort"
	"strings"
)

// Token is a lexical token kind.
type Token int

// Tokens. Keywords are case-insensitive in source.
const (
	ILLEGAL Token = iota
	EOF
	COMMENT

	literalBeg
	IDENT    // status
	INT      // 42
	FLOAT    // 1.5
	STRING   // "abc"
	DURATION // 30s, 250ms, 1h30m
	PARAM    // $name
	NODEREF  // #name
	literalEnd

	operatorBeg
	ADD    // +
	SUB    // -
	MUL    // *
	QUO    // /
	REM    // %
	EQL    // =
	NEQ    // != or <>
	LSS    // <
	LEQ    // <=
	GTR    // >
	GEQ    // >=
	LPAREN // (
	RPAREN // )
	LBRACK // [
	RBRACK // ]
	LBRACE // {
	RBRACE // }
	COMMA  // ,
	PERIOD // .
	COLON  // :
	SEMI   // ;
	QUEST  // ?
	ARROW  // =>
	operatorEnd

	keywordBeg
	AND
	OR
	NOT
	IN
	IS
	NULL
	TRUE
	FALSE
	NODE
	EDGE
	SPAWN
	KILL
	LINK
	UNLINK
	SET
	MATCH
	WHERE
	RETURN
	RETURNING
	ORDER
	BY
	ASC
	DESC
	LIMIT
	OFFSET
	AS
	DISTINCT
	BEGIN
	COMMIT
	ROLLBACK
	SESSION
	END
	TICK
	WATCH
	ACK
	NACK
	REDRIVE
	EXTEND
	PAUSE
	RESUME
	CANCEL
	ALTER
	ON
	DO
	keywordEnd
)

var tokens = [...]string{
	ILLEGAL:  "ILLEGAL",
	EOF:      "EOF",
	COMMENT:  "COMMENT",
	IDENT:    "identifier",
	INT:      "integer",
	FLOAT:    "float",
	STRING:   "string",
	DURATION: "duration",
	PARAM:    "parameter",
	NODEREF:  "node reference",

	ADD:    "+",
	SUB:    "-",
	MUL:    "*",
	QUO:    "/",
	REM:    "%",
	EQL:    "=",
	NEQ:    "!=",
	LSS:    "<",
	LEQ:    "<=",
	GTR:    ">",
	GEQ:    ">=",
	LPAREN: "(",
	RPAREN: ")",
	LBRACK: "[",
	RBRACK: "]",
	LBRACE: "{",
	RBRACE: "}",
	COMMA:  ",",
	PERIOD: ".",
	COLON:  ":",
	SEMI:   ";",
	QUEST:  "?",
	ARROW:  "=>",

	AND:       "AND",
	OR:        "OR",
	NOT:       "NOT",
	IN:        "IN",
	IS:        "IS",
	NULL:      "NULL",
	TRUE:      "TRUE",
	FALSE:     "FALSE",
	NODE:      "NODE",
	EDGE:      "EDGE",
	SPAWN:     "SPAWN",
	KILL:      "KILL",
	LINK:      "LINK",
	UNLINK:    "UNLINK",
	SET:       "SET",
	MATCH:     "MATCH",
	WHERE:     "WHERE",
	RETURN:    "RETURN",
	RETURNING: "RETURNING",
	ORDER:     "ORDER",
	BY:        "BY",
	ASC:       "ASC",
	DESC:      "DESC",
	LIMIT:     "LIMIT",
	OFFSET:    "OFFSET",
	AS:        "AS",
	DISTINCT:  "DISTINCT",
	BEGIN:     "BEGIN",
	COMMIT:    "COMMIT",
	ROLLBACK:  "ROLLBACK",
	SESSION:   "SESSION",
	END:       "END",
	TICK:      "TICK",
	WATCH:     "WATCH",
	ACK:       "ACK",
	NACK:      "NACK",
	REDRIVE:   "REDRIVE",
	EXTEND:    "EXTEND",
	PAUSE:     "PAUSE",
	RESUME:    "RESUME",
	CANCEL:    "CANCEL",
	ALTER:     "ALTER",
	ON:        "ON",
	DO:        "DO",
}

// String returns the token's spelling for operators and keywords, else its class name.
func (t Token) String() string {
	if 0 <= t && int(t) < len(tokens) && tokens[t] != "" {
		return tokens[t]
	}
	return fmt.Sprintf("token(%d)", int(t))
}

var keywords = func() map[string]Token {
	m := make(map[string]Token)
	for t := keywordBeg + 1; t < keywordEnd; t++ {
		m[tokens[t]] = t
	}
	return m
}()

// Lookup maps an identifier to its keyword token (case-insensitively) or IDENT.
// Option names and option values inside `[...]` (mode, consume, ...) are identifiers,
// not keywords, so they stay usable as attribute names.
func Lookup(ident string) Token {
	if t, ok := keywords[strings.ToUpper(ident)]; ok {
		return t
	}
	return IDENT
}

// IsLiteral reports whether t is a literal class (identifier, number, string, ...).
func (t Token) IsLiteral() bool { return literalBeg < t && t < literalEnd }

// IsOperator reports whether t is an operator or delimiter.
func (t Token) IsOperator() bool { return operatorBeg < t && t < operatorEnd }

// IsKeyword reports whether t is a keyword.
func (t Token) IsKeyword() bool { return keywordBeg < t && t < keywordEnd }

// Precedences of binary operators; higher binds tighter.
const (
	LowestPrec  = 0
	UnaryPrec   = 6
	HighestPrec = 7
)

// Precedence returns the binary-operator precedence of t, or LowestPrec when t is not a
// binary operator.
func (t Token) Precedence() int {
	switch t {
	case OR:
		return 1
	case AND:
		return 2
	case EQL, NEQ, LSS, LEQ, GTR, GEQ, IN, IS:
		return 3
	case ADD, SUB:
		return 4
	case MUL, QUO, REM:
		return 5
	}
	return LowestPrec
}

// Pos is a compact source position: the byte offset plus one. The zero Pos is NoPos.
type Pos int

// NoPos is the zero position, meaning "unknown".
const NoPos Pos = 0

// IsValid reports whether p is a known position.
func (p Pos) IsValid() bool { return p != NoPos }

// Position is a resolved source position.
type Position struct {
	Offset int // byte offset, from 0
	Line   int // from 1
	Column int // from 1, in bytes
}

// IsValid reports whether the position is known.
func (p Position) IsValid() bool { return p.Line > 0 }

func (p Position) String() string {
	if !p.IsValid() {
		return "-"
	}
	return fmt.Sprintf("%d:%d", p.Line, p.Column)
}

// File records line starts of one source text so positions resolve to line:col.
type File struct {
	size  int
	lines []int // offsets of line starts; lines[0] == 0
}

// NewFile indexes src.
func NewFile(src []byte) *File {
	f := &File{size: len(src), lines: []int{0}}
	for i, c := range src {
		if c == '\n' {
			f.lines = append(f.lines, i+1)
		}
	}
	return f
}

// Pos converts a byte offset into a Pos.
func (f *File) Pos(offset int) Pos { return Pos(offset + 1) }

// Position resolves p.
func (f *File) Position(p Pos) Position {
	if !p.IsValid() {
		return Position{}
	}
	off := int(p) - 1
	if off > f.size {
		off = f.size
	}
	i := sort.Search(len(f.lines), func(i int) bool { return f.lines[i] > off }) - 1
	return Position{Offset: off, Line: i + 1, Column: off - f.lines[i] + 1}
}
