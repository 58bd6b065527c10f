package eval

import (
	"math"
	"testing"

	"github.com/herald-mq/herald/lang/token"
)

// TestIntArithOverflow: every Int result that does not fit in 64 bits is reported,
// never wrapped around; results that fit are exact.
func TestIntArithOverflow(t *testing.T) {
	for _, tc := range []struct {
		op   token.Token
		x, y int64
		want int64
		ok   bool
	}{
		{token.ADD, math.MaxInt64, 1, 0, false},
		{token.ADD, math.MinInt64, -1, 0, false},
		{token.ADD, math.MaxInt64, -1, math.MaxInt64 - 1, true},
		{token.SUB, math.MinInt64, 1, 0, false},
		{token.SUB, math.MaxInt64, -1, 0, false},
		{token.SUB, 0, math.MinInt64, 0, false},
		{token.SUB, -1, math.MinInt64, math.MaxInt64, true},
		{token.MUL, math.MaxInt64, 2, 0, false},
		{token.MUL, math.MinInt64, -1, 0, false},
		{token.MUL, -1, math.MinInt64, 0, false},
		{token.MUL, 1 << 32, 1 << 31, 0, false},
		{token.MUL, 1 << 31, 1 << 31, 1 << 62, true},
		{token.MUL, -3, 4, -12, true},
		{token.QUO, math.MinInt64, -1, 0, false},
		{token.QUO, 7, -2, -3, true},
	} {
		got, ok := IntArith(tc.op, tc.x, tc.y)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("%d %s %d = %d, %v; want %d, %v", tc.x, tc.op, tc.y, got, ok, tc.want, tc.ok)
		}
	}
}
