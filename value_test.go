package herald_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/herald-mq/herald"
)

func TestCompare(t *testing.T) {
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		a, b herald.Value
		want int
	}{
		{herald.Int(2), herald.Float(2.0), 0},
		{herald.Int(2), herald.Float(2.5), -1},
		{herald.Float(math.NaN()), herald.Int(0), -1},
		{herald.Null, herald.Bool(false), -1},
		{herald.String("a"), herald.String("b"), -1},
		{herald.Int(9), herald.String("a"), -1}, // kinds order numbers before strings
		{herald.Timestamp(ts), herald.Timestamp(ts.Add(time.Second)), -1},
		{herald.Duration(time.Second), herald.Duration(time.Millisecond), 1},
		{herald.List(herald.Int(1)), herald.List(herald.Int(1), herald.Int(0)), -1},
		{herald.Map([]string{"a"}, []herald.Value{herald.Int(1)}), herald.Map([]string{"a"}, []herald.Value{herald.Int(1)}), 0},
	}
	for _, c := range cases {
		if got := herald.Compare(c.a, c.b); got != c.want {
			t.Errorf("Compare(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := herald.Compare(c.b, c.a); got != -c.want {
			t.Errorf("Compare(%s, %s) = %d, want %d (antisymmetry)", c.b, c.a, got, -c.want)
		}
	}
}

func TestBinaryRoundTrip(t *testing.T) {
	vals := []herald.Value{
		herald.Null, herald.Bool(true), herald.Bool(false), herald.Int(-42), herald.Int(math.MaxInt64),
		herald.Float(3.25), herald.Float(math.Inf(-1)), herald.String(""), herald.String("héllo\x00"),
		herald.Timestamp(time.Unix(1700000000, 123).UTC()), herald.Duration(-time.Hour),
		herald.List(herald.Int(1), herald.List(herald.String("x")), herald.Null),
		herald.Map([]string{"id", "n"}, []herald.Value{herald.String("a"), herald.Int(1)}),
	}
	for _, v := range vals {
		b := v.AppendBinary(nil)
		got, rest, err := herald.DecodeValue(b)
		if err != nil || len(rest) != 0 || herald.Compare(got, v) != 0 || got.Kind() != v.Kind() {
			t.Errorf("round trip of %s: got %s rest=%d err=%v", v, got, len(rest), err)
		}
		for i := 0; i < len(b); i++ {
			if _, _, err := herald.DecodeValue(b[:i]); err == nil && i > 0 && v.Kind() != herald.KindNull {
				// A strict prefix must not decode to the whole value.
				if got, rest, _ := herald.DecodeValue(b[:i]); herald.Compare(got, v) == 0 && len(rest) == 0 {
					t.Errorf("prefix %d of %s decoded to the full value", i, v)
				}
			}
		}
	}
	a := herald.AttrsOf(map[string]herald.Value{"b": herald.Int(1), "a": herald.String("x"), "z": herald.Null})
	enc := a.AppendBinary(nil)
	dec, rest, err := herald.DecodeAttrs(enc)
	if err != nil || len(rest) != 0 || !dec.Equal(a) || len(dec) != 2 {
		t.Fatalf("attrs round trip: %v %v %v", dec, rest, err)
	}
	if string(a.AppendBinary(nil)) != string(herald.AttrsOf(map[string]herald.Value{"a": herald.String("x"), "b": herald.Int(1)}).AppendBinary(nil)) {
		t.Fatal("attribute encoding is not deterministic")
	}
}

func TestJSON(t *testing.T) {
	ts := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	row := []herald.Value{
		herald.Int(5), herald.Float(1.5), herald.String("s"), herald.Null, herald.Bool(true),
		herald.Timestamp(ts), herald.Duration(90 * time.Second),
		herald.List(herald.Int(1), herald.String("a")),
		herald.Map([]string{"z", "a"}, []herald.Value{herald.Int(1), herald.Int(2)}),
	}
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	want := `[5,1.5,"s",null,true,"2026-02-03T04:05:06Z","1m30s",[1,"a"],{"z":1,"a":2}]`
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
	for in, want := range map[string]herald.Value{
		`3`: herald.Int(3), `3.5`: herald.Float(3.5), `"x"`: herald.String("x"), `null`: herald.Null,
		`[1,"a"]`: herald.List(herald.Int(1), herald.String("a")),
	} {
		var x any
		if err := json.Unmarshal([]byte(in), &x); err != nil {
			t.Fatal(err)
		}
		got, err := herald.FromJSON(x)
		if err != nil || herald.Compare(got, want) != 0 || got.Kind() != want.Kind() {
			t.Errorf("FromJSON(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	// An object is a Map with its keys sorted, nested to any depth.
	m, err := herald.FromJSON(map[string]any{"b": 1.0, "a": map[string]any{"c": []any{"x"}}})
	if err != nil || m.Kind() != herald.KindMap || m.String() != `{a: {c: ["x"]}, b: 1}` {
		t.Errorf("FromJSON(object) = %s (%s), %v; want a Map", m, m.Kind(), err)
	}
	// Numbers as the HTTP API decodes them (json.Number): an integer past 64 bits is
	// refused rather than turned into a Float that lost its low digits.
	for in, ok := range map[string]bool{`9223372036854775807`: true, `9223372036854775808`: false, `-9223372036854775809`: false, `9223372036854775808.0`: true, `1e30`: true} {
		v, err := herald.FromJSON(json.Number(in))
		if (err == nil) != ok {
			t.Errorf("FromJSON(json.Number(%s)) = %s, %v; want ok=%v", in, v, err, ok)
		}
	}
}

func TestErrorTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range herald.Codes() {
		if seen[c.Name] || seen[string(c.Code)] {
			t.Errorf("duplicate code or name %s %s", c.Code, c.Name)
		}
		seen[c.Name], seen[string(c.Code)] = true, true
		if c.HTTP < 400 || c.HTTP > 599 || c.RPC == "" || c.Summary == "" {
			t.Errorf("incomplete row %+v", c)
		}
	}
	for i := 1; i <= 7; i++ {
		if !seen[fmt.Sprintf("E800%d", i)] {
			t.Errorf("E800%d missing", i)
		}
	}
	err := fmt.Errorf("wrapped: %w", herald.Errorf(herald.CodeInvalidDeliveryID, "d1").At(2, 5))
	if herald.CodeOf(err) != herald.CodeInvalidDeliveryID {
		t.Fatal("CodeOf does not see through wrapping")
	}
	if !errors.Is(err, &herald.Error{Code: herald.CodeInvalidDeliveryID}) {
		t.Fatal("errors.Is by code failed")
	}
	if got := herald.AsError(err).Error(); got != "E8004 INVALID_DELIVERY_ID: 2:5: d1" {
		t.Fatalf("Error() = %q", got)
	}
	if herald.CodeOf(errors.New("x")) != herald.CodeInternal {
		t.Fatal("foreign errors must map to INTERNAL")
	}
}

func TestCompareIntFloatExact(t *testing.T) {
	big := int64(1<<53 + 1)
	if herald.Compare(herald.Int(big), herald.Float(float64(1<<53))) != 1 {
		t.Fatal("Int 2^53+1 must be greater than Float 2^53")
	}
	for _, c := range []struct {
		i    int64
		f    float64
		want int
	}{{2, 2.0, 0}, {2, 2.5, -1}, {3, 2.5, 1}, {-3, -2.5, -1}, {-2, -2.5, 1}, {math.MaxInt64, 9.3e18, -1}, {math.MinInt64, -9.3e18, 1}, {0, math.Inf(1), -1}} {
		if got := herald.Compare(herald.Int(c.i), herald.Float(c.f)); got != c.want {
			t.Errorf("Compare(%d, %g) = %d, want %d", c.i, c.f, got, c.want)
		}
	}
}

// Attrs behaves as a map from names to non-null values, whatever its size.
func TestAttrsAsMap(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	vals := []herald.Value{herald.Null, herald.Int(1), herald.String("x"), herald.Float(2.5), herald.List(herald.Int(1))}
	for seed := 0; seed < 500; seed++ {
		m := map[string]herald.Value{}
		var a herald.Attrs
		for i := 0; i < seed%40; i++ {
			name := names[(seed*7+i*5)%len(names)]
			v := vals[(seed+i*3)%len(vals)]
			a = a.With(name, v)
			if v.IsNull() {
				delete(m, name)
			} else {
				m[name] = v
			}
		}
		if len(a) != len(m) || !a.Equal(herald.AttrsOf(m)) {
			t.Fatalf("seed %d: %v, want %v", seed, a, m)
		}
		for _, name := range names {
			if got, want := a.Get(name), m[name]; herald.Compare(got, want) != 0 || a.Has(name) != !want.IsNull() {
				t.Fatalf("seed %d: Get(%s) = %v, want %v", seed, name, got, want)
			}
		}
		other := herald.AttrsOf(map[string]herald.Value{"b": herald.Int(9), "zz": herald.Int(8)})
		merged := a.Merge(other)
		if merged.Get("b").AsInt() != 9 || merged.Get("zz").AsInt() != 8 || len(merged) != len(herald.AttrsOf(m).With("b", herald.Int(9)).With("zz", herald.Int(8))) {
			t.Fatalf("seed %d: Merge = %v", seed, merged)
		}
	}
}

func TestSplitAttrsAndEncodedLen(t *testing.T) {
	long := herald.String(string(make([]byte, herald.InlineLimit)))
	a := herald.AttrsOf(map[string]herald.Value{"big": long, "n": herald.Int(-5), "s": herald.String("x"),
		"l": herald.List(long, herald.Map([]string{"k"}, []herald.Value{herald.Float(1)}))})
	for _, at := range a {
		if got, want := at.Value.EncodedLen(), len(at.Value.AppendBinary(nil)); got != want {
			t.Fatalf("EncodedLen(%s) = %d, want %d", at.Name, got, want)
		}
	}
	withNull := append(herald.Attrs{{Name: "a", Value: herald.Null}}, a...)
	for _, as := range []herald.Attrs{nil, a, withNull} {
		if got, want := as.EncodedLen(), len(as.AppendBinary(nil)); got != want {
			t.Fatalf("Attrs.EncodedLen(%v) = %d, want %d", as.Keys(), got, want)
		}
	}
	inline, big := herald.SplitAttrs(a)
	if fmt.Sprint(inline.Keys()) != "[n s]" || fmt.Sprint(big.Keys()) != "[big l]" {
		t.Fatalf("SplitAttrs = %v / %v", inline.Keys(), big.Keys())
	}
	if in, b := herald.SplitAttrs(inline); b != nil || !in.Equal(inline) {
		t.Fatal("small values stay together")
	}
}

func TestNewIDSortsInOrder(t *testing.T) {
	prev := herald.NewID("n")
	for i := 0; i < 100000; i++ {
		id := herald.NewID("n")
		if id <= prev {
			t.Fatalf("id %d: %s after %s", i, id, prev)
		}
		prev = id
	}
}

// DecodeValueNested bounds how deep lists and maps may nest, so bytes from a client
// cannot make the decoder recurse without limit; DecodeValue, for the store's own bytes,
// does not.
func TestDecodeValueNested(t *testing.T) {
	v := herald.Int(1)
	for range 10 {
		v = herald.List(v)
	}
	b := v.AppendBinary(nil)
	if got, rest, err := herald.DecodeValueNested(b, 10); err != nil || len(rest) > 0 || !got.Equal(v) {
		t.Errorf("depth 10 within 10: %v, %d bytes left, %v", got, len(rest), err)
	}
	if _, _, err := herald.DecodeValueNested(b, 9); !errors.Is(err, herald.ErrCorrupt) {
		t.Errorf("depth 10 within 9: %v, want ErrCorrupt", err)
	}
	if got, _, err := herald.DecodeValue(b); err != nil || !got.Equal(v) {
		t.Errorf("herald.DecodeValue: %v, %v", got, err)
	}
	m := herald.Map([]string{"k"}, []herald.Value{v})
	if _, _, err := herald.DecodeValueNested(m.AppendBinary(nil), 10); !errors.Is(err, herald.ErrCorrupt) {
		t.Errorf("a map around depth 10 within 10: %v, want ErrCorrupt", err)
	}
	a := herald.Attrs{{Name: "a", Value: v}}
	if _, _, err := herald.DecodeAttrsNested(a.AppendBinary(nil), 9); !errors.Is(err, herald.ErrCorrupt) {
		t.Errorf("an attribute of depth 10 within 9: %v, want ErrCorrupt", err)
	}
}

// DecodeInterface gives what decoding a Value and asking for its Interface gives, for
// every kind and nesting, and refuses what DecodeValueNested refuses.
func TestDecodeInterface(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 5, time.UTC)
	values := []herald.Value{
		herald.Null, herald.Bool(true), herald.Int(-7), herald.Float(2.5), herald.String("héllo"),
		herald.Timestamp(at), herald.Duration(1500 * time.Millisecond),
		herald.List(), herald.Map(nil, nil),
		herald.Map([]string{"body", "n", "l"}, []herald.Value{herald.String("x"), herald.Int(1),
			herald.List(herald.Null, herald.Map([]string{"k"}, []herald.Value{herald.Bool(false)}))}),
		herald.Map([]string{"k", "k"}, []herald.Value{herald.Int(1), herald.Int(2)}), // the last of a repeated key wins
	}
	for _, v := range values {
		b := append(v.AppendBinary(nil), 0xAA)
		got, rest, err := herald.DecodeInterface(b, 8)
		if err != nil || len(rest) != 1 || rest[0] != 0xAA {
			t.Fatalf("DecodeInterface(%v): rest %x, %v", v, rest, err)
		}
		want, _, _ := herald.DecodeValueNested(b, 8)
		if !reflect.DeepEqual(got, want.Interface()) {
			t.Errorf("DecodeInterface(%v) = %#v, want %#v", v, got, want.Interface())
		}
	}
	deep := herald.List(herald.List(herald.Int(1)))
	full := deep.AppendBinary(nil)
	for name, b := range map[string][]byte{"too deep": full, "truncated": full[:len(full)-1], "empty": nil, "unknown kind": {0xff}} {
		if _, _, err := herald.DecodeInterface(b, 1); !errors.Is(err, herald.ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
		if _, _, err := herald.DecodeValueNested(b, 1); !errors.Is(err, herald.ErrCorrupt) {
			t.Errorf("%s: DecodeValueNested err = %v, want ErrCorrupt (the two agree)", name, err)
		}
	}
}

// AttrOf reads one attribute of an encoding as decoding them all would, whatever kinds
// come before it, and refuses bytes it cannot read.
func TestAttrOf(t *testing.T) {
	a := herald.AttrsOf(map[string]herald.Value{
		"a": herald.Map([]string{"k", "l"}, []herald.Value{herald.Int(1), herald.List(herald.String("x"), herald.Null)}),
		"b": herald.Float(1.5), "c": herald.Timestamp(time.Unix(5, 0)), "d": herald.List(),
		"e": herald.String("hello"), "g": herald.Bool(true),
	})
	enc := a.AppendBinary(nil)
	for _, name := range []string{"a", "b", "c", "d", "e", "g", "f", "z", "", "0"} {
		got, err := herald.AttrOf(enc, name)
		if err != nil || !got.Equal(a.Get(name)) {
			t.Errorf("AttrOf(%q) = %v, %v; want %v", name, got, err, a.Get(name))
		}
	}
	for cut := 0; cut < len(enc); cut++ {
		if _, err := herald.AttrOf(enc[:cut], "g"); !errors.Is(err, herald.ErrCorrupt) {
			t.Errorf("AttrOf of the first %d of %d bytes: err = %v, want ErrCorrupt", cut, len(enc), err)
		}
	}
}

// A string that AttrOf or DecodeInterface returns is the encoding's bytes, not a copy:
// a delivery's body is neither copied out of the stored body on the server nor out of
// the received frame in the client. A cut inside the string is still refused.
func TestDecodedStringsShareTheEncoding(t *testing.T) {
	inside := func(s string, b []byte) bool {
		p, start := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(&b[0]))
		return p >= start && p+uintptr(len(s)) <= start+uintptr(len(b))
	}
	body := strings.Repeat("x", 256)
	enc := herald.AttrsOf(map[string]herald.Value{"a": herald.Int(1), "body": herald.String(body)}).AppendBinary(nil)
	v, err := herald.AttrOf(enc, "body")
	if err != nil || v.AsString() != body || !inside(v.AsString(), enc) {
		t.Errorf("AttrOf(body) = %.10q…, %v; shares the encoding: %v", v.AsString(), err, err == nil && inside(v.AsString(), enc))
	}
	for cut := 1; cut < len(enc); cut++ {
		if _, err := herald.AttrOf(enc[:cut], "body"); !errors.Is(err, herald.ErrCorrupt) {
			t.Fatalf("AttrOf(body) of the first %d of %d bytes: err = %v, want ErrCorrupt", cut, len(enc), err)
		}
	}
	m := herald.Map([]string{"body"}, []herald.Value{herald.String(body)}).AppendBinary(nil)
	x, _, err := herald.DecodeInterface(m, 2)
	got, _ := x.(map[string]any)["body"].(string)
	if err != nil || got != body || !inside(got, m) {
		t.Errorf("DecodeInterface: body %.10q…, %v; shares the encoding: %v", got, err, got != "" && inside(got, m))
	}
}

// An id is its prefix and 21 base32 characters, whatever the prefix's length.
func TestNewIDForm(t *testing.T) {
	for _, prefix := range []string{"", "n", strings.Repeat("p", 43), strings.Repeat("q", 44)} {
		id := string(herald.NewID(prefix))
		if len(id) != len(prefix)+21 || !strings.HasPrefix(id, prefix) || strings.Trim(id[len(prefix):], "abcdefghijklmnopqrstuvwxyz234567") != "" {
			t.Errorf("NewID(%q) = %q", prefix, id)
		}
	}
}

// Bodies with the same attribute names share one list of them, whether made at
// publish (NewBody) or read back from the store (InternNames); other names get their
// own list.
func TestBodiesShareTheirNames(t *testing.T) {
	big := herald.String(strings.Repeat("x", herald.InlineLimit+1))
	a := herald.NewBody(1, herald.Attrs{{Name: "body", Value: big}, {Name: "zz_share_test", Value: big}}, []byte("x"), nil)
	b := herald.NewBody(2, herald.Attrs{{Name: "body", Value: big}, {Name: "zz_share_test", Value: big}}, []byte("y"), nil)
	c := herald.InternNames([]string{"body", "zz_share_test"})
	d := herald.NewBody(3, herald.Attrs{{Name: "body", Value: big}, {Name: "zz_share_tesu", Value: big}}, []byte("z"), nil)
	if &a.Names[0] != &b.Names[0] || &a.Names[0] != &c[0] {
		t.Error("bodies with the same attribute names hold lists of their own")
	}
	if &d.Names[0] == &a.Names[0] || fmt.Sprint(d.Names) != "[body zz_share_tesu]" || fmt.Sprint(a.Names) != "[body zz_share_test]" {
		t.Errorf("names %v and %v", a.Names, d.Names)
	}
}

// TestValueUnion checks the 24-byte union: each accessor answers its own kind and the
// zero value of its result for any other, so a String's length or a List's pointer
// never shows through AsInt, AsFloat, AsTime or AsString.
func TestValueUnion(t *testing.T) {
	if got := unsafe.Sizeof(herald.Value{}); got != 24 {
		t.Fatalf("Value is %d bytes, want 24", got)
	}
	big := strings.Repeat("abc", 1000)
	vals := []herald.Value{herald.String("hello"), herald.String(""), herald.String(big[3:9]), herald.List(herald.Int(1)), herald.MapOf([]string{"a"}, []herald.Value{herald.String("x")})}
	for _, v := range vals {
		if v.AsInt() != 0 || v.AsFloat() != 0 || v.AsTime().UnixNano() != 0 || v.AsDuration() != 0 || v.AsBool() {
			t.Errorf("%v (%v): a numeric accessor sees %d, %v, %v, %v, %v", v, v.Kind(), v.AsInt(), v.AsFloat(), v.AsTime(), v.AsDuration(), v.AsBool())
		}
	}
	for _, v := range []herald.Value{herald.Int(42), herald.Float(1.5), herald.Bool(true), herald.Duration(5), herald.Timestamp(time.Unix(0, 7)), herald.Null} {
		if v.AsString() != "" || v.AsList() != nil || v.MapKeys() != nil {
			t.Errorf("%v: a string or composite accessor sees %q %v %v", v, v.AsString(), v.AsList(), v.MapKeys())
		}
	}
	if s := herald.String(big[3:9]); s.AsString() != "abcabc" || herald.Compare(s, herald.String("abcabc")) != 0 || herald.Compare(s, herald.String("abcabd")) >= 0 {
		t.Errorf("a substring value: %q", s.AsString())
	}
	if e := herald.String(""); e.AsString() != "" || e.IsNull() || e.Kind() != herald.KindString || herald.Compare(e, herald.String("")) != 0 {
		t.Errorf("the empty string: %v %v", e, e.Kind())
	}
}

// TestDecodeNames: a list of names decodes to the list InternNames holds for it, the
// same slice whether it was held before the call or not, and bad encodings (cut short,
// out of order, repeated) are refused.
func TestDecodeNames(t *testing.T) {
	enc := func(names ...string) []byte {
		var b []byte
		for _, n := range names {
			b = herald.AppendString(b, n)
		}
		return append(b, 0xAA) // what follows the names
	}
	fresh := []string{"zz_decode_a", "zz_decode_b", "zz_decode_c"}
	got, rest, err := herald.DecodeNames(enc(fresh...), 3)
	if err != nil || !slices.Equal(got, fresh) || !bytes.Equal(rest, []byte{0xAA}) {
		t.Fatalf("first decoding: %q, rest %x, %v", got, rest, err)
	}
	held := herald.InternNames(slices.Clone(fresh))
	again, _, err := herald.DecodeNames(enc(fresh...), 3)
	if err != nil || &again[0] != &held[0] || &got[0] != &held[0] {
		t.Errorf("the decoded lists are not the one held: %p %p %p (%v)", &got[0], &again[0], &held[0], err)
	}
	for _, bad := range []struct {
		b     []byte
		count int
	}{
		{enc("a", "b")[:3], 2},  // cut short
		{enc("b", "a"), 2},      // out of order
		{enc("a", "a"), 2},      // repeated
		{enc("a"), 3},           // fewer names than counted
		{[]byte{0x80, 0x80}, 1}, // a bad length
	} {
		if _, _, err := herald.DecodeNames(bad.b, bad.count); !errors.Is(err, herald.ErrCorrupt) {
			t.Errorf("DecodeNames(%x, %d): %v, want ErrCorrupt", bad.b, bad.count, err)
		}
	}
}

// NewMapOf builds the map a projection fills in: the same value as MapOf over the same
// keys and values, and for up to four keys one allocation for the map and its values.
func TestNewMapOf(t *testing.T) {
	all := []string{"a", "b", "c", "d", "e", "f"}
	for n := 0; n <= len(all); n++ {
		keys := all[:n]
		m, vals := herald.NewMapOf(keys)
		if len(vals) != n {
			t.Fatalf("%d keys: %d values to fill", n, len(vals))
		}
		want := make([]herald.Value, n)
		for i := range vals {
			vals[i] = herald.Int(int64(i * 10))
			want[i] = herald.Int(int64(i * 10))
		}
		if herald.Compare(m, herald.MapOf(keys, want)) != 0 || !slices.Equal(m.MapKeys(), keys) {
			t.Fatalf("%d keys: %v, want %v", n, m, herald.MapOf(keys, want))
		}
		if n > 0 && m.MapGet(keys[n-1]).AsInt() != int64((n-1)*10) {
			t.Fatalf("%d keys: %s is %v", n, keys[n-1], m.MapGet(keys[n-1]))
		}
		if n >= 1 && n <= 4 {
			if a := testing.AllocsPerRun(100, func() { m, vals = herald.NewMapOf(keys) }); a != 1 {
				t.Errorf("%d keys: %.0f allocations, want 1", n, a)
			}
		}
	}
}
