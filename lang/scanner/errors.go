package scanner

import (
	"fmt"
	"sort"

	"github.com/herald-mq/herald/lang/token"
)

// Error is one syntax error at a resolved source position.
type Error struct {
	Pos token.Position
	Msg string
}

// Error formats the error as `line:col: message`.
func (e *Error) Error() string {
	if e.Pos.IsValid() {
		return e.Pos.String() + ": " + e.Msg
	}
	return e.Msg
}

// ErrorList is a list of syntax errors. The zero value is an empty list ready to use.
type ErrorList []*Error

// Add appends an error at pos.
func (l *ErrorList) Add(pos token.Position, msg string) {
	*l = append(*l, &Error{Pos: pos, Msg: msg})
}

// Reset empties the list.
func (l *ErrorList) Reset() { *l = (*l)[:0] }

func (l ErrorList) Len() int      { return len(l) }
func (l ErrorList) Swap(i, j int) { l[i], l[j] = l[j], l[i] }
func (l ErrorList) Less(i, j int) bool {
	a, b := l[i].Pos, l[j].Pos
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	if a.Column != b.Column {
		return a.Column < b.Column
	}
	return l[i].Msg < l[j].Msg
}

// Sort orders the list by position. Errors at the same position are ordered by message.
func (l ErrorList) Sort() { sort.Stable(l) }

// RemoveMultiples sorts the list and keeps only the first error of every line.
func (l *ErrorList) RemoveMultiples() {
	l.Sort()
	var last int // line of the last kept error; lines start at 1
	i := 0
	for _, e := range *l {
		if e.Pos.Line != last || !e.Pos.IsValid() {
			last = e.Pos.Line
			(*l)[i] = e
			i++
		}
	}
	*l = (*l)[:i]
}

// Error implements the error interface: the first error and how many more follow.
func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	case 2:
		return fmt.Sprintf("%s (and 1 more error)", l[0])
	}
	return fmt.Sprintf("%s (and %d more errors)", l[0], len(l)-1)
}

// Err returns nil for an empty list and the list itself otherwise.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}
