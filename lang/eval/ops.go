package eval

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/token"
)

// Literal converts a literal node into its value.
func Literal(x *ast.BasicLit) (herald.Value, error) {
	switch x.Kind {
	case token.INT:
		i, err := strconv.ParseInt(x.Value, 10, 64)
		if err != nil {
			return herald.Null, fmt.Errorf("integer literal %s out of range", x.Value)
		}
		return herald.Int(i), nil
	case token.FLOAT:
		f, err := strconv.ParseFloat(x.Value, 64)
		if err != nil {
			return herald.Null, fmt.Errorf("bad float literal %s", x.Value)
		}
		return herald.Float(f), nil
	case token.STRING:
		s, err := strconv.Unquote(x.Value)
		if err != nil {
			return herald.Null, fmt.Errorf("bad string literal %s", x.Value)
		}
		return herald.String(s), nil
	case token.DURATION:
		d, err := ParseDuration(x.Value)
		if err != nil {
			return herald.Null, fmt.Errorf("bad duration literal %s", x.Value)
		}
		return herald.Duration(d), nil
	case token.TRUE:
		return herald.Bool(true), nil
	case token.FALSE:
		return herald.Bool(false), nil
	case token.NULL:
		return herald.Null, nil
	}
	return herald.Null, fmt.Errorf("unknown literal kind %s", x.Kind)
}

// Truthy reports whether v counts as true in WHERE and filters: only Bool true does;
// null (unknown) does not.
func Truthy(v herald.Value) bool { return v.AsBool() }

func (c *Compiler) unary(x *ast.UnaryExpr) (Func, error) {
	f, err := c.Compile(x.X)
	if err != nil {
		return nil, err
	}
	pos := x.Pos()
	switch x.Op {
	case token.NOT:
		return func(ctx *Context, row Row) (herald.Value, error) {
			v, err := f(ctx, row)
			if err != nil || v.IsNull() {
				return herald.Null, err
			}
			if v.Kind() != herald.KindBool {
				return herald.Null, c.Error(herald.CodeEvaluation, pos, "NOT needs a Bool, got %s", v.Kind())
			}
			return herald.Bool(!v.AsBool()), nil
		}, nil
	case token.SUB:
		return func(ctx *Context, row Row) (herald.Value, error) {
			v, err := f(ctx, row)
			if err != nil || v.IsNull() {
				return herald.Null, err
			}
			switch v.Kind() {
			case herald.KindInt:
				if v.AsInt() == math.MinInt64 {
					return herald.Null, c.Error(herald.CodeEvaluation, pos, "integer overflow: -(%d) does not fit in an Int (64 bits)", v.AsInt())
				}
				return herald.Int(-v.AsInt()), nil
			case herald.KindFloat:
				return herald.Float(-v.AsFloat()), nil
			case herald.KindDuration:
				return herald.Duration(-v.AsDuration()), nil
			}
			return herald.Null, c.Error(herald.CodeEvaluation, pos, "cannot negate %s", v.Kind())
		}, nil
	}
	return nil, c.Error(herald.CodeInvalidQuery, pos, "unknown unary operator %s", x.Op)
}

// nodeIdent reports whether e is a bare node variable, which compares by id.
func (c *Compiler) nodeIdent(e ast.Expr) (int, bool) {
	for {
		p, ok := e.(*ast.ParenExpr)
		if !ok {
			break
		}
		e = p.X
	}
	id, ok := e.(*ast.Ident)
	if !ok {
		return 0, false
	}
	slot, kind, ok := c.Scope.Lookup(id.Name)
	return slot, ok && kind == NodeVar
}

// Operand compiles one side of an equality comparison; a bare node variable yields its
// id so that `t = #t1` and `a = b` compare node identities.
func (c *Compiler) Operand(e ast.Expr) (Func, error) {
	if slot, ok := c.nodeIdent(e); ok {
		return func(_ *Context, row Row) (herald.Value, error) {
			if n := row[slot].Node; n != nil {
				return herald.String(string(n.ID)), nil
			}
			return herald.Null, nil
		}, nil
	}
	return c.Compile(e)
}

func (c *Compiler) binary(x *ast.BinaryExpr) (Func, error) {
	compile := c.Compile
	switch x.Op {
	case token.EQL, token.NEQ, token.IN:
		compile = c.Operand
	}
	l, err := compile(x.X)
	if err != nil {
		return nil, err
	}
	r, err := compile(x.Y)
	if err != nil {
		return nil, err
	}
	op, pos := x.Op, x.OpPos
	switch op {
	case token.AND, token.OR:
		return func(ctx *Context, row Row) (herald.Value, error) {
			a, err := l(ctx, row)
			if err != nil {
				return herald.Null, err
			}
			if !a.IsNull() && a.Kind() != herald.KindBool {
				return herald.Null, c.Error(herald.CodeEvaluation, pos, "%s needs Bool operands, got %s", op, a.Kind())
			}
			// Short-circuit: false AND x = false, true OR x = true.
			if !a.IsNull() && a.AsBool() == (op == token.OR) {
				return a, nil
			}
			b, err := r(ctx, row)
			if err != nil {
				return herald.Null, err
			}
			if !b.IsNull() && b.Kind() != herald.KindBool {
				return herald.Null, c.Error(herald.CodeEvaluation, pos, "%s needs Bool operands, got %s", op, b.Kind())
			}
			switch {
			case !b.IsNull() && b.AsBool() == (op == token.OR):
				return b, nil
			case a.IsNull() || b.IsNull():
				return herald.Null, nil
			}
			return b, nil
		}, nil
	}
	return func(ctx *Context, row Row) (herald.Value, error) {
		a, err := l(ctx, row)
		if err != nil {
			return herald.Null, err
		}
		b, err := r(ctx, row)
		if err != nil {
			return herald.Null, err
		}
		v, err := Binary(op, a, b)
		if err != nil {
			return herald.Null, c.Error(herald.CodeEvaluation, pos, "%v", err)
		}
		return v, nil
	}, nil
}

// comparable reports whether a and b may be ordered against each other.
func comparable(a, b herald.Value) bool {
	if a.IsNumeric() && b.IsNumeric() {
		return true
	}
	return a.Kind() == b.Kind()
}

// Binary applies a non-logical binary operator. Comparisons with null give null;
// ordering values of different kinds gives null (never true).
func Binary(op token.Token, a, b herald.Value) (herald.Value, error) {
	switch op {
	case token.EQL, token.NEQ:
		if a.IsNull() || b.IsNull() {
			return herald.Null, nil
		}
		eq := comparable(a, b) && herald.Compare(a, b) == 0
		return herald.Bool(eq == (op == token.EQL)), nil
	case token.LSS, token.LEQ, token.GTR, token.GEQ:
		if a.IsNull() || b.IsNull() || !comparable(a, b) {
			return herald.Null, nil
		}
		c := herald.Compare(a, b)
		switch op {
		case token.LSS:
			return herald.Bool(c < 0), nil
		case token.LEQ:
			return herald.Bool(c <= 0), nil
		case token.GTR:
			return herald.Bool(c > 0), nil
		}
		return herald.Bool(c >= 0), nil
	case token.IN:
		if a.IsNull() || b.IsNull() {
			return herald.Null, nil
		}
		if b.Kind() != herald.KindList {
			return herald.Null, fmt.Errorf("IN needs a list on the right, got %s", b.Kind())
		}
		for _, e := range b.AsList() {
			if comparable(a, e) && herald.Compare(a, e) == 0 {
				return herald.Bool(true), nil
			}
		}
		return herald.Bool(false), nil
	case token.ADD, token.SUB, token.MUL, token.QUO, token.REM:
		if a.IsNull() || b.IsNull() {
			return herald.Null, nil
		}
		return arith(op, a, b)
	}
	return herald.Null, fmt.Errorf("unknown operator %s", op)
}

// IntArith applies +, -, * or / to two Ints, reporting false when the exact result does
// not fit in 64 bits (Herald never wraps an Int around).
func IntArith(op token.Token, x, y int64) (int64, bool) {
	switch op {
	case token.ADD:
		r := x + y
		return r, (r > x) == (y > 0)
	case token.SUB:
		r := x - y
		return r, (r < x) == (y > 0)
	case token.MUL:
		if x == 0 || y == 0 {
			return 0, true
		}
		r := x * y
		return r, r/y == x && !(x == -1 && y == math.MinInt64) && !(y == -1 && x == math.MinInt64)
	case token.QUO:
		return x / y, !(x == math.MinInt64 && y == -1)
	}
	return 0, false
}

func arith(op token.Token, a, b herald.Value) (herald.Value, error) {
	ak, bk := a.Kind(), b.Kind()
	switch {
	case ak == herald.KindInt && bk == herald.KindInt:
		x, y := a.AsInt(), b.AsInt()
		if op == token.QUO || op == token.REM {
			if y == 0 {
				return herald.Null, fmt.Errorf("division by zero")
			}
			if op == token.REM {
				if y == -1 {
					return herald.Int(0), nil
				}
				return herald.Int(x % y), nil
			}
		}
		r, ok := IntArith(op, x, y)
		if !ok {
			return herald.Null, fmt.Errorf("integer overflow: %d %s %d does not fit in an Int (64 bits)", x, op, y)
		}
		return herald.Int(r), nil
	case a.IsNumeric() && b.IsNumeric():
		x, y := a.AsFloat(), b.AsFloat()
		switch op {
		case token.ADD:
			return herald.Float(x + y), nil
		case token.SUB:
			return herald.Float(x - y), nil
		case token.MUL:
			return herald.Float(x * y), nil
		case token.QUO:
			if y == 0 {
				return herald.Null, fmt.Errorf("division by zero")
			}
			return herald.Float(x / y), nil
		case token.REM:
			if y == 0 {
				return herald.Null, fmt.Errorf("division by zero")
			}
			return herald.Float(math.Mod(x, y)), nil
		}
	case ak == herald.KindString && bk == herald.KindString && op == token.ADD:
		return herald.String(a.AsString() + b.AsString()), nil
	case ak == herald.KindList && bk == herald.KindList && op == token.ADD:
		return herald.List(append(append([]herald.Value(nil), a.AsList()...), b.AsList()...)...), nil
	case ak == herald.KindTimestamp && bk == herald.KindDuration && (op == token.ADD || op == token.SUB):
		d := b.AsDuration()
		if op == token.SUB {
			d = -d
		}
		return herald.Timestamp(a.AsTime().Add(d)), nil
	case ak == herald.KindDuration && bk == herald.KindTimestamp && op == token.ADD:
		return herald.Timestamp(b.AsTime().Add(a.AsDuration())), nil
	case ak == herald.KindTimestamp && bk == herald.KindTimestamp && op == token.SUB:
		return herald.Duration(a.AsTime().Sub(b.AsTime())), nil
	case ak == herald.KindDuration && bk == herald.KindDuration && (op == token.ADD || op == token.SUB):
		if op == token.ADD {
			return herald.Duration(a.AsDuration() + b.AsDuration()), nil
		}
		return herald.Duration(a.AsDuration() - b.AsDuration()), nil
	case ak == herald.KindDuration && bk == herald.KindInt && (op == token.MUL || op == token.QUO):
		if op == token.MUL {
			r, ok := IntArith(token.MUL, int64(a.AsDuration()), b.AsInt())
			if !ok {
				return herald.Null, fmt.Errorf("overflow: %s * %d does not fit in a Duration", a.AsDuration(), b.AsInt())
			}
			return herald.Duration(timeDur(r)), nil
		}
		if b.AsInt() == 0 {
			return herald.Null, fmt.Errorf("division by zero")
		}
		return herald.Duration(a.AsDuration() / timeDur(b.AsInt())), nil
	}
	return herald.Null, fmt.Errorf("operator %s is not defined for %s and %s", op, ak, bk)
}

func (c *Compiler) call(x *ast.CallExpr) (Func, error) {
	name := strings.ToLower(x.Fun.Name)
	if aggNames[strings.ToUpper(name)] {
		return c.aggregate(x)
	}
	if x.Star || x.Distinct || x.Where != nil {
		return nil, c.Error(herald.CodeInvalidQuery, x.Pos(), "%s(...) is not an aggregate; *, DISTINCT and WHERE are only allowed in aggregates", x.Fun.Name)
	}
	args := make([]Func, len(x.Args))
	for i, a := range x.Args {
		f, err := c.Compile(a)
		if err != nil {
			return nil, err
		}
		args[i] = f
	}
	pos := x.Pos()
	arity := func(n int) error {
		if len(args) != n {
			return c.Error(herald.CodeEvaluation, pos, "%s() takes %d argument(s), got %d", name, n, len(args))
		}
		return nil
	}
	switch name {
	case "now":
		if err := arity(0); err != nil {
			return nil, err
		}
		return func(ctx *Context, _ Row) (herald.Value, error) { return herald.Timestamp(ctx.Now), nil }, nil
	case "current_actor":
		if err := arity(0); err != nil {
			return nil, err
		}
		return func(ctx *Context, _ Row) (herald.Value, error) {
			if ctx.Actor == "" {
				return herald.Null, nil
			}
			return herald.String(string(ctx.Actor)), nil
		}, nil
	case "current_session":
		if err := arity(0); err != nil {
			return nil, err
		}
		return func(ctx *Context, _ Row) (herald.Value, error) {
			if ctx.Session == "" {
				return herald.Null, nil
			}
			return herald.String(ctx.Session), nil
		}, nil
	case "length":
		if err := arity(1); err != nil {
			return nil, err
		}
		return func(ctx *Context, row Row) (herald.Value, error) {
			v, err := args[0](ctx, row)
			if err != nil {
				return herald.Null, err
			}
			switch v.Kind() {
			case herald.KindNull:
				return herald.Null, nil
			case herald.KindString:
				return herald.Int(int64(utf8.RuneCountInString(v.AsString()))), nil
			case herald.KindList:
				return herald.Int(int64(len(v.AsList()))), nil
			case herald.KindBytes:
				return herald.Int(int64(len(v.BytesAsString()))), nil
			}
			return herald.Null, c.Error(herald.CodeEvaluation, pos, "length() needs a String, Bytes or a List, got %s", v.Kind())
		}, nil
	case "bytes", "string":
		if err := arity(1); err != nil {
			return nil, err
		}
		conv := stringToBytes
		if name == "string" {
			conv = bytesToString
		}
		return func(ctx *Context, row Row) (herald.Value, error) {
			v, err := args[0](ctx, row)
			if err != nil {
				return herald.Null, err
			}
			out, msg := conv(v)
			if msg != "" {
				return herald.Null, c.Error(herald.CodeEvaluation, pos, "%s() %s", name, msg)
			}
			return out, nil
		}, nil
	case "coalesce":
		if len(args) == 0 {
			return nil, c.Error(herald.CodeEvaluation, pos, "coalesce() needs at least one argument")
		}
		return func(ctx *Context, row Row) (herald.Value, error) {
			for _, f := range args {
				v, err := f(ctx, row)
				if err != nil {
					return herald.Null, err
				}
				if !v.IsNull() {
					return v, nil
				}
			}
			return herald.Null, nil
		}, nil
	}
	return nil, c.Error(herald.CodeEvaluation, pos, "unknown function %s()", x.Fun.Name)
}

// stringToBytes is bytes(v): the UTF-8 bytes of a String; Bytes and null unchanged. msg
// says why it cannot be converted.
func stringToBytes(v herald.Value) (out herald.Value, msg string) {
	switch v.Kind() {
	case herald.KindNull, herald.KindBytes:
		return v, ""
	case herald.KindString:
		return herald.BytesFromString(v.AsString()), ""
	}
	return herald.Null, "needs a String or Bytes, got " + v.Kind().String()
}

// bytesToString is string(v): the text of Bytes that are valid UTF-8; a String and null
// unchanged.
func bytesToString(v herald.Value) (out herald.Value, msg string) {
	switch v.Kind() {
	case herald.KindNull, herald.KindString:
		return v, ""
	case herald.KindBytes:
		s := v.BytesAsString()
		if !utf8.ValidString(s) {
			return herald.Null, "needs Bytes that are valid UTF-8"
		}
		return herald.String(s), ""
	}
	return herald.Null, "needs Bytes or a String, got " + v.Kind().String()
}

func (c *Compiler) aggregate(x *ast.CallExpr) (Func, error) {
	name := strings.ToUpper(x.Fun.Name)
	if !c.AllowAggs {
		return nil, c.Error(herald.CodeInvalidQuery, x.Pos(), "aggregate %s() is only allowed in RETURN", name)
	}
	if c.inAgg {
		return nil, c.Error(herald.CodeInvalidQuery, x.Pos(), "aggregates cannot be nested")
	}
	agg := &Agg{Name: name, Distinct: x.Distinct, Star: x.Star}
	if x.Star {
		if name != "COUNT" {
			return nil, c.Error(herald.CodeInvalidQuery, x.Pos(), "%s(*) is not allowed; only COUNT(*)", name)
		}
	} else {
		if len(x.Args) != 1 {
			return nil, c.Error(herald.CodeInvalidQuery, x.Pos(), "%s() takes one argument", name)
		}
		c.inAgg = true
		f, err := c.Compile(x.Args[0])
		c.inAgg = false
		if err != nil {
			return nil, err
		}
		agg.Arg = f
	}
	if x.Where != nil {
		c.inAgg = true
		f, err := c.Compile(x.Where)
		c.inAgg = false
		if err != nil {
			return nil, err
		}
		agg.Where = f
	}
	idx := len(c.Aggs)
	c.Aggs = append(c.Aggs, agg)
	return func(ctx *Context, _ Row) (herald.Value, error) { return ctx.Aggs[idx], nil }, nil
}
