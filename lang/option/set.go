package option

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/token"
)

// Defaults of the options that have a value without being given.
const (
	DefaultBuffer          = 1000
	DefaultAckTimeout      = 30 * time.Second
	DefaultMaxRedeliveries = 3
)

// Set is the options of one WATCH statement, decoded and checked for its mode. The
// options whose values are expressions over the pattern's variables (filter, ordering
// keys, fairness, weight, available_at) are kept as syntax for the compiler of the
// pattern; the others are plain values.
type Set struct {
	Mode     Mode
	Group    string
	Ordering string // arrival, causal, attribute
	// OrderKeys are the keys of `ordering: attribute(…)`.
	OrderKeys []*ast.OrderItem
	Reliable  bool // delivery: reliable
	Immediate bool // visibility: immediate
	PerTick   bool // deliver_on: tick
	// WinSize and WinSlide are the window's (zero: none); a tumbling window slides by
	// its size.
	WinSize, WinSlide time.Duration
	Buffer            int
	OnFull            string // drop, block, error
	AckTimeout        time.Duration
	MaxRedeliveries   int
	DeadLetter        string // a node id, "" for none
	Initial           string // full, none, since
	Since             uint64 // initial: since(n)
	Heartbeat         time.Duration
	Backoff           Backoff
	MaxInFlight       int
	Filter            ast.Expr
	Fairness          ast.Expr
	Weight            ast.Expr
	AvailableAt       ast.Expr
}

// Defaults returns the options of a statement of mode m that gives none.
func Defaults(m Mode) Set {
	s := Set{Mode: m, Ordering: "arrival", Buffer: DefaultBuffer, OnFull: "drop", Initial: "full",
		AckTimeout: DefaultAckTimeout, MaxRedeliveries: DefaultMaxRedeliveries}
	if m == Consume {
		s.OnFull, s.Reliable = "block", true
	}
	return s
}

// Backoff is `exponential(initial, factor, max)` or `fixed(d)`; the zero value means
// none.
type Backoff struct {
	Initial time.Duration
	Factor  float64
	Max     time.Duration
}

// Delay returns the wait before the redelivery that follows failed attempt n (1-based).
func (b Backoff) Delay(n int) time.Duration {
	if b.Initial <= 0 {
		return 0
	}
	d := float64(b.Initial)
	for i := 1; i < n; i++ {
		d *= b.Factor
		if b.Max > 0 && d >= float64(b.Max) {
			return b.Max
		}
	}
	if b.Max > 0 && time.Duration(d) > b.Max {
		return b.Max
	}
	return time.Duration(d)
}

// ErrorKind classifies an Error.
type ErrorKind int

// Kinds of Error.
const (
	Invalid     ErrorKind = iota // the statement asks for something its mode cannot do
	Unsupported                  // the option is understood but not implemented
	Syntax                       // a literal that cannot be read (out of range)
)

// Error is a refused option: where and why.
type Error struct {
	Pos  token.Pos
	Kind ErrorKind
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func invalid(pos token.Pos, format string, args ...any) *Error {
	return &Error{Pos: pos, Kind: Invalid, Msg: fmt.Sprintf(format, args...)}
}

// Decode decodes and checks the options of w for mode m. The statement's own mode
// option must agree with m: a watch-mode stream refuses `mode: consume` where it is
// written, a consume stream refuses any statement not in consume mode.
func Decode(w *ast.WatchStmt, m Mode) (*Set, *Error) {
	d := &decoder{mode: m, set: Defaults(m)}
	for _, ol := range w.Options {
		for _, o := range ol.Options {
			opt := Lookup(strings.ToLower(o.Name.Name))
			if opt == nil {
				return nil, invalid(o.Pos(), "unknown option %s", strings.ToLower(o.Name.Name))
			}
			use := opt.Watch
			if m == Consume {
				use = opt.Consume
			}
			switch use {
			case Ignore:
				continue
			case Refuse:
				return nil, invalid(o.Pos(), "%s is a consume-mode option; this watch is in watch mode", opt.Name)
			}
			if err := opt.decode(d, o); err != nil {
				return nil, err
			}
		}
	}
	if m == Consume && ModeOf(w) != Consume {
		return nil, invalid(w.Pos(), "a consume stream serves [mode: consume] statements; a watch-mode WATCH is streamed by the watch endpoints (GET /v1/watch, the Watch RPC)")
	}
	if d.maxInFlight > 0 && d.maxInFlight < d.set.Buffer {
		d.set.Buffer = d.maxInFlight
	}
	d.set.MaxInFlight = d.maxInFlight
	return &d.set, nil
}

type decoder struct {
	mode        Mode
	set         Set
	maxInFlight int
}

// word returns an identifier value in lower case ("" for any other value).
func word(x ast.Expr) string {
	if id, ok := x.(*ast.Ident); ok {
		return strings.ToLower(id.Name)
	}
	return ""
}

// intOf reads an integer literal.
func intOf(x ast.Expr) (int64, *Error) {
	lit, ok := x.(*ast.BasicLit)
	if !ok || lit.Kind != token.INT {
		return 0, invalid(x.Pos(), "an integer is needed here")
	}
	i, err := strconv.ParseInt(lit.Value, 10, 64)
	if err != nil {
		return 0, &Error{Pos: x.Pos(), Kind: Syntax, Msg: fmt.Sprintf("integer literal %s out of range", lit.Value)}
	}
	return i, nil
}

// durationOf reads a duration literal.
func durationOf(x ast.Expr) (time.Duration, *Error) {
	lit, ok := x.(*ast.BasicLit)
	if !ok || lit.Kind != token.DURATION {
		return 0, invalid(x.Pos(), "a duration is needed here")
	}
	d, err := time.ParseDuration(lit.Value)
	if err != nil {
		return 0, &Error{Pos: x.Pos(), Kind: Syntax, Msg: fmt.Sprintf("bad duration literal %s", lit.Value)}
	}
	return d, nil
}

// numberOf reads an integer or float literal.
func numberOf(x ast.Expr) (float64, *Error) {
	lit, ok := x.(*ast.BasicLit)
	if !ok || (lit.Kind != token.INT && lit.Kind != token.FLOAT) {
		return 0, invalid(x.Pos(), "a number is needed here")
	}
	f, err := strconv.ParseFloat(lit.Value, 64)
	if err != nil {
		return 0, &Error{Pos: x.Pos(), Kind: Syntax, Msg: fmt.Sprintf("bad float literal %s", lit.Value)}
	}
	return f, nil
}
