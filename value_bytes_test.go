package herald_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/herald-mq/herald"
)

func TestBytesValue(t *testing.T) {
	src := []byte("hello")
	v := herald.Bytes(src)
	src[0] = 'J' // Bytes copied its argument
	if v.Kind() != herald.KindBytes || string(v.AsBytes()) != "hello" || v.String() != "0x68656c6c6f" {
		t.Fatalf("Bytes(hello) = %s of kind %s, AsBytes %q", v, v.Kind(), v.AsBytes())
	}
	out := v.AsBytes()
	out[0] = 'J' // AsBytes hands out a copy
	if string(v.AsBytes()) != "hello" {
		t.Fatalf("changing what AsBytes returned changed the value: %q", v.AsBytes())
	}
	if e := herald.Bytes(nil); e.Kind() != herald.KindBytes || e.AsBytes() == nil || len(e.AsBytes()) != 0 || e.String() != "0x" || e.IsNull() {
		t.Fatalf("empty Bytes = %s (%s), AsBytes %#v", e, e.Kind(), e.AsBytes())
	}
	// The other accessors see nothing in a Bytes value, and AsBytes nothing in others.
	if v.AsString() != "" || v.AsInt() != 0 || v.AsFloat() != 0 || v.AsList() != nil || v.MapKeys() != nil || herald.String("hello").AsBytes() != nil {
		t.Fatal("an accessor of another kind reads a Bytes value, or AsBytes another kind")
	}
	if k, ok := herald.KindByName("Bytes"); !ok || k != herald.KindBytes || k.String() != "Bytes" {
		t.Fatalf("KindByName(Bytes) = %s, %v", k, ok)
	}
	if k, ok := herald.KindByName("bytes"); !ok || k != herald.KindBytes {
		t.Fatalf("KindByName(bytes) = %s, %v", k, ok)
	}
}

func TestBytesCompare(t *testing.T) {
	b := func(s string) herald.Value { return herald.Bytes([]byte(s)) }
	cases := []struct {
		a, b herald.Value
		want int
	}{
		{b("abc"), b("abc"), 0},
		{b(""), herald.Bytes(nil), 0},
		{b("ab"), b("abc"), -1},
		{b("\x00"), b("\xff"), -1}, // bytewise, unsigned
		{b("b"), b("abc"), 1},
		{b("a"), herald.String("a"), 1},                // another kind: never equal
		{b("a"), herald.Map(nil, nil), 1},              // Bytes sort after every other kind
		{herald.Null, b(""), -1},                       // null first
		{herald.List(b("a")), herald.List(b("b")), -1}, // inside lists too
	}
	for _, c := range cases {
		if got := herald.Compare(c.a, c.b); got != c.want {
			t.Errorf("Compare(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := herald.Compare(c.b, c.a); got != -c.want {
			t.Errorf("Compare(%s, %s) = %d, want %d (antisymmetry)", c.b, c.a, got, -c.want)
		}
	}
	if b("a").Equal(herald.String("a")) {
		t.Error(`Bytes "a" equals String "a"`)
	}
}

// A Bytes value's encoding is kind 9, the length and the bytes; it round-trips, alone,
// in lists, maps and attributes, and a body holds it as it holds a long String.
func TestBytesBinary(t *testing.T) {
	v := herald.Bytes([]byte{0, 1, 0xff})
	enc := v.AppendBinary(nil)
	if hex.EncodeToString(enc) != "0903"+"0001ff" || v.EncodedLen() != len(enc) {
		t.Fatalf("encoding of %s = %x (EncodedLen %d)", v, enc, v.EncodedLen())
	}
	big := herald.Bytes(bytes.Repeat([]byte{0xfe, 'x'}, herald.InlineLimit))
	for _, v := range []herald.Value{
		v, herald.Bytes(nil), big,
		herald.List(v, herald.String("\x00\x01\xff")),
		herald.Map([]string{"b"}, []herald.Value{v}),
	} {
		enc := v.AppendBinary(nil)
		got, rest, err := herald.DecodeValue(enc)
		if err != nil || len(rest) != 0 || !got.Equal(v) || got.Kind() != v.Kind() || v.EncodedLen() != len(enc) {
			t.Errorf("round trip of %.40s: %.40s, rest %d, %v", v, got, len(rest), err)
		}
		x, rest, err := herald.DecodeInterface(enc, 4)
		if err != nil || len(rest) != 0 || !reflect.DeepEqual(x, v.Interface()) {
			t.Errorf("DecodeInterface(%.40s) = %#v, %v; want %#v", v, x, err, v.Interface())
		}
		for i := range enc {
			if _, _, err := herald.DecodeValue(enc[:i]); err == nil {
				t.Errorf("a prefix of %d bytes of %.40s decodes", i, v)
			}
		}
	}
	// A []byte from DecodeInterface is the caller's: changing it changes no encoding.
	x, _, _ := herald.DecodeInterface(enc, 1)
	x.([]byte)[0] = 7
	if enc[2] != 0 {
		t.Fatal("DecodeInterface's []byte shares the encoding")
	}

	attrs := herald.AttrsOf(map[string]herald.Value{"a": v, "big": big, "z": herald.String("after")})
	inline, body := herald.SplitAttrs(attrs)
	if len(body) != 1 || body[0].Name != "big" || len(inline) != 2 {
		t.Fatalf("SplitAttrs: inline %v, body %v", inline, body)
	}
	data := body.AppendBinary(nil)
	b := herald.NewBody(7, body, data, nil)
	if got, err := b.Attr("n1", "big"); err != nil || !got.Equal(big) || got.Kind() != herald.KindBytes {
		t.Fatalf("body attribute big = %.40s, %v", got, err)
	}
	all := attrs.AppendBinary(nil)
	for _, name := range []string{"a", "big", "z"} { // z: AttrOf skips the Bytes before it
		if got, err := herald.AttrOf(all, name); err != nil || !got.Equal(attrs.Get(name)) || got.Kind() != attrs.Get(name).Kind() {
			t.Errorf("AttrOf(%s) = %.40s, %v", name, got, err)
		}
	}
	if dec, rest, err := herald.DecodeAttrs(all); err != nil || len(rest) != 0 || !dec.Equal(attrs) {
		t.Fatalf("DecodeAttrs: %v, %v", dec, err)
	}
}

// Values written before Bytes existed (kinds 0 to 8) decode unchanged: the encodings
// below are what the store and the wire held then, byte for byte, and encoding the
// values again gives the same bytes.
func TestEncodingsBeforeBytesStillDecode(t *testing.T) {
	ts := time.Unix(1700000000, 123).UTC()
	cases := []struct {
		hex  string
		want herald.Value
	}{
		{"00", herald.Null},
		{"0102", herald.Bool(true)},
		{"0253", herald.Int(-42)},
		{"03400a000000000000", herald.Float(3.25)},
		{"040668c3a96c6c6f", herald.String("héllo")},
		{"05f681d0e2c6bfce972f", herald.Timestamp(ts)},
		{"06ffffc48bc6d101", herald.Duration(-time.Hour)},
		{"07030202070104017800", herald.List(herald.Int(1), herald.List(herald.String("x")), herald.Null)},
		{"0802026964040161016e0202", herald.Map([]string{"id", "n"}, []herald.Value{herald.String("a"), herald.Int(1)})},
		// What ValueOf([]byte("hi")) stored before: a List of Ints, and it stays one.
		{"070202d00102d201", herald.List(herald.Int(104), herald.Int(105))},
	}
	for _, c := range cases {
		enc, err := hex.DecodeString(c.hex)
		if err != nil {
			t.Fatal(err)
		}
		got, rest, err := herald.DecodeValue(enc)
		if err != nil || len(rest) != 0 || !got.Equal(c.want) || got.Kind() != c.want.Kind() {
			t.Errorf("DecodeValue(%s) = %s, %v; want %s", c.hex, got, err, c.want)
		}
		if again := hex.EncodeToString(c.want.AppendBinary(nil)); again != c.hex {
			t.Errorf("%s encodes as %s, before as %s", c.want, again, c.hex)
		}
	}
	// Attributes as a node's record held them: a count, then names and values.
	attrs, _ := hex.DecodeString("02016104017801620202")
	a, rest, err := herald.DecodeAttrs(attrs)
	if err != nil || len(rest) != 0 || a.Get("a").AsString() != "x" || a.Get("b").AsInt() != 1 {
		t.Fatalf("DecodeAttrs = %v, %v", a, err)
	}
}

func TestBytesJSON(t *testing.T) {
	v := herald.Bytes([]byte("hello"))
	row := []herald.Value{v, herald.String("aGVsbG8="), herald.List(v), herald.Map([]string{"body"}, []herald.Value{v}), herald.Bytes(nil)}
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"$bytes":"aGVsbG8="},"aGVsbG8=",[{"$bytes":"aGVsbG8="}],{"body":{"$bytes":"aGVsbG8="}},{"$bytes":""}]`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	// FromJSON reads back what MarshalJSON wrote, kinds included.
	var x []any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		t.Fatal(err)
	}
	for i, e := range x[:3] {
		got, err := herald.FromJSON(e)
		if err != nil || !got.Equal(row[i]) || got.Kind() != row[i].Kind() {
			t.Errorf("FromJSON(%v) = %s, %v; want %s", e, got, err, row[i])
		}
	}
	for _, in := range []string{
		`{"$bytes":"aGVsbG8"}`,           // not padded
		`{"$bytes":"aGVs bG8="}`,         // not base64
		`{"$bytes":"aGVsbG8_"}`,          // the URL alphabet
		`{"$bytes":5}`,                   // not a string
		`{"$bytes":"aGVsbG8=","more":1}`, // another key
	} {
		var x any
		if err := json.Unmarshal([]byte(in), &x); err != nil {
			t.Fatal(err)
		}
		if got, err := herald.FromJSON(x); err == nil {
			t.Errorf("FromJSON(%s) = %s, want an error", in, got)
		}
	}
}

type blob []byte
type octet uint8

func TestValueOfBytes(t *testing.T) {
	cases := []struct {
		in   any
		want herald.Value
	}{
		{[]byte("hello"), herald.Bytes([]byte("hello"))},
		{[]byte{}, herald.Bytes(nil)},
		{blob("hi"), herald.Bytes([]byte("hi"))},
		{[]octet{1, 2}, herald.Bytes([]byte{1, 2})},
		{[4]byte{1, 2, 3, 4}, herald.Bytes([]byte{1, 2, 3, 4})},
		{net.IPv4(127, 0, 0, 1).To4(), herald.Bytes([]byte{127, 0, 0, 1})},
		{[][]byte{[]byte("a"), nil}, herald.List(herald.Bytes([]byte("a")), herald.Bytes(nil))},
		{[]any{[]byte("a")}, herald.List(herald.Bytes([]byte("a")))},
		// JSON text is text: a json.RawMessage is a String.
		{json.RawMessage(`{"a":1}`), herald.String(`{"a":1}`)},
		// Other integer slices stay lists.
		{[]int{104, 105}, herald.List(herald.Int(104), herald.Int(105))},
		{[]int8{1}, herald.List(herald.Int(1))},
	}
	for _, c := range cases {
		got, err := herald.ValueOf(c.in)
		if err != nil || !got.Equal(c.want) || got.Kind() != c.want.Kind() {
			t.Errorf("ValueOf(%#v) = %s (%s), %v; want %s (%s)", c.in, got, got.Kind(), err, c.want, c.want.Kind())
		}
	}
	in := []byte("abc")
	v, _ := herald.ValueOf(in)
	in[0] = 'x'
	if string(v.AsBytes()) != "abc" {
		t.Fatal("ValueOf shares the caller's []byte")
	}
	if got := v.Interface(); !reflect.DeepEqual(got, []byte("abc")) {
		t.Fatalf("Interface() = %#v", got)
	}
}

func TestBytesStringViews(t *testing.T) {
	v := herald.BytesFromString("h\xffi")
	if v.Kind() != herald.KindBytes || v.BytesAsString() != "h\xffi" || string(v.AsBytes()) != "h\xffi" {
		t.Fatalf("BytesFromString = %s (%s)", v, v.Kind())
	}
	if herald.String("x").BytesAsString() != "" || herald.BytesFromString("").BytesAsString() != "" || !herald.BytesFromString("").Equal(herald.Bytes(nil)) {
		t.Fatal("BytesAsString of another kind, or of empty Bytes")
	}
}

func ExampleBytes() {
	v := herald.Bytes([]byte("hello"))
	j, _ := json.Marshal(v)
	fmt.Println(v.Kind(), v, string(j))

	var x any
	_ = json.Unmarshal(j, &x)
	back, _ := herald.FromJSON(x)
	fmt.Println(back.Kind(), back.Equal(v), string(back.AsBytes()))
	// Output:
	// Bytes 0x68656c6c6f {"$bytes":"aGVsbG8="}
	// Bytes true hello
}
