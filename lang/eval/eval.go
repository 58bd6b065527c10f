// Package eval compiles query-language expressions into Go closures over a row of
// variable bindings, and evaluates aggregates.
// It knows values, nodes and edges but not the graph: callers bind variables to slots.
package eval

import (
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/token"
)

// Binding is the value of one variable slot: a node, an edge, or nothing yet.
type Binding struct {
	Node *herald.Node
	Edge *herald.Edge
}

// Row holds one binding per slot of a Scope.
type Row []Binding

// Context carries what expressions read besides the row.
type Context struct {
	Params  map[string]herald.Value
	Now     time.Time
	Actor   herald.NodeID // session actor; "" outside a session
	Session string        // session id
	// Aggs holds the finished aggregate values while a projection evaluates a group.
	Aggs []herald.Value
	// Node looks up a node by id for `#id.attr`; nil means no graph is at hand.
	Node func(herald.NodeID) *herald.Node
	// Interrupt, when set, is asked every few thousand bindings a pattern scans whether
	// the statement must stop (its client went away); the error it returns ends it.
	Interrupt func() error
	// CanRead, when set, is asked once per node or edge type a pattern scans, for each
	// node an edge's endpoint binds, and for each node `#id.attr` reads; its error stops
	// the evaluation (a principal without the read grant on that type).
	CanRead func(typ string) error
}

// Func is a compiled expression.
type Func func(ctx *Context, row Row) (herald.Value, error)

// VarKind tells node variables from edge variables.
type VarKind uint8

// Variable kinds.
const (
	NodeVar VarKind = iota + 1
	EdgeVar
)

// Scope maps variable names to row slots.
type Scope struct {
	names map[string]int
	kinds []VarKind
	order []string
}

// NewScope returns an empty scope.
func NewScope() *Scope { return &Scope{names: map[string]int{}} }

// Declare adds a variable (or returns its existing slot).
func (s *Scope) Declare(name string, k VarKind) int {
	if i, ok := s.names[name]; ok {
		return i
	}
	s.names[name] = len(s.kinds)
	s.kinds = append(s.kinds, k)
	s.order = append(s.order, name)
	return len(s.kinds) - 1
}

// Lookup returns the slot and kind of name.
func (s *Scope) Lookup(name string) (int, VarKind, bool) {
	i, ok := s.names[name]
	if !ok {
		return 0, 0, false
	}
	return i, s.kinds[i], true
}

// Len returns the number of slots.
func (s *Scope) Len() int { return len(s.kinds) }

// Names returns the variable names in slot order.
func (s *Scope) Names() []string { return s.order }

// Agg is one aggregate call collected by a Compiler in aggregate mode.
type Agg struct {
	Name     string // COUNT, SUM, AVG, MIN, MAX (upper case)
	Distinct bool
	Star     bool
	Arg      Func // nil for COUNT(*)
	Where    Func // nil without a filter
}

// Compiler compiles expressions against a scope.
type Compiler struct {
	Scope *Scope
	File  *token.File
	// AllowAggs makes aggregate calls legal; each one is appended to Aggs and compiles to
	// a read of Context.Aggs.
	AllowAggs bool
	Aggs      []*Agg
	inAgg     bool
}

// Error builds a coded error positioned at pos.
func (c *Compiler) Error(code herald.Code, pos token.Pos, format string, args ...any) *herald.Error {
	return ErrorAt(c.File, code, pos, format, args...)
}

// ErrorAt builds a coded error carrying the line and column of pos in file (when both
// are known).
func ErrorAt(file *token.File, code herald.Code, pos token.Pos, format string, args ...any) *herald.Error {
	e := herald.Errorf(code, format, args...)
	if file != nil && pos.IsValid() {
		p := file.Position(pos)
		e = e.At(p.Line, p.Column)
	}
	return e
}

var aggNames = map[string]bool{"COUNT": true, "SUM": true, "AVG": true, "MIN": true, "MAX": true}

// IsAggregateCall reports whether e is a call of an aggregate function.
func IsAggregateCall(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	return ok && aggNames[strings.ToUpper(c.Fun.Name)]
}

// HasAggregate reports whether e contains an aggregate call.
func HasAggregate(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if x, ok := n.(ast.Expr); ok && IsAggregateCall(x) {
			found = true
		}
		return !found
	})
	return found
}

// Vars returns the names of the variables e mentions (including those inside aggregates).
func Vars(e ast.Expr) []string {
	seen := map[string]bool{}
	var out []string
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			ast.Inspect(x.X, visit)
			return false
		case *ast.CallExpr:
			for _, a := range x.Args {
				ast.Inspect(a, visit)
			}
			if x.Where != nil {
				ast.Inspect(x.Where, visit)
			}
			return false
		case *ast.Ident:
			if !seen[x.Name] {
				seen[x.Name] = true
				out = append(out, x.Name)
			}
		}
		return true
	}
	if e != nil {
		ast.Inspect(e, visit)
	}
	return out
}

// Compile compiles e.
func (c *Compiler) Compile(e ast.Expr) (Func, error) {
	switch x := e.(type) {
	case *ast.BasicLit:
		v, err := c.literal(x)
		if err != nil {
			return nil, err
		}
		return func(*Context, Row) (herald.Value, error) { return v, nil }, nil
	case *ast.ParamRef:
		name, pos := x.Name, x.Pos()
		return func(ctx *Context, _ Row) (herald.Value, error) {
			v, ok := ctx.Params[name]
			if !ok {
				return herald.Null, c.Error(herald.CodeMissingParameter, pos, "parameter $%s was not supplied", name)
			}
			return v, nil
		}, nil
	case *ast.NodeRef:
		if x.Name == "self" {
			pos := x.Pos()
			return func(ctx *Context, _ Row) (herald.Value, error) {
				if ctx.Actor == "" {
					return herald.Null, c.Error(herald.CodeSession, pos, "#self is only defined inside BEGIN SESSION AS ... END SESSION")
				}
				return herald.String(string(ctx.Actor)), nil
			}, nil
		}
		v := herald.String(x.Name)
		return func(*Context, Row) (herald.Value, error) { return v, nil }, nil
	case *ast.Ident:
		slot, kind, ok := c.Scope.Lookup(x.Name)
		if !ok {
			return nil, c.Error(herald.CodeUnknownVariable, x.Pos(), "unknown variable %s", x.Name)
		}
		if kind == EdgeVar {
			return func(_ *Context, row Row) (herald.Value, error) { return EdgeValue(row[slot].Edge), nil }, nil
		}
		return func(_ *Context, row Row) (herald.Value, error) { return NodeValue(row[slot].Node) }, nil
	case *ast.SelectorExpr:
		return c.selector(x)
	case *ast.ParenExpr:
		return c.Compile(x.X)
	case *ast.ListLit:
		elems := make([]Func, len(x.Elems))
		for i, el := range x.Elems {
			f, err := c.Compile(el)
			if err != nil {
				return nil, err
			}
			elems[i] = f
		}
		return func(ctx *Context, row Row) (herald.Value, error) {
			vs := make([]herald.Value, len(elems))
			for i, f := range elems {
				v, err := f(ctx, row)
				if err != nil {
					return herald.Null, err
				}
				vs[i] = v
			}
			return herald.List(vs...), nil
		}, nil
	case *ast.UnaryExpr:
		return c.unary(x)
	case *ast.BinaryExpr:
		return c.binary(x)
	case *ast.IsNullExpr:
		f, err := c.Compile(x.X)
		if err != nil {
			return nil, err
		}
		not := x.Not
		return func(ctx *Context, row Row) (herald.Value, error) {
			v, err := f(ctx, row)
			if err != nil {
				return herald.Null, err
			}
			return herald.Bool(v.IsNull() != not), nil
		}, nil
	case *ast.CallExpr:
		return c.call(x)
	case *ast.OrderingExpr:
		return nil, c.Error(herald.CodeInvalidQuery, x.Pos(), "attribute(...) is only valid as a watch ordering")
	case *ast.BadExpr:
		return nil, c.Error(herald.CodeSyntax, x.Pos(), "invalid expression")
	}
	return nil, c.Error(herald.CodeInvalidQuery, e.Pos(), "unsupported expression %T", e)
}

// NodeValue is the value of a bare node variable: a map of its id, type and attributes
// (those of its body included, which may have to be read from the store).
func NodeValue(n *herald.Node) (herald.Value, error) {
	if n == nil {
		return herald.Null, nil
	}
	attrs, err := n.AllAttrs()
	if err != nil {
		return herald.Null, err
	}
	keys := make([]string, len(attrs)+2)
	vals := make([]herald.Value, len(attrs)+2)
	keys[0], keys[1] = "id", "_type"
	vals[0], vals[1] = herald.String(string(n.ID)), herald.String(n.Type)
	for i, a := range attrs {
		keys[i+2], vals[i+2] = a.Name, a.Value
	}
	return herald.MapOf(keys, vals), nil
}

// EdgeValue is the value of a bare edge variable: its type, endpoints and attributes.
func EdgeValue(e *herald.Edge) herald.Value {
	if e == nil {
		return herald.Null
	}
	ends := make([]herald.Value, len(e.Endpoints))
	for i, id := range e.Endpoints {
		ends[i] = herald.String(string(id))
	}
	keys := make([]string, len(e.Attrs)+2)
	vals := make([]herald.Value, len(e.Attrs)+2)
	keys[0], keys[1] = "_type", "_endpoints"
	vals[0], vals[1] = herald.String(e.Type), herald.List(ends...)
	for i, a := range e.Attrs {
		keys[i+2], vals[i+2] = a.Name, a.Value
	}
	return herald.MapOf(keys, vals)
}

func (c *Compiler) selector(x *ast.SelectorExpr) (Func, error) {
	if ref, ok := x.X.(*ast.NodeRef); ok {
		return c.refSelector(ref, x.Sel.Name)
	}
	id, ok := x.X.(*ast.Ident)
	if !ok {
		return c.mapSelector(x)
	}
	slot, kind, ok := c.Scope.Lookup(id.Name)
	if !ok {
		return nil, c.Error(herald.CodeUnknownVariable, id.Pos(), "unknown variable %s", id.Name)
	}
	attr := x.Sel.Name
	if kind == EdgeVar {
		return func(_ *Context, row Row) (herald.Value, error) {
			e := row[slot].Edge
			if e == nil {
				return herald.Null, nil
			}
			return e.Attrs.Get(attr), nil
		}, nil
	}
	if attr == "id" {
		return func(_ *Context, row Row) (herald.Value, error) {
			n := row[slot].Node
			if n == nil {
				return herald.Null, nil
			}
			return herald.String(string(n.ID)), nil
		}, nil
	}
	return func(_ *Context, row Row) (herald.Value, error) {
		n := row[slot].Node
		if n == nil {
			return herald.Null, nil
		}
		return n.Attr(attr)
	}, nil
}

// mapSelector compiles `e.key` where e is not a variable: a key of the Map that e
// evaluates to, such as `o.customer.id` where customer is a Map attribute. A missing
// key, or a null e, reads as null; any other kind is an evaluation error.
func (c *Compiler) mapSelector(x *ast.SelectorExpr) (Func, error) {
	if _, ok := x.X.(*ast.BasicLit); ok {
		return nil, c.Error(herald.CodeInvalidQuery, x.Pos(), "attribute access needs a variable, a node or a map on the left of '.'")
	}
	f, err := c.Compile(x.X)
	if err != nil {
		return nil, err
	}
	key, pos := x.Sel.Name, x.Sel.Pos()
	return func(ctx *Context, row Row) (herald.Value, error) {
		v, err := f(ctx, row)
		switch {
		case err != nil:
			return herald.Null, err
		case v.Kind() == herald.KindMap:
			return v.MapGet(key), nil
		case v.IsNull():
			return herald.Null, nil
		}
		return herald.Null, c.Error(herald.CodeEvaluation, pos, ".%s needs a Map on its left, got %s", key, v.Kind())
	}, nil
}

// refSelector compiles `#id.attr` (and `#self.attr`): the node is looked up when the
// expression runs; a missing node reads as null.
func (c *Compiler) refSelector(ref *ast.NodeRef, attr string) (Func, error) {
	idf, err := c.Compile(ref)
	if err != nil {
		return nil, err
	}
	pos := ref.Pos()
	return func(ctx *Context, row Row) (herald.Value, error) {
		v, err := idf(ctx, row)
		if err != nil {
			return herald.Null, err
		}
		if ctx.Node == nil {
			return herald.Null, c.Error(herald.CodeInvalidQuery, pos, "#%s.%s needs the graph, which is not available here", v.AsString(), attr)
		}
		n := ctx.Node(herald.NodeID(v.AsString()))
		if n == nil {
			return herald.Null, nil
		}
		if ctx.CanRead != nil {
			if err := ctx.CanRead(n.Type); err != nil {
				return herald.Null, err
			}
		}
		switch {
		case attr == "id":
			return herald.String(string(n.ID)), nil
		}
		return n.Attr(attr)
	}, nil
}

func (c *Compiler) literal(x *ast.BasicLit) (herald.Value, error) {
	v, err := Literal(x)
	if err != nil {
		return herald.Null, c.Error(herald.CodeSyntax, x.Pos(), "%v", err)
	}
	return v, nil
}

// ParseDuration parses a duration literal such as 250ms, 30s, 5m, 1h or 1h30m.
func ParseDuration(s string) (time.Duration, error) { return time.ParseDuration(s) }
