// Package option is the one table of WATCH options: each option's name, the shape of
// its value, what each mode does with it, its default and its check. The parser reads
// the shapes to parse option lists; the standing query decodes and checks a
// statement's options for its mode with Decode; surfaces and the command line read a
// statement's mode with ModeOf.
package option

import (
	"strings"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/token"
)

// Mode is what a WATCH does with its matches: stream changes (Watch) or lease each
// match to one consumer (Consume).
type Mode int

// The two modes of a WATCH.
const (
	Watch Mode = iota
	Consume
)

// String returns the mode as the mode option spells it.
func (m Mode) String() string {
	if m == Consume {
		return "consume"
	}
	return "watch"
}

// Use is what a mode does with an option.
type Use int

const (
	// Take decodes and checks the option.
	Take Use = iota
	// Ignore accepts the option and disregards it (consume mode is always reliable and
	// committed, so the options that shape watch-mode streams mean nothing there).
	Ignore
	// Refuse answers that the option belongs to the other mode.
	Refuse
)

// Kind is the kind of a value shape.
type Kind int

// Value shapes.
const (
	Words    Kind = iota // one of Shape.Words, in any letter case
	Literal              // a literal of Shape.Token
	Expr                 // any expression
	Ordering             // arrival | causal | attribute(expr [ASC|DESC], …)
	Choice               // one of Shape.Words or one of Shape.Calls
	Name                 // an identifier or a string, spelled as written
	Flag                 // no value at all
)

// Shape is what the parser accepts as an option's value.
type Shape struct {
	Kind  Kind
	Words []string    // Words, Choice
	Token token.Token // Literal
	Calls []Call      // Choice
	// Expected is what the parser says it expected when the value fits no alternative
	// (Ordering, Choice, Name).
	Expected string
}

// Call is a call form of a Choice: a name and, per argument, the literal kinds it takes.
type Call struct {
	Name string
	Args [][]token.Token
}

// Option is one row of the table.
type Option struct {
	Name  string
	Shape Shape
	// Watch and Consume say what each mode does with the option.
	Watch, Consume Use
	// Default is the value the option has when it is not given, as the documentation
	// writes it ("" when it has none).
	Default string
	// Alter reports whether ALTER WATCH may change the option of a live consume watch:
	// the failure handling may change; what decides which messages a group holds, in
	// what order, does not. (ALTER WATCH of a watch-mode stream may change any option
	// but the window.)
	Alter bool
	// decode checks the option's value for the statement's mode and records it in a Set.
	decode func(d *decoder, o *ast.WatchOption) *Error
}

var (
	duration = []token.Token{token.DURATION}
	integer  = []token.Token{token.INT}
	number   = []token.Token{token.FLOAT, token.INT}
)

func words(ws ...string) Shape      { return Shape{Kind: Words, Words: ws} }
func literal(tok token.Token) Shape { return Shape{Kind: Literal, Token: tok} }

// table lists the options of WATCH and ALTER WATCH, in the order the documentation
// gives them.
var table = []*Option{
	{Name: "mode", Shape: words("watch", "consume"), Default: "watch", decode: decodeMode},
	{Name: "group", Shape: literal(token.STRING), Consume: Take, Watch: Ignore, decode: decodeGroup},
	{Name: "ordering", Shape: Shape{Kind: Ordering, Expected: "'arrival', 'causal' or 'attribute(...)'"}, Default: "arrival", decode: decodeOrdering},
	{Name: "delivery", Shape: words("best_effort", "reliable"), Consume: Ignore, Default: "best_effort", decode: decodeDelivery},
	{Name: "visibility", Shape: words("committed", "immediate"), Consume: Ignore, Default: "committed", decode: decodeVisibility},
	{Name: "window", Shape: Shape{Kind: Choice, Words: []string{"none"}, Calls: []Call{{"tumbling", [][]token.Token{duration}}, {"sliding", [][]token.Token{duration, duration}}},
		Expected: "'none', 'tumbling(duration)' or 'sliding(duration, duration)'"}, Default: "none", decode: decodeWindow},
	{Name: "buffer", Shape: literal(token.INT), Default: "1000", decode: decodeBuffer},
	{Name: "on_full", Shape: words("drop", "block", "error"), Default: "drop (consume mode: block)", decode: decodeOnFull},
	{Name: "ack_timeout", Shape: literal(token.DURATION), Watch: Refuse, Default: "30s", Alter: true, decode: decodeAckTimeout},
	{Name: "max_redeliveries", Shape: literal(token.INT), Watch: Refuse, Default: "3", Alter: true, decode: decodeMaxRedeliveries},
	{Name: "backoff", Shape: Shape{Kind: Choice, Words: []string{"none"}, Calls: []Call{{"fixed", [][]token.Token{duration}}, {"exponential", [][]token.Token{duration, number, duration}}},
		Expected: "'none', 'fixed(duration)' or 'exponential(initial, factor, max)'"}, Watch: Refuse, Default: "none", Alter: true, decode: decodeBackoff},
	{Name: "dead_letter", Shape: literal(token.NODEREF), Watch: Refuse, Alter: true, decode: decodeDeadLetter},
	{Name: "initial", Shape: Shape{Kind: Choice, Words: []string{"full", "none"}, Calls: []Call{{"since", [][]token.Token{integer}}},
		Expected: "'full', 'none' or 'since(tick)'"}, Default: "full", decode: decodeInitial},
	{Name: "filter", Shape: Shape{Kind: Expr}, decode: decodeFilter},
	{Name: "branch", Shape: Shape{Kind: Name, Expected: "branch name (identifier or string)"}, decode: unsupported},
	{Name: "branches", Shape: words("all"), decode: unsupported},
	{Name: "deliver_on", Shape: words("tick", "commit"), Consume: Ignore, Default: "commit", decode: decodeDeliverOn},
	{Name: "fairness", Shape: Shape{Kind: Expr}, Watch: Refuse, decode: decodeFairness},
	{Name: "weight", Shape: Shape{Kind: Expr}, Watch: Refuse, decode: decodeWeight},
	{Name: "available_at", Shape: Shape{Kind: Expr}, Watch: Refuse, decode: decodeAvailableAt},
	{Name: "max_in_flight", Shape: literal(token.INT), Watch: Refuse, decode: decodeMaxInFlight},
	{Name: "heartbeat", Shape: literal(token.DURATION), Consume: Ignore, decode: decodeHeartbeat},
}

var byName = func() map[string]*Option {
	m := make(map[string]*Option, len(table))
	for _, o := range table {
		m[o.Name] = o
	}
	return m
}()

// Lookup returns the WATCH option name (in lower case), or nil when there is none.
func Lookup(name string) *Option { return byName[name] }

// All returns the WATCH options in the order the documentation gives them. The slice
// and its options must not be changed.
func All() []*Option { return table }

// The options of NACK and EXTEND, which settle one delivery.
var (
	nack = map[string]Shape{
		"no_retry": {Kind: Flag},
		"delay":    literal(token.DURATION),
	}
	extend = map[string]Shape{
		"by": literal(token.DURATION),
	}
)

// NackShape returns the shape of the NACK option name; ok is false when NACK has none.
func NackShape(name string) (Shape, bool) { s, ok := nack[name]; return s, ok }

// ExtendShape returns the shape of the EXTEND option name; ok is false when EXTEND has
// none.
func ExtendShape(name string) (Shape, bool) { s, ok := extend[name]; return s, ok }

// ModeOf returns the mode a WATCH asks for: Consume with `[mode: consume]`, else Watch.
func ModeOf(w *ast.WatchStmt) Mode {
	if o := Find(w.Options, "mode"); o != nil {
		if id, ok := o.Value.(*ast.Ident); ok && strings.EqualFold(id.Name, "consume") {
			return Consume
		}
	}
	return Watch
}

// Find returns the option name (compared without case) of the option groups lists, or
// nil.
func Find(lists []*ast.OptionList, name string) *ast.WatchOption {
	for _, ol := range lists {
		for _, o := range ol.Options {
			if strings.EqualFold(o.Name.Name, name) {
				return o
			}
		}
	}
	return nil
}

// Merge is what ALTER WATCH … SET makes of a statement's options: one option group
// holding every option of base, each replaced by the same option of over (names
// compared without case), then the options only over has, in order of appearance.
func Merge(base, over []*ast.OptionList) []*ast.OptionList {
	merged := map[string]*ast.WatchOption{}
	var order []string
	for _, ol := range append(append([]*ast.OptionList{}, base...), over...) {
		for _, o := range ol.Options {
			name := strings.ToLower(o.Name.Name)
			if _, ok := merged[name]; !ok {
				order = append(order, name)
			}
			merged[name] = o
		}
	}
	list := &ast.OptionList{}
	for _, name := range order {
		list.Options = append(list.Options, merged[name])
	}
	return []*ast.OptionList{list}
}
