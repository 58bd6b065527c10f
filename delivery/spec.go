package delivery

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// Defaults of consume-mode options.
const (
	DefaultAckTimeout      = 30 * time.Second
	DefaultMaxRedeliveries = 3
	DefaultBuffer          = 1000
)

// backoff is `exponential(initial, factor, max)` or `fixed(d)`; the zero value means none.
type backoff struct {
	initial time.Duration
	factor  float64
	max     time.Duration
}

// delay returns the wait before the redelivery that follows a failed attempt n (1-based).
func (b backoff) delay(n int) time.Duration {
	if b.initial <= 0 {
		return 0
	}
	d := float64(b.initial)
	for i := 1; i < n; i++ {
		d *= b.factor
		if b.max > 0 && d >= float64(b.max) {
			return b.max
		}
	}
	if b.max > 0 && time.Duration(d) > b.max {
		return b.max
	}
	return time.Duration(d)
}

// orderKey is one `expr [ASC|DESC]` of attribute ordering.
type orderKey struct {
	fn   eval.Func
	desc bool
}

// spec is a compiled consume watch: what matches, how it is ordered, and its settlement
// options. Members of one group share one spec.
type spec struct {
	text   string // canonical statement text (without a handle)
	// ident is what members of a group must agree on: the text and the values of its
	// $params (a group consumes what its statement selects with those values).
	ident string
	handle string // `h = WATCH …`: the stream's handle, "" when unbound
	shown  string // the statement as ALTER WATCH left it ("": text)

	// What it was compiled with, for ALTER WATCH.
	params     map[string]herald.Value
	actor      herald.NodeID
	session    string
	selfRef    *ast.NodeRef // the first #self in the statement, if any
	group      string       // "" for a group of one
	subjectVar string
	subjectTyp string
	plan       *graph.Plan // seeded on the subject variable, WHERE and filter included
	full       *graph.Plan // the same, unseeded: finds the backlog
	single     bool        // the pattern is the subject alone: decided on the node's image
	types      map[string]bool
	proj       *graph.Projection
	wholeNode  bool     // RETURN of the bare subject: the match is the node itself
	seedOnly   bool     // every node of the subject type matches, with plain queue data
	rowOnly    bool     // the projection reads the row alone (readsRowOnly)
	seedRow    eval.Row // seedOnly: the row project binds the subject in (under the service's lock)
	ctx        func() *eval.Context
	// warning, when set, is the first event of a stream that opens this statement (a
	// type nobody has declared or used yet, see herald.EventWarning).
	warning *herald.Error
	// canRead is the eval.Context.CanRead of the group's evaluations
	// (engine.WatchReads of its owner), set when the group is made; nil: no check.
	canRead func(string) error

	ordering        string // arrival, causal, attribute
	keys            []orderKey
	ackTimeout      time.Duration
	maxRedeliveries int
	deadLetter      herald.NodeID
	buffer          int
	initialNone     bool
	backoff         backoff
	fairness        eval.Func
	weight          eval.Func
	availableAt     eval.Func
}

// identity is a statement's text with its parameters' values, in the order of their
// names.
func identity(text string, params map[string]herald.Value) string {
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	b := []byte(text)
	for _, n := range names {
		b = append(b, 0)
		b = append(b, n...)
		b = append(b, 0)
		b = params[n].AppendBinary(b)
	}
	return string(b)
}

// describe shows a statement and its parameters for an error message.
func (s *spec) describe() string {
	if len(s.params) == 0 {
		return s.text
	}
	names := make([]string, 0, len(s.params))
	for n := range s.params {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = "$" + n + " = " + s.params[n].String()
	}
	return s.text + " with " + strings.Join(parts, ", ")
}

// effective is the statement the group runs: its text as altered by ALTER WATCH.
func (s *spec) effective() string {
	if s.shown != "" {
		return s.shown
	}
	return s.text
}

// compileSpec parses and compiles a consume-mode WATCH statement.
func compileSpec(e *engine.Engine, query string, params map[string]herald.Value, actor herald.NodeID, sessionID string) (*spec, error) {
	w, file, err := engine.ParseWatch(query, params)
	if err != nil {
		return nil, err
	}
	return compileWatch(w, file, params, actor, sessionID, e.Clock())
}

// firstSelf returns the first `#self` of w, or nil.
func firstSelf(w *ast.WatchStmt) *ast.NodeRef {
	var ref *ast.NodeRef
	ast.Inspect(w, func(n ast.Node) bool {
		if r, ok := n.(*ast.NodeRef); ok && r.Name == "self" && ref == nil {
			ref = r
		}
		return ref == nil
	})
	return ref
}

func compileWatch(w *ast.WatchStmt, file *token.File, params map[string]herald.Value, actor herald.NodeID, sessionID string, clk herald.Clock) (*spec, error) {
	errAt := func(code herald.Code, pos token.Pos, format string, args ...any) error {
		return eval.ErrorAt(file, code, pos, format, args...)
	}
	// The handle names the stream, not the watch: members of a group bind their own.
	bare := *w
	bare.Handle = nil
	s := &spec{
		text:            printer.String(&bare),
		selfRef:         firstSelf(w),
		ordering:        "arrival",
		ackTimeout:      DefaultAckTimeout,
		maxRedeliveries: DefaultMaxRedeliveries,
		buffer:          DefaultBuffer,
		types:           map[string]bool{},
	}
	s.params, s.actor, s.session = params, actor, sessionID
	s.ident = identity(s.text, params)
	s.ctx = func() *eval.Context {
		return &eval.Context{Params: params, Now: clk.Now().UTC(), Actor: actor, Session: sessionID, CanRead: s.canRead}
	}
	if w.Handle != nil {
		s.handle = w.Handle.Name
	}
	if w.OnMatch != nil {
		return nil, errAt(herald.CodeNotImplemented, w.OnMatch.Pos(), "ON MATCH DO triggers arrive with watch mode")
	}
	for _, el := range w.Pattern.Elems {
		switch x := el.(type) {
		case *ast.NodePattern:
			if s.subjectVar == "" {
				s.subjectVar, s.subjectTyp = x.Var.Name, x.Type.Name
			}
			s.types[x.Type.Name] = true
		case *ast.EdgePattern:
			s.types[x.Type.Name] = true
		}
	}
	if s.subjectVar == "" {
		return nil, errAt(herald.CodeInvalidQuery, w.Pattern.Pos(), "a consume watch needs a node variable: its first one is the message (the subject)")
	}
	s.single = len(w.Pattern.Elems) == 1

	mode := "watch"
	var filter ast.Expr
	var maxInFlight int
	for _, ol := range w.Options {
		for _, o := range ol.Options {
			name := strings.ToLower(o.Name.Name)
			val := o.Value
			word := ""
			if id, ok := val.(*ast.Ident); ok {
				word = strings.ToLower(id.Name)
			}
			constant := func() (herald.Value, error) {
				c := &eval.Compiler{Scope: eval.NewScope(), File: file}
				f, err := c.Compile(val)
				if err != nil {
					return herald.Null, err
				}
				return f(s.ctx(), nil)
			}
			switch name {
			case "mode":
				mode = word
			case "group":
				v, err := constant()
				if err != nil {
					return nil, err
				}
				s.group = v.AsString()
			case "ordering":
				switch x := val.(type) {
				case *ast.Ident:
					s.ordering = word
				case *ast.OrderingExpr:
					s.ordering = "attribute"
					for _, k := range x.Keys {
						s.keys = append(s.keys, orderKey{desc: k.Dir == token.DESC})
					}
				}
			case "ack_timeout", "max_redeliveries", "buffer", "max_in_flight":
				v, err := constant()
				if err != nil {
					return nil, err
				}
				switch name {
				case "ack_timeout":
					if v.Kind() != herald.KindDuration || v.AsDuration() <= 0 {
						return nil, errAt(herald.CodeInvalidQuery, val.Pos(), "ack_timeout must be a positive duration")
					}
					s.ackTimeout = v.AsDuration()
				case "max_redeliveries":
					if v.AsInt() < 0 {
						return nil, errAt(herald.CodeInvalidQuery, val.Pos(), "max_redeliveries must not be negative")
					}
					s.maxRedeliveries = int(v.AsInt())
				case "buffer":
					if v.AsInt() < 1 {
						return nil, errAt(herald.CodeInvalidQuery, val.Pos(), "buffer must be at least 1")
					}
					s.buffer = int(v.AsInt())
				case "max_in_flight":
					if v.AsInt() < 1 {
						return nil, errAt(herald.CodeInvalidQuery, val.Pos(), "max_in_flight must be at least 1")
					}
					maxInFlight = int(v.AsInt())
				}
			case "dead_letter":
				if ref, ok := val.(*ast.NodeRef); ok {
					s.deadLetter = herald.NodeID(ref.Name)
				}
			case "initial":
				switch x := val.(type) {
				case *ast.Ident:
					s.initialNone = word == "none"
				case *ast.CallExpr:
					return nil, errAt(herald.CodeInvalidQuery, x.Pos(), "initial: since(n) replays the change log and applies to watch mode; consume mode takes full or none")
				}
			case "on_full":
				if word != "block" {
					return nil, errAt(herald.CodeInvalidQuery, val.Pos(), "consume mode never drops or fails deliveries; on_full must be block (it stops delivering to a full consumer)")
				}
			case "delivery", "visibility", "deliver_on", "heartbeat":
				// Consume mode is always reliable and committed; these shape watch-mode streams.
			case "window":
				if word != "none" {
					return nil, errAt(herald.CodeInvalidQuery, val.Pos(), "windows apply to watch mode, not consume mode")
				}
			case "branch", "branches":
				return nil, errAt(herald.CodeNotImplemented, o.Pos(), "branches are not supported")
			case "filter":
				filter = val
			case "backoff":
				b, err := compileBackoff(val, file)
				if err != nil {
					return nil, err
				}
				s.backoff = b
			case "fairness", "weight", "available_at":
				// compiled below, once the pattern's scope exists
			default:
				return nil, errAt(herald.CodeInvalidQuery, o.Pos(), "unknown option %s", name)
			}
		}
	}
	if mode != "consume" {
		return nil, errAt(herald.CodeInvalidQuery, w.Pos(), "a consume stream serves [mode: consume] statements; a watch-mode WATCH is streamed by the watch endpoints (GET /v1/watch, the Watch RPC)")
	}
	if maxInFlight > 0 && maxInFlight < s.buffer {
		s.buffer = maxInFlight
	}
	where := w.Where
	if filter != nil {
		if where == nil {
			where = filter
		} else {
			where = &ast.BinaryExpr{X: &ast.ParenExpr{X: where}, Op: token.AND, Y: &ast.ParenExpr{X: filter}}
		}
	}
	var err error
	if s.plan, err = graph.CompileSeeded(w.Pattern, where, nil, s.subjectVar, file); err != nil {
		return nil, err
	}
	if s.full, err = graph.Compile(w.Pattern, where, nil, file); err != nil {
		return nil, err
	}
	c := &eval.Compiler{Scope: s.plan.Scope, File: file}
	for _, ol := range w.Options {
		for _, o := range ol.Options {
			var dst *eval.Func
			switch strings.ToLower(o.Name.Name) {
			case "fairness":
				dst = &s.fairness
			case "weight":
				dst = &s.weight
			case "available_at":
				dst = &s.availableAt
			case "ordering":
				if x, ok := o.Value.(*ast.OrderingExpr); ok {
					for i, k := range x.Keys {
						f, err := c.Compile(k.X)
						if err != nil {
							return nil, err
						}
						s.keys[i].fn = f
					}
				}
				continue
			default:
				continue
			}
			f, err := c.Compile(o.Value)
			if err != nil {
				return nil, err
			}
			*dst = f
		}
	}
	if w.Return == nil {
		return nil, errAt(herald.CodeInvalidQuery, w.Pos(), "a consume watch needs RETURN")
	}
	if s.proj, err = graph.CompileProjection(w.Return, nil, nil, nil, s.plan.Scope, file); err != nil {
		return nil, err
	}
	for _, it := range w.Return.Items {
		if eval.HasAggregate(it.X) {
			return nil, errAt(herald.CodeInvalidQuery, it.Pos(), "aggregates need a window, which is watch mode")
		}
	}
	if len(w.Return.Items) == 1 && w.Return.Items[0].Alias == nil {
		if id, ok := w.Return.Items[0].X.(*ast.Ident); ok && id.Name == s.subjectVar {
			s.wholeNode = true
		}
	}
	s.seedOnly = s.plan.SeedOnly() && s.keys == nil && s.fairness == nil && s.weight == nil && s.availableAt == nil
	s.rowOnly = readsRowOnly(w.Return)
	if s.seedOnly {
		s.seedRow = make(eval.Row, 1) // the subject is the plan's one slot
	}
	return s, nil
}

func compileBackoff(val ast.Expr, file *token.File) (backoff, error) {
	call, ok := val.(*ast.CallExpr)
	if !ok {
		return backoff{}, nil // none
	}
	c := &eval.Compiler{Scope: eval.NewScope(), File: file}
	args := make([]herald.Value, len(call.Args))
	for i, a := range call.Args {
		f, err := c.Compile(a)
		if err != nil {
			return backoff{}, err
		}
		if args[i], err = f(&eval.Context{}, nil); err != nil {
			return backoff{}, err
		}
	}
	switch strings.ToLower(call.Fun.Name) {
	case "fixed":
		return backoff{initial: args[0].AsDuration(), factor: 1}, nil
	case "exponential":
		b := backoff{initial: args[0].AsDuration(), factor: args[1].AsFloat(), max: args[2].AsDuration()}
		if b.factor < 1 {
			return backoff{}, eval.ErrorAt(file, herald.CodeInvalidQuery, call.Pos(), "the backoff factor must be at least 1")
		}
		return b, nil
	}
	return backoff{}, fmt.Errorf("unknown backoff %s", call.Fun.Name)
}

// lazy reports whether a group of this spec can read its backlog from the type's
// arrival index as it goes, instead of queueing every match up front: the pattern is
// the subject alone, ordered by arrival, without fairness keys.
func (s *spec) lazy() bool {
	return s.single && s.keys == nil && s.fairness == nil
}

// evalMatch evaluates the spec around node n in tx: whether it matches (nil when it
// does not), and if so its queue data and the binding row.
func (s *spec) evalMatch(tx *graph.Tx, n *herald.Node, intr func() error) (*matchInfo, eval.Row, error) {
	if n == nil || n.Type != s.subjectTyp {
		return nil, nil, nil
	}
	if s.seedOnly {
		// The queue shape: n is the one binding, and nothing needs evaluating. No row
		// is made: project binds n itself.
		return plainInfo, nil, nil
	}
	ctx := s.ctx()
	ctx.Node = tx.Node
	ctx.Interrupt = intr
	var row eval.Row
	_, err := s.plan.RunSeeded(tx, ctx, n, func(r eval.Row) error {
		if row == nil {
			row = append(eval.Row(nil), r...)
		}
		return nil
	})
	if err != nil || row == nil {
		return nil, nil, err
	}
	info, err := s.info(ctx, row)
	return info, row, err
}

// matchInfo is what a group's queues need of a match: its ordering keys, fairness key
// and weight, and when it becomes available. The match value itself is projected only
// when the message is leased, so a queued message holds no copy of its payload.
type matchInfo struct {
	keys        []herald.Value
	fairKey     string
	weight      int
	availableAt time.Time
}

// plainInfo is the queue data of a match of a spec with no keys, fairness or
// available_at: shared, since it never changes.
var plainInfo = &matchInfo{weight: 1}

func (s *spec) info(ctx *eval.Context, row eval.Row) (*matchInfo, error) {
	if s.keys == nil && s.fairness == nil && s.weight == nil && s.availableAt == nil {
		return plainInfo, nil
	}
	m := &matchInfo{weight: 1}
	for _, k := range s.keys {
		v, err := k.fn(ctx, row)
		if err != nil {
			return nil, err
		}
		m.keys = append(m.keys, v)
	}
	if s.fairness != nil {
		v, err := s.fairness(ctx, row)
		if err != nil {
			return nil, err
		}
		if v.Kind() == herald.KindString {
			m.fairKey = v.AsString()
		} else if !v.IsNull() {
			m.fairKey = v.String()
		}
	}
	if s.weight != nil {
		v, err := s.weight(ctx, row)
		if err != nil {
			return nil, err
		}
		if v.Kind() == herald.KindInt && v.AsInt() > 0 {
			m.weight = int(v.AsInt())
		}
	}
	if s.availableAt != nil {
		v, err := s.availableAt(ctx, row)
		if err != nil {
			return nil, err
		}
		if v.Kind() == herald.KindTimestamp {
			m.availableAt = v.AsTime()
		}
	}
	return m, nil
}

// project returns the match value of n's binding row: the watch's RETURN, or the
// subject node itself for `RETURN v`. A nil row is the queue shape's (seedOnly), where
// n is the one binding. It runs under the service's lock, which guards seedRow.
func (s *spec) project(tx *graph.Tx, n *herald.Node, row eval.Row) (herald.Value, error) {
	if row == nil {
		if s.wholeNode {
			return eval.NodeValue(n)
		}
		row = s.seedRow
		row[0].Node = n
		defer func() { row[0].Node = nil }()
	}
	if s.wholeNode {
		slot, _, _ := s.plan.Scope.Lookup(s.subjectVar)
		return eval.NodeValue(row[slot].Node)
	}
	ctx := &noContext // variables and their attributes read the row alone
	if !s.rowOnly {
		ctx = s.ctx()
		ctx.Node = tx.Node
	}
	if s.proj.Plain() {
		m, vals := herald.NewMapOf(s.proj.Columns) // the map and its values in one allocation
		if err := s.proj.SingleInto(ctx, row, vals); err != nil {
			return herald.Null, err
		}
		return m, nil
	}
	vals, err := s.proj.Single(ctx, row)
	if err != nil {
		return herald.Null, err
	}
	return herald.MapOf(s.proj.Columns, vals), nil
}

// noContext is the evaluation context of projections that read nothing but the row;
// they never write it, so every such projection shares it.
var noContext eval.Context

// readsRowOnly reports whether every item of r is a variable or a variable's attribute
// (`m`, `m.body`): it needs no clock, parameters or lookups, only the row.
func readsRowOnly(r *ast.ReturnClause) bool {
	for _, it := range r.Items {
		switch x := it.X.(type) {
		case *ast.Ident:
		case *ast.SelectorExpr:
			if _, ok := x.X.(*ast.Ident); !ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}
