package convert

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
)

// A value sent in either form (a delivery's match here) reads the same, and undecodable
// binary bytes are an error rather than a wrong value.
func TestEventValue(t *testing.T) {
	want := herald.Map([]string{"body", "n"}, []herald.Value{herald.String("hello"), herald.List(herald.Int(1), herald.Float(2.5))})
	for _, d := range []*heraldv1.Delivery{
		{Match: ToWire(want)},
		{MatchBinary: want.AppendBinary(nil)},
		{MatchBinary: want.AppendBinary(nil), Match: ToWire(herald.String("ignored"))},
	} {
		got, err := EventValue(d.GetMatchBinary(), d.GetMatch())
		if err != nil || !got.Equal(want) {
			t.Errorf("EventValue of %v = %v, %v; want %v", d, got, err, want)
		}
		plain, err := EventPlain(d.GetMatchBinary(), d.GetMatch())
		if err != nil || !reflect.DeepEqual(plain, want.Interface()) {
			t.Errorf("EventPlain of %v = %v, %v; want %v", d, plain, err, want.Interface())
		}
	}
	if got, err := EventPlain(nil, nil); err != nil || got != nil {
		t.Errorf("EventPlain of no match: %v, %v; want nil", got, err)
	}
	if got, err := EventValue(nil, nil); err != nil || !got.IsNull() {
		t.Errorf("no match: %v, %v; want null", got, err)
	}
	full := want.AppendBinary(nil)
	for name, b := range map[string][]byte{
		"trailing bytes": append(want.AppendBinary(nil), 0),
		"truncated":      full[:len(full)-1],
		"unknown kind":   {0xff},
	} {
		if _, err := EventValue(b, nil); !errors.Is(err, herald.ErrCorrupt) {
			t.Errorf("%s: err = %v; want ErrCorrupt", name, err)
		}
		if _, err := EventPlain(b, nil); !errors.Is(err, herald.ErrCorrupt) {
			t.Errorf("%s: EventPlain err = %v; want ErrCorrupt", name, err)
		}
	}
}

// FuzzAttrsFromBinary feeds the server's decoder of attrs_binary, which takes bytes from
// any client, arbitrary input: it must refuse what it cannot read, never panic or
// recurse without bound, and what it accepts must encode back to an equal value.
func FuzzAttrsFromBinary(f *testing.F) {
	f.Add(herald.Attrs{{Name: "body", Value: herald.String("x")}}.AppendBinary(nil))
	f.Add(herald.Attrs{{Name: "a", Value: herald.List(herald.Int(1), herald.Float(2))}, {Name: "b", Value: herald.Bool(true)}}.AppendBinary(nil))
	f.Add([]byte{0x01, 0x01, 'a', 0x07, 0x01, 0x07, 0x01, 0x07, 0x00})
	f.Add([]byte{})
	f.Add(herald.Attrs{{Name: "body", Value: herald.Bytes([]byte{0xff, 0})}}.AppendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := AttrsFromBinary(b, "attribute")
		if err != nil {
			return
		}
		for name, v := range m {
			if v.Kind() == herald.KindMap {
				t.Fatalf("attribute %s holds a map", name)
			}
			back, _, err := herald.DecodeValueNested(v.AppendBinary(nil), maxDepth)
			if err != nil || !back.Equal(v) {
				t.Fatalf("attribute %s: %v does not survive a round trip (%v)", name, v, err)
			}
		}
	})
}

// Bytes cross the wire as Bytes, in either form, and come back out of a client's plain
// form as a []byte; bytes need not be UTF-8, as strings must.
func TestBytesCrossTheWire(t *testing.T) {
	raw := []byte{'h', 'i', 0xff, 0}
	want := herald.Map([]string{"body", "l"}, []herald.Value{herald.Bytes(raw), herald.List(herald.Bytes(nil))})
	w := ToWire(want)
	enc, err := proto.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var back heraldv1.Value
	if err := proto.Unmarshal(enc, &back); err != nil {
		t.Fatal(err)
	}
	if got := back.GetMapValue().GetValues()[0].GetBytesValue(); !bytes.Equal(got, raw) {
		t.Fatalf("bytes_value = %x, want %x", got, raw)
	}
	for _, form := range []struct {
		bin []byte
		w   *heraldv1.Value
	}{{nil, &back}, {want.AppendBinary(nil), nil}} {
		got, err := EventValue(form.bin, form.w)
		if err != nil || !got.Equal(want) || got.MapGet("body").Kind() != herald.KindBytes {
			t.Errorf("EventValue = %v, %v; want %v", got, err, want)
		}
		plain, err := EventPlain(form.bin, form.w)
		wantPlain := map[string]any{"body": raw, "l": []any{[]byte{}}}
		if err != nil || !reflect.DeepEqual(plain, wantPlain) {
			t.Errorf("EventPlain = %#v, %v; want %#v", plain, err, wantPlain)
		}
	}

	attrs := herald.Attrs{{Name: "body", Value: herald.Bytes(raw)}}.AppendBinary(nil)
	m, err := AttrsFromBinary(attrs, "attribute")
	if err != nil || !m["body"].Equal(herald.Bytes(raw)) {
		t.Fatalf("AttrsFromBinary = %v, %v", m, err)
	}
	notText := herald.Attrs{{Name: "body", Value: herald.String(string(raw))}}.AppendBinary(nil)
	if _, err := AttrsFromBinary(notText, "attribute"); err == nil {
		t.Fatal("a String that is not UTF-8 was accepted")
	}
	wm, err := FromWireMap(map[string]*heraldv1.Value{"body": {Kind: &heraldv1.Value_BytesValue{BytesValue: raw}}}, "attribute")
	if err != nil || wm["body"].Kind() != herald.KindBytes || !bytes.Equal(wm["body"].AsBytes(), raw) {
		t.Fatalf("FromWireMap = %v, %v", wm, err)
	}
}

// Map values are attributes and parameters like any other, nested to any depth, in
// both the wire's value tree and the binary form; past the depth limit they are refused.
func TestMapsCrossTheWire(t *testing.T) {
	m := herald.Map([]string{"id", "address", "lines"}, []herald.Value{
		herald.Int(7),
		herald.Map([]string{"city"}, []herald.Value{herald.String("Lyon")}),
		herald.List(herald.Map([]string{"sku"}, []herald.Value{herald.String("a1")})),
	})
	wm, err := FromWireMap(map[string]*heraldv1.Value{"customer": ToWire(m)}, "attribute")
	if err != nil || !wm["customer"].Equal(m) || wm["customer"].Kind() != herald.KindMap {
		t.Fatalf("FromWireMap = %v, %v", wm, err)
	}
	bm, err := AttrsFromBinary(herald.Attrs{{Name: "customer", Value: m}}.AppendBinary(nil), "attribute")
	if err != nil || !bm["customer"].Equal(m) {
		t.Fatalf("AttrsFromBinary = %v, %v", bm, err)
	}
	deep := herald.Int(1)
	for range maxDepth + 2 {
		deep = herald.Map([]string{"k"}, []herald.Value{deep})
	}
	if _, err := FromWireMap(map[string]*heraldv1.Value{"d": ToWire(deep)}, "attribute"); herald.CodeOf(err) != herald.CodeMalformedRequest {
		t.Errorf("a map nested past the limit: %v, want E4001", err)
	}
}
