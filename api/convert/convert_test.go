package convert

import (
	"errors"
	"testing"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
)

// A delivery's match reads the same from either form, and undecodable binary bytes are
// an error rather than a wrong value.
func TestDeliveryMatch(t *testing.T) {
	want := herald.Map([]string{"body", "n"}, []herald.Value{herald.String("hello"), herald.List(herald.Int(1), herald.Float(2.5))})
	for _, d := range []*heraldv1.Delivery{
		{Match: ToWire(want)},
		{MatchBinary: want.AppendBinary(nil)},
		{MatchBinary: want.AppendBinary(nil), Match: ToWire(herald.String("ignored"))},
	} {
		got, err := DeliveryMatch(d)
		if err != nil || !got.Equal(want) {
			t.Errorf("DeliveryMatch(%v) = %v, %v; want %v", d, got, err, want)
		}
	}
	if got, err := DeliveryMatch(&heraldv1.Delivery{}); err != nil || !got.IsNull() {
		t.Errorf("no match: %v, %v; want null", got, err)
	}
	full := want.AppendBinary(nil)
	for name, b := range map[string][]byte{
		"trailing bytes": append(want.AppendBinary(nil), 0),
		"truncated":      full[:len(full)-1],
		"unknown kind":   {0xff},
	} {
		if _, err := DeliveryMatch(&heraldv1.Delivery{MatchBinary: b}); !errors.Is(err, herald.ErrCorrupt) {
			t.Errorf("%s: err = %v; want ErrCorrupt", name, err)
		}
	}
}
