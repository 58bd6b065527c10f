// Package scanner splits query text into the tokens of Herald's query language. It
// reports lexical errors with their positions and never stops early on bad input.
package scanner

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/herald-mq/herald/lang/token"
)

// ErrorHandler receives every lexical error with the position where it occurs.
type ErrorHandler func(pos token.Pos, msg string)

// Mode controls optional scanner behavior.
type Mode uint

// ScanComments makes Scan return `--` comments as COMMENT tokens instead of skipping them.
const ScanComments Mode = 1 << iota

const bom = 0xFEFF

// Scanner holds the state of one pass over a source text. Use Init before Scan.
type Scanner struct {
	src  []byte
	err  ErrorHandler
	mode Mode

	ch       rune // current character, -1 at end of input
	offset   int  // offset of ch
	rdOffset int  // offset of the character after ch

	// ErrorCount counts the errors reported so far.
	ErrorCount int
}

// Init prepares s to scan src. Errors go to err when it is non-nil.
func (s *Scanner) Init(src []byte, err ErrorHandler, mode Mode) {
	s.src = src
	s.err = err
	s.mode = mode
	s.ch = ' '
	s.offset = 0
	s.rdOffset = 0
	s.ErrorCount = 0
	s.next()
	if s.ch == bom {
		s.next()
	}
}

func (s *Scanner) next() {
	if s.rdOffset >= len(s.src) {
		s.offset = len(s.src)
		s.ch = -1
		return
	}
	s.offset = s.rdOffset
	r, w := rune(s.src[s.rdOffset]), 1
	if r >= utf8.RuneSelf {
		r, w = utf8.DecodeRune(s.src[s.rdOffset:])
		if r == utf8.RuneError && w == 1 {
			s.error(s.offset, "invalid UTF-8 encoding")
		}
	}
	s.rdOffset += w
	s.ch = r
}

func (s *Scanner) peek() byte {
	if s.rdOffset < len(s.src) {
		return s.src[s.rdOffset]
	}
	return 0
}

func (s *Scanner) error(offset int, msg string) {
	if s.err != nil {
		s.err(token.Pos(offset+1), msg)
	}
	s.ErrorCount++
}

func isLetter(ch rune) bool {
	return 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || ch == '_' ||
		ch >= utf8.RuneSelf && unicode.IsLetter(ch)
}

func isDigit(ch rune) bool {
	return '0' <= ch && ch <= '9' || ch >= utf8.RuneSelf && unicode.IsDigit(ch)
}

func isDecimal(ch rune) bool { return '0' <= ch && ch <= '9' }

// IsIdentifier reports whether name is a valid identifier that is not a keyword.
func IsIdentifier(name string) bool {
	if name == "" || token.Lookup(name) != token.IDENT {
		return false
	}
	for i, c := range name {
		if !isLetter(c) && (i == 0 || !isDigit(c)) {
			return false
		}
	}
	return true
}

func (s *Scanner) skipWhitespace() {
	for s.ch == ' ' || s.ch == '\t' || s.ch == '\n' || s.ch == '\r' || s.ch == '\f' {
		s.next()
	}
}

func (s *Scanner) scanWord() string {
	start := s.offset
	for isLetter(s.ch) || isDigit(s.ch) {
		s.next()
	}
	return string(s.src[start:s.offset])
}

func (s *Scanner) scanDigits() {
	for isDecimal(s.ch) {
		s.next()
	}
}

// scanNumber scans an INT, a FLOAT or a DURATION such as 250ms or 1h30m.
func (s *Scanner) scanNumber() (token.Token, string) {
	start := s.offset
	tok := token.INT
	s.scanDigits()
	if s.ch == '.' && isDecimal(rune(s.peek())) {
		tok = token.FLOAT
		s.next()
		s.scanDigits()
	}
	if s.ch == 'e' || s.ch == 'E' {
		p := s.peek()
		if isDecimal(rune(p)) || (p == '+' || p == '-') && s.rdOffset+1 < len(s.src) && isDecimal(rune(s.src[s.rdOffset+1])) {
			tok = token.FLOAT
			s.next()
			if s.ch == '+' || s.ch == '-' {
				s.next()
			}
			s.scanDigits()
			if isLetter(s.ch) || isDigit(s.ch) {
				s.scanWord()
				s.error(start, "bad number literal "+strconv.Quote(string(s.src[start:s.offset])))
			}
			return tok, string(s.src[start:s.offset])
		}
	}
	if !isLetter(s.ch) && !isDigit(s.ch) {
		return tok, string(s.src[start:s.offset])
	}
	// A letter right after a number starts a duration: one or more number+unit pairs.
	for {
		unitPos := s.offset
		unit := s.scanUnit()
		if !isDurationUnit(unit) {
			s.scanWord()
			if isDecimal(rune(unit[0])) || unit[0] == '_' {
				s.error(start, "bad number literal "+strconv.Quote(string(s.src[start:s.offset])))
			} else {
				s.error(unitPos, fmt.Sprintf("unknown duration unit %q (use ns, us, ms, s, m or h)", unit))
			}
			return token.DURATION, string(s.src[start:s.offset])
		}
		if !isDecimal(s.ch) {
			break
		}
		s.scanDigits()
		if s.ch == '.' && isDecimal(rune(s.peek())) {
			s.next()
			s.scanDigits()
		}
		if !isLetter(s.ch) {
			s.scanWord()
			s.error(start, "bad duration literal "+strconv.Quote(string(s.src[start:s.offset])))
			return token.DURATION, string(s.src[start:s.offset])
		}
	}
	if isLetter(s.ch) || isDigit(s.ch) {
		s.scanWord()
		s.error(start, "bad duration literal "+strconv.Quote(string(s.src[start:s.offset])))
	}
	return token.DURATION, string(s.src[start:s.offset])
}

// scanUnit scans the letters of a duration unit (stopping before digits).
func (s *Scanner) scanUnit() string {
	start := s.offset
	if !isLetter(s.ch) {
		s.next()
		return string(s.src[start:s.offset])
	}
	for isLetter(s.ch) {
		s.next()
	}
	return string(s.src[start:s.offset])
}

func isDurationUnit(u string) bool {
	switch u {
	case "ns", "us", "ms", "s", "m", "h":
		return true
	}
	return false
}

func (s *Scanner) scanEscape() {
	off := s.offset
	var n int
	switch s.ch {
	case 'a', 'b', 'f', 'n', 'r', 't', 'v', '\\', '"':
		s.next()
		return
	case 'u':
		n = 4
	case 'U':
		n = 8
	default:
		if s.ch < 0 {
			return // reported as unterminated string
		}
		s.error(off-1, "unknown escape sequence")
		return
	}
	s.next()
	var x uint32
	for i := 0; i < n; i++ {
		d, ok := hexValue(s.ch)
		if !ok {
			s.error(off-1, "escape sequence needs "+strconv.Itoa(n)+" hexadecimal digits")
			return
		}
		x = x<<4 | d
		s.next()
	}
	if x > unicode.MaxRune || 0xD800 <= x && x < 0xE000 {
		s.error(off-1, "escape sequence is invalid Unicode code point")
	}
}

func hexValue(ch rune) (uint32, bool) {
	switch {
	case '0' <= ch && ch <= '9':
		return uint32(ch - '0'), true
	case 'a' <= ch && ch <= 'f':
		return uint32(ch - 'a' + 10), true
	case 'A' <= ch && ch <= 'F':
		return uint32(ch - 'A' + 10), true
	}
	return 0, false
}

// scanString scans the rest of a string literal whose opening quote is at start.
func (s *Scanner) scanString(start int) string {
	for {
		ch := s.ch
		if ch == '\n' || ch < 0 {
			s.error(start, "string literal not terminated")
			break
		}
		s.next()
		if ch == '"' {
			break
		}
		if ch == '\\' {
			s.scanEscape()
		}
	}
	return string(s.src[start:s.offset])
}

// Scan returns the next token: its position, kind and literal text. The literal is the
// source text for identifiers, keywords, numbers, durations, strings (with quotes) and
// comments, the name without its sigil for PARAM and NODEREF, and empty otherwise.
// At the end of the input Scan returns EOF.
func (s *Scanner) Scan() (pos token.Pos, tok token.Token, lit string) {
scanAgain:
	s.skipWhitespace()
	pos = token.Pos(s.offset + 1)
	switch ch := s.ch; {
	case isLetter(ch):
		lit = s.scanWord()
		tok = token.Lookup(lit)
	case isDecimal(ch):
		tok, lit = s.scanNumber()
	default:
		s.next()
		switch ch {
		case -1:
			tok = token.EOF
		case '"':
			tok = token.STRING
			lit = s.scanString(int(pos) - 1)
		case '$', '#':
			tok = token.PARAM
			what := "parameter"
			if ch == '#' {
				tok, what = token.NODEREF, "node reference"
			}
			if !isLetter(s.ch) && !isDigit(s.ch) {
				s.error(int(pos)-1, fmt.Sprintf("expected %s name after %q", what, ch))
			}
			lit = s.scanWord()
		case '-':
			if s.ch == '-' {
				start := int(pos) - 1
				for s.ch != '\n' && s.ch >= 0 {
					s.next()
				}
				if s.mode&ScanComments == 0 {
					goto scanAgain
				}
				tok, lit = token.COMMENT, string(s.src[start:s.offset])
			} else {
				tok = token.SUB
			}
		case '+':
			tok = token.ADD
		case '*':
			tok = token.MUL
		case '/':
			tok = token.QUO
		case '%':
			tok = token.REM
		case '=':
			tok = token.EQL
			if s.ch == '>' {
				s.next()
				tok = token.ARROW
			}
		case '!':
			if s.ch == '=' {
				s.next()
				tok = token.NEQ
			} else {
				s.error(int(pos)-1, "illegal character '!' (use NOT or !=)")
				tok, lit = token.ILLEGAL, "!"
			}
		case '<':
			switch s.ch {
			case '=':
				s.next()
				tok = token.LEQ
			case '>':
				s.next()
				tok = token.NEQ
			default:
				tok = token.LSS
			}
		case '>':
			if s.ch == '=' {
				s.next()
				tok = token.GEQ
			} else {
				tok = token.GTR
			}
		case '(':
			tok = token.LPAREN
		case ')':
			tok = token.RPAREN
		case '[':
			tok = token.LBRACK
		case ']':
			tok = token.RBRACK
		case '{':
			tok = token.LBRACE
		case '}':
			tok = token.RBRACE
		case ',':
			tok = token.COMMA
		case '.':
			tok = token.PERIOD
		case ':':
			tok = token.COLON
		case ';':
			tok = token.SEMI
		case '?':
			tok = token.QUEST
		default:
			if !(ch == utf8.RuneError && s.offset-int(pos)+1 == 1) { // invalid UTF-8 is already reported
				s.error(int(pos)-1, fmt.Sprintf("illegal character %#U", ch))
			}
			tok, lit = token.ILLEGAL, string(s.src[int(pos)-1:s.offset])
		}
	}
	return pos, tok, lit
}

// Unquote returns the value of a STRING literal as scanned (with its quotes).
func Unquote(lit string) (string, error) {
	return strconv.Unquote(lit)
}
