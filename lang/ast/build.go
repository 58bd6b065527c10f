package ast

import (
	"fmt"
	"strings"
	"time"

	"github.com/herald-mq/herald/lang/token"
)

// The constructors below build statements in code, without positions, for the printer
// to write out (lang/printer): a caller that composes a statement from values builds
// it as a tree and never splices text, so a value cannot change the statement's shape.

// NewIdent returns the name name.
func NewIdent(name string) *Ident { return &Ident{Name: name} }

// Str returns the string literal of s, quoted as the scanner reads it back.
func Str(s string) *BasicLit { return &BasicLit{Kind: token.STRING, Value: Quote(s)} }

// Int returns the integer literal of n (a negative n is the negation of its magnitude).
func Int(n int64) Expr {
	if n < 0 {
		return &UnaryExpr{Op: token.SUB, X: &BasicLit{Kind: token.INT, Value: strings.TrimPrefix(fmt.Sprint(n), "-")}}
	}
	return &BasicLit{Kind: token.INT, Value: fmt.Sprint(n)}
}

// Dur returns the duration literal of d in its largest whole unit (90s stays "90s",
// 2m is "2m"); d must not be negative.
func Dur(d time.Duration) *BasicLit {
	units := []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}}
	for _, u := range units {
		if d != 0 && d%u.d == 0 {
			return &BasicLit{Kind: token.DURATION, Value: fmt.Sprintf("%d%s", d/u.d, u.name)}
		}
	}
	return &BasicLit{Kind: token.DURATION, Value: fmt.Sprintf("%dns", int64(d))}
}

// Sel returns the attribute access x.attr.
func Sel(x Expr, attr string) *SelectorExpr { return &SelectorExpr{X: x, Sel: NewIdent(attr)} }

// Binary returns x op y.
func Binary(x Expr, op token.Token, y Expr) *BinaryExpr { return &BinaryExpr{X: x, Op: op, Y: y} }

// Param returns the parameter reference $name.
func Param(name string) *ParamRef { return &ParamRef{Name: name} }

// Ref returns the node reference #name.
func Ref(name string) *NodeRef { return &NodeRef{Name: name} }

// Call returns the call fun(args...).
func Call(fun string, args ...Expr) *CallExpr { return &CallExpr{Fun: NewIdent(fun), Args: args} }

// Option returns the watch option name: value (a bare flag when value is nil).
func Option(name string, value Expr) *WatchOption {
	return &WatchOption{Name: NewIdent(name), Value: value}
}

// Options returns one bracketed option group.
func Options(opts ...*WatchOption) *OptionList { return &OptionList{Options: opts} }

// Ordering returns the option value attribute(keys...).
func Ordering(keys ...*OrderItem) *OrderingExpr { return &OrderingExpr{Keys: keys} }

// Asc and Desc return ordering keys.
func Asc(x Expr) *OrderItem  { return &OrderItem{X: x, Dir: token.ASC} }
func Desc(x Expr) *OrderItem { return &OrderItem{X: x, Dir: token.DESC} }

// Bind returns the pattern of one node binding v: Type.
func Bind(v, typ string) *Pattern {
	return &Pattern{Elems: []PatternElem{&NodePattern{Var: NewIdent(v), Type: NewIdent(typ)}}}
}

// Returning returns RETURN xs.
func Returning(xs ...Expr) *ReturnClause {
	r := &ReturnClause{}
	for _, x := range xs {
		r.Items = append(r.Items, &ReturnItem{X: x})
	}
	return r
}

// Quote returns s as a string literal of the language: in double quotes, with `"`, `\`
// and control characters escaped.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
