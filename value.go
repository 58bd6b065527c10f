package herald

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// Kind is the dynamic type of a Value.
type Kind uint8

// The value kinds of the data model. The order is the cross-kind sort order.
const (
	KindNull Kind = iota
	KindBool
	KindInt
	KindFloat
	KindString
	KindTimestamp
	KindDuration
	KindList
	// KindMap is a nested value: string keys, in order, each with a value of any kind.
	// Attributes may hold maps (declared `Map`, or `Any`); query results also use the
	// kind to return a whole node or edge, which an attribute never holds.
	KindMap
	// KindBytes is a string of bytes that need not be text: a JSON or protobuf payload,
	// an image, a hash. It comes last because the kind's number is what stored data and
	// the binary encoding carry, so the kinds before it keep theirs.
	KindBytes
)

var kindNames = [...]string{"Null", "Bool", "Int", "Float", "String", "Timestamp", "Duration", "List", "Map", "Bytes"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// KindByName resolves a declared attribute type name ("Int", "String", ...).
func KindByName(name string) (Kind, bool) {
	for i, n := range kindNames {
		if strings.EqualFold(n, name) {
			return Kind(i), true
		}
	}
	return KindNull, false
}

// Value is an immutable attribute value. The zero Value is null. It is 24 bytes, a
// union by kind: the scalar kinds keep their bits in i; a String or Bytes keeps its
// bytes in p and its length in i; a List or Map keeps its *composite in p. Values are
// not comparable with ==, which would compare where strings are held rather than what
// they hold: use Compare.
type Value struct {
	_ [0]func() // not comparable (see above)
	p unsafe.Pointer
	i int64 // Bool (0/1), Int, Timestamp (unix nanos), Duration (nanos), Float (IEEE bits); String, Bytes: the length
	k Kind
}

// str returns the bytes of a String or Bytes value, as a string.
func (v Value) str() string { return unsafe.String((*byte)(v.p), int(v.i)) }

// x returns the elements of a List or Map value, nil for any other kind.
func (v Value) x() *composite {
	if v.k != KindList && v.k != KindMap {
		return nil
	}
	return (*composite)(v.p)
}

// stringValue, bytesValue and compositeValue make the union's String, Bytes, and List
// or Map forms. A Bytes value holds its bytes as an immutable string does.
func stringValue(s string) Value { return textValue(KindString, s) }

func bytesValue(s string) Value { return textValue(KindBytes, s) }

func textValue(k Kind, s string) Value {
	if s == "" {
		return Value{k: k}
	}
	return Value{k: k, p: unsafe.Pointer(unsafe.StringData(s)), i: int64(len(s))}
}

func compositeValue(k Kind, c *composite) Value { return Value{k: k, p: unsafe.Pointer(c)} }

// composite holds the elements of a List, and of a Map with its keys.
type composite struct {
	l []Value
	m []string // keys of a Map, parallel to l
}

// elems returns the elements of a List or Map.
func (v Value) elems() []Value {
	if c := v.x(); c != nil {
		return c.l
	}
	return nil
}

// keys returns the keys of a Map.
func (v Value) keys() []string {
	if c := v.x(); c != nil {
		return c.m
	}
	return nil
}

// f returns the float of a Float value.
func (v Value) f() float64 { return math.Float64frombits(uint64(v.i)) }

// Null is the null value.
var Null = Value{}

// Bool returns a Bool value.
func Bool(b bool) Value {
	if b {
		return Value{k: KindBool, i: 1}
	}
	return Value{k: KindBool}
}

// Int returns an Int value.
func Int(i int64) Value { return Value{k: KindInt, i: i} }

// Float returns a Float value.
func Float(f float64) Value { return Value{k: KindFloat, i: int64(math.Float64bits(f))} }

// String returns a String value.
func String(s string) Value { return stringValue(s) }

// Timestamp returns a Timestamp value with nanosecond precision, in UTC.
func Timestamp(t time.Time) Value { return Value{k: KindTimestamp, i: t.UnixNano()} }

// Duration returns a Duration value.
func Duration(d time.Duration) Value { return Value{k: KindDuration, i: int64(d)} }

// List returns a List value holding a copy of vs.
func List(vs ...Value) Value {
	return compositeValue(KindList, &composite{l: append([]Value(nil), vs...)})
}

// Map returns a Map value with the given keys and values (equal length), kept in the
// given order.
func Map(keys []string, vals []Value) Value {
	return compositeValue(KindMap, &composite{m: append([]string(nil), keys...), l: append([]Value(nil), vals...)})
}

// MapOf returns a Map value over keys and vals without copying them: the caller must
// not modify either afterwards. Projections that build many rows with the same keys
// share one keys slice this way.
func MapOf(keys []string, vals []Value) Value {
	return compositeValue(KindMap, &composite{m: keys, l: vals})
}

// NewMapOf returns a Map value over keys, and its values for the caller to fill in
// (len(keys) of them, null until then) before anyone else reads the map; the caller
// must not modify keys afterwards. For up to four keys the map and its values are one
// allocation: a consume group projects every message it delivers this way.
func NewMapOf(keys []string) (Value, []Value) {
	var c *composite
	switch len(keys) {
	case 1:
		c = inlineValues(func(v *[1]Value) []Value { return v[:] })
	case 2:
		c = inlineValues(func(v *[2]Value) []Value { return v[:] })
	case 3:
		c = inlineValues(func(v *[3]Value) []Value { return v[:] })
	case 4:
		c = inlineValues(func(v *[4]Value) []Value { return v[:] })
	default:
		c = &composite{l: make([]Value, len(keys))}
	}
	c.m = keys
	return compositeValue(KindMap, c), c.l
}

// inlineValues returns a composite whose values are the array A allocated with it, in
// one allocation; all slices A (a [n]Value).
func inlineValues[A any](all func(*A) []Value) *composite {
	x := &struct {
		composite
		v A
	}{}
	x.l = all(&x.v)
	return &x.composite
}

// MapKeys returns the keys of a Map value; callers must not modify them.
func (v Value) MapKeys() []string { return v.keys() }

// MapValues returns the values of a Map value, parallel to MapKeys; callers must not
// modify them.
func (v Value) MapValues() []Value {
	if v.k != KindMap {
		return nil
	}
	return v.elems()
}

// MapGet returns the value under key in a Map value, or null.
func (v Value) MapGet(key string) Value {
	for i, k := range v.keys() {
		if k == key {
			return v.x().l[i]
		}
	}
	return Null
}

// Kind reports the value's kind.
func (v Value) Kind() Kind { return v.k }

// IsNull reports whether v is null.
func (v Value) IsNull() bool { return v.k == KindNull }

// AsBool returns the boolean; false unless v is a true Bool.
func (v Value) AsBool() bool { return v.k == KindBool && v.i != 0 }

// AsInt returns the integer of an Int, Timestamp (unix nanos) or Duration (nanos).
func (v Value) AsInt() int64 { return v.bits() }

// bits returns i for the kinds that keep their value there, 0 for the others.
func (v Value) bits() int64 {
	if v.k == KindString || v.k >= KindList { // String, List, Map, Bytes
		return 0
	}
	return v.i
}

// AsFloat returns a Float, or an Int converted to float.
func (v Value) AsFloat() float64 {
	if v.k == KindInt {
		return float64(v.i)
	}
	return math.Float64frombits(uint64(v.bits()))
}

// AsString returns the string of a String value.
func (v Value) AsString() string {
	if v.k != KindString {
		return ""
	}
	return v.str()
}

// AsTime returns the time of a Timestamp value, in UTC.
func (v Value) AsTime() time.Time { return time.Unix(0, v.bits()).UTC() }

// AsDuration returns the duration of a Duration value.
func (v Value) AsDuration() time.Duration { return time.Duration(v.bits()) }

// AsList returns the elements of a List value; callers must not modify them.
func (v Value) AsList() []Value {
	if v.k != KindList {
		return nil
	}
	return v.elems()
}

// IsNumeric reports whether v is an Int or a Float.
func (v Value) IsNumeric() bool { return v.k == KindInt || v.k == KindFloat }

// Equal reports whether a and b are the same value. Int and Float compare numerically.
func (a Value) Equal(b Value) bool { return Compare(a, b) == 0 }

// Compare orders two values: numbers numerically across Int and Float, otherwise by kind
// and then by value (Strings and Bytes byte by byte). Null sorts first. It returns -1, 0
// or +1.
func Compare(a, b Value) int {
	if a.IsNumeric() && b.IsNumeric() {
		switch {
		case a.k == KindInt && b.k == KindInt:
			return cmpInt(a.i, b.i)
		case a.k == KindInt:
			return cmpIntFloat(a.i, b.f())
		case b.k == KindInt:
			return -cmpIntFloat(b.i, a.f())
		}
		af, bf := a.AsFloat(), b.AsFloat()
		switch {
		case af < bf:
			return -1
		case af > bf:
			return 1
		case af == bf:
			return 0
		}
		// NaN sorts before every other number.
		an, bn := math.IsNaN(af), math.IsNaN(bf)
		switch {
		case an && bn:
			return 0
		case an:
			return -1
		default:
			return 1
		}
	}
	if a.k != b.k {
		ak, bk := a.k, b.k
		if ak == KindFloat {
			ak = KindInt
		}
		if bk == KindFloat {
			bk = KindInt
		}
		return cmpInt(int64(ak), int64(bk))
	}
	switch a.k {
	case KindNull:
		return 0
	case KindBool, KindTimestamp, KindDuration:
		return cmpInt(a.i, b.i)
	case KindString, KindBytes:
		return strings.Compare(a.str(), b.str()) // bytewise
	case KindList, KindMap:
		am, bm := a.keys(), b.keys()
		for i := 0; i < len(am) && i < len(bm); i++ {
			if c := strings.Compare(am[i], bm[i]); c != 0 {
				return c
			}
		}
		al, bl := a.elems(), b.elems()
		for i := 0; i < len(al) && i < len(bl); i++ {
			if c := Compare(al[i], bl[i]); c != 0 {
				return c
			}
		}
		return cmpInt(int64(len(al)), int64(len(bl)))
	}
	return 0
}

// cmpIntFloat compares an integer with a float exactly (no rounding of the integer), so
// that equality between Int and Float is transitive. NaN sorts before every number.
func cmpIntFloat(i int64, f float64) int {
	switch {
	case math.IsNaN(f):
		return 1
	case f >= 1<<63:
		return -1
	case f < -(1 << 63):
		return 1
	}
	fl := math.Floor(f)
	if c := cmpInt(i, int64(fl)); c != 0 {
		return c
	}
	if f > fl {
		return -1
	}
	return 0
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// String renders v in the query language's literal syntax; a Timestamp, which has no
// literal, in RFC 3339, and Bytes, which have none either, as 0x and their bytes in
// hexadecimal (0x68656c6c6f).
func (v Value) String() string {
	switch v.k {
	case KindNull:
		return "null"
	case KindBool:
		return strconv.FormatBool(v.i != 0)
	case KindInt:
		return strconv.FormatInt(v.i, 10)
	case KindFloat:
		s := strconv.FormatFloat(v.f(), 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEnN") {
			s += ".0"
		}
		return s
	case KindString:
		return strconv.Quote(v.str())
	case KindTimestamp:
		return v.AsTime().Format(time.RFC3339Nano)
	case KindDuration:
		return v.AsDuration().String()
	case KindBytes:
		return "0x" + hex.EncodeToString(unsafe.Slice((*byte)(v.p), int(v.i)))
	case KindList:
		parts := make([]string, len(v.elems()))
		for i, e := range v.elems() {
			parts[i] = e.String()
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case KindMap:
		parts := make([]string, len(v.elems()))
		for i, e := range v.elems() {
			parts[i] = v.x().m[i] + ": " + e.String()
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return "?"
}

// Interface converts v to a plain Go value: nil, bool, int64, float64, string, an RFC
// 3339 string for timestamps, a Go duration string for durations, a []byte (a copy) for
// Bytes, []any for lists and map[string]any for maps. Given to encoding/json, every kind
// but Bytes comes out as MarshalJSON writes it; a []byte would come out as a bare base64
// string, where MarshalJSON writes the tagged form {"$bytes": "<base64>"}.
func (v Value) Interface() any {
	switch v.k {
	case KindBool:
		return v.i != 0
	case KindInt:
		return v.i
	case KindFloat:
		return v.f()
	case KindString:
		return v.str()
	case KindTimestamp:
		return v.AsTime().Format(time.RFC3339Nano)
	case KindDuration:
		return v.AsDuration().String()
	case KindBytes:
		return v.AsBytes()
	case KindList:
		out := make([]any, len(v.elems()))
		for i, e := range v.elems() {
			out[i] = e.Interface()
		}
		return out
	case KindMap:
		out := make(map[string]any, len(v.elems()))
		for i, e := range v.elems() {
			out[v.x().m[i]] = e.Interface()
		}
		return out
	}
	return nil
}

// MarshalJSON encodes v as its plain JSON form (see Interface), and Bytes in the tagged
// form {"$bytes": "<standard base64>"}, which FromJSON reads back.
func (v Value) MarshalJSON() ([]byte, error) {
	switch {
	case v.k == KindBytes:
		return v.appendJSONBytes(nil), nil
	case v.k == KindFloat && (math.IsNaN(v.f()) || math.IsInf(v.f(), 0)):
		return json.Marshal(v.String())
	case v.k == KindMap:
		// Keep the map's own key order in the output.
		var b strings.Builder
		b.WriteByte('{')
		for i, e := range v.elems() {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(v.x().m[i])
			b.Write(k)
			b.WriteByte(':')
			ev, err := e.MarshalJSON()
			if err != nil {
				return nil, err
			}
			b.Write(ev)
		}
		b.WriteByte('}')
		return []byte(b.String()), nil
	case v.k == KindList:
		var b strings.Builder
		b.WriteByte('[')
		for i, e := range v.elems() {
			if i > 0 {
				b.WriteByte(',')
			}
			ev, err := e.MarshalJSON()
			if err != nil {
				return nil, err
			}
			b.Write(ev)
		}
		b.WriteByte(']')
		return []byte(b.String()), nil
	}
	return json.Marshal(v.Interface())
}

// FromJSON converts a decoded JSON value (as produced by encoding/json with UseNumber
// or plain decoding) into a Value. An object is a Map with its keys sorted, except
// {"$bytes": "<standard base64>"}, the tagged form of a Bytes value (MarshalJSON).
func FromJSON(x any) (Value, error) {
	switch t := x.(type) {
	case nil:
		return Null, nil
	case bool:
		return Bool(t), nil
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return Int(i), nil
		}
		if !strings.ContainsAny(string(t), ".eE") {
			// An integer that does not fit: an Int past 64 bits is an error, never
			// a Float that quietly lost its low digits.
			return Null, fmt.Errorf("integer %s does not fit in an Int (64 bits); send it as a string, or as a float with a decimal point", t)
		}
		f, err := t.Float64()
		if err != nil {
			return Null, fmt.Errorf("bad number %q", t)
		}
		return Float(f), nil
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return Int(int64(t)), nil
		}
		return Float(t), nil
	case int:
		return Int(int64(t)), nil
	case int64:
		return Int(t), nil
	case string:
		return String(t), nil
	case []any:
		vs := make([]Value, len(t))
		for i, e := range t {
			v, err := FromJSON(e)
			if err != nil {
				return Null, err
			}
			vs[i] = v
		}
		return compositeValue(KindList, &composite{l: vs}), nil
	case map[string]any:
		if _, ok := t[BytesJSONKey]; ok {
			return bytesFromJSON(t)
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		vs := make([]Value, len(keys))
		for i, k := range keys {
			v, err := FromJSON(t[k])
			if err != nil {
				return Null, err
			}
			vs[i] = v
		}
		return compositeValue(KindMap, &composite{m: keys, l: vs}), nil
	}
	return Null, fmt.Errorf("unsupported JSON value of type %T", x)
}

// ValueOf converts a Go value to a Value: nil, bool, any integer or float type, string,
// time.Time (a Timestamp), time.Duration, json.Number, a []byte or any other slice or
// array of bytes (Bytes, a copy), and slices or arrays of the others (a List). A
// json.RawMessage is JSON text and becomes a String. Maps and other types are not
// values of the data model.
func ValueOf(x any) (Value, error) {
	switch t := x.(type) {
	case nil:
		return Null, nil
	case Value:
		return t, nil
	case bool:
		return Bool(t), nil
	case int:
		return Int(int64(t)), nil
	case int8:
		return Int(int64(t)), nil
	case int16:
		return Int(int64(t)), nil
	case int32:
		return Int(int64(t)), nil
	case int64:
		return Int(t), nil
	case uint:
		return uintValue(uint64(t))
	case uint8:
		return Int(int64(t)), nil
	case uint16:
		return Int(int64(t)), nil
	case uint32:
		return Int(int64(t)), nil
	case uint64:
		return uintValue(t)
	case float32:
		return Float(float64(t)), nil
	case float64:
		return Float(t), nil
	case string:
		return String(t), nil
	case time.Time:
		return Timestamp(t), nil
	case time.Duration:
		return Duration(t), nil
	case json.Number:
		return FromJSON(t)
	case []byte:
		return Bytes(t), nil
	case json.RawMessage:
		return String(string(t)), nil
	case []any:
		vs := make([]Value, len(t))
		for i, e := range t {
			v, err := ValueOf(e)
			if err != nil {
				return Null, err
			}
			vs[i] = v
		}
		return List(vs...), nil
	}
	rv := reflect.ValueOf(x)
	if k := rv.Kind(); k == reflect.Slice || k == reflect.Array {
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return bytesOf(rv), nil
		}
		vs := make([]Value, rv.Len())
		for i := range vs {
			v, err := ValueOf(rv.Index(i).Interface())
			if err != nil {
				return Null, err
			}
			vs[i] = v
		}
		return List(vs...), nil
	}
	return Null, fmt.Errorf("a %T is not a value (want nil, bool, a number, string, time.Time, time.Duration, []byte or a list)", x)
}

func uintValue(u uint64) (Value, error) {
	if u > math.MaxInt64 {
		return Null, fmt.Errorf("%d is out of the Int range", u)
	}
	return Int(int64(u)), nil
}
