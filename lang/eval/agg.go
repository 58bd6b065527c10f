package eval

import (
	"fmt"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/token"
)

func timeDur(i int64) time.Duration { return time.Duration(i) }

// Accumulator folds the rows of one group into an aggregate value.
type Accumulator struct {
	agg   *Agg
	count int64
	sum   herald.Value
	best  herald.Value
	seen  map[string]bool
}

// NewAccumulator starts an empty accumulator for a.
func NewAccumulator(a *Agg) *Accumulator {
	acc := &Accumulator{agg: a}
	if a.Distinct {
		acc.seen = map[string]bool{}
	}
	return acc
}

// Add folds one row in.
func (acc *Accumulator) Add(ctx *Context, row Row) error {
	a := acc.agg
	if a.Where != nil {
		ok, err := a.Where(ctx, row)
		if err != nil {
			return err
		}
		if !Truthy(ok) {
			return nil
		}
	}
	if a.Star {
		acc.count++
		return nil
	}
	v, err := a.Arg(ctx, row)
	if err != nil {
		return err
	}
	if v.IsNull() {
		return nil
	}
	if acc.seen != nil {
		k := string(v.AppendBinary(nil))
		if acc.seen[k] {
			return nil
		}
		acc.seen[k] = true
	}
	acc.count++
	switch a.Name {
	case "SUM", "AVG":
		if !v.IsNumeric() && v.Kind() != herald.KindDuration {
			return fmt.Errorf("%s needs numbers or durations, got %s", a.Name, v.Kind())
		}
		if acc.sum.IsNull() {
			acc.sum = v
			return nil
		}
		if acc.sum.Kind() == herald.KindDuration && v.Kind() == herald.KindDuration {
			acc.sum = herald.Duration(acc.sum.AsDuration() + v.AsDuration())
			return nil
		}
		if !acc.sum.IsNumeric() || !v.IsNumeric() {
			return fmt.Errorf("%s cannot mix %s and %s", a.Name, acc.sum.Kind(), v.Kind())
		}
		if acc.sum.Kind() == herald.KindInt && v.Kind() == herald.KindInt {
			s, ok := IntArith(token.ADD, acc.sum.AsInt(), v.AsInt())
			if !ok {
				return fmt.Errorf("integer overflow: the %s of Ints does not fit in an Int (64 bits)", a.Name)
			}
			acc.sum = herald.Int(s)
		} else {
			acc.sum = herald.Float(acc.sum.AsFloat() + v.AsFloat())
		}
	case "MIN", "MAX":
		if acc.best.IsNull() {
			acc.best = v
			return nil
		}
		c := herald.Compare(v, acc.best)
		if (a.Name == "MIN" && c < 0) || (a.Name == "MAX" && c > 0) {
			acc.best = v
		}
	}
	return nil
}

// Result returns the aggregate value: COUNT of nothing is 0, the others are null.
func (acc *Accumulator) Result() herald.Value {
	switch acc.agg.Name {
	case "COUNT":
		return herald.Int(acc.count)
	case "SUM":
		return acc.sum
	case "AVG":
		if acc.count == 0 {
			return herald.Null
		}
		if acc.sum.Kind() == herald.KindDuration {
			return herald.Duration(acc.sum.AsDuration() / time.Duration(acc.count))
		}
		return herald.Float(acc.sum.AsFloat() / float64(acc.count))
	}
	return acc.best
}
