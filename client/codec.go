package client

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/herald-mq/herald"
)

// Codec turns a Go value into the attributes of a message (Publish) and reads a
// message's match back into a Go value (Message.Decode). JSON is the default; Dial's
// WithCodec sets another for a client.
type Codec interface {
	// Marshal returns the attributes of v.
	Marshal(v any) (map[string]herald.Value, error)
	// Unmarshal stores match, a Message's Match, in the value v points to.
	Unmarshal(match map[string]any, v any) error
}

// JSON is the default codec. It reads a struct as encoding/json does — exported
// fields, named by their json tag (`json:"name"`, `json:"-"` to leave one out,
// `json:",omitempty"`), embedded structs' fields promoted — and gives each field the
// Herald kind of its Go type, so that a WATCH can read it:
//
//	bool                     Bool
//	integers                 Int (a uint64 past the Int range is an error)
//	float32, float64         Float
//	string                   String
//	[]byte, [N]byte          Bytes (bytes stay bytes: no base64 in a String)
//	time.Time                Timestamp
//	time.Duration            Duration
//	slices, arrays           List
//	structs, string maps     Map (a nested value; see below)
//	herald.Value             itself
//	pointers, interfaces     what they hold; nil is null
//
// A type with a MarshalJSON method is stored as its JSON (objects as Maps), one with
// MarshalText as a String; Unmarshal calls their UnmarshalJSON and UnmarshalText. The
// top-level value is a struct or a map with string keys (or a pointer to one): its
// fields are the message's attributes, its null ones left out. A field named "id" is
// the node's id, not an attribute: Publish gives the node that id when it is set, and
// Unmarshal fills it with the node's id. Unmarshal matches names as encoding/json does
// (exactly, else ignoring case), ignores what the value has no field for, and accepts
// a Timestamp's and a Duration's text form, which is how a Match carries them.
//
// A nested struct or map is a Map value, stored as a Map attribute (declared `Map` or
// `Any`, or on an undeclared type) and read with selectors such as `m.customer.id`;
// a slice of structs is a List of Maps.
var JSON Codec = jsonCodec{}

type jsonCodec struct{}

// maxDepth bounds how deep the codec follows a value (a cycle through pointers ends
// there with an error).
const maxDepth = 32

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
	valueType    = reflect.TypeFor[herald.Value]()
	jsonMarshal  = reflect.TypeFor[json.Marshaler]()
	textMarshal  = reflect.TypeFor[encoding.TextMarshaler]()
	jsonUnmarsh  = reflect.TypeFor[json.Unmarshaler]()
	textUnmarsh  = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func (jsonCodec) Marshal(v any) (map[string]herald.Value, error) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return nil, codecError("marshal", "", "a nil %T has no attributes", v)
		}
		rv = rv.Elem()
	}
	switch {
	case rv.Kind() == reflect.Struct && rv.Type() != timeType:
	case rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String:
	default:
		return nil, codecError("marshal", "", "a %T has no attributes: publish a struct or a map with string keys", v)
	}
	m, err := encodeValue(rv, "", 0)
	if err != nil {
		return nil, err
	}
	keys, vals := m.MapKeys(), m.MapValues()
	out := make(map[string]herald.Value, len(keys))
	for i, k := range keys {
		if !vals[i].IsNull() {
			out[k] = vals[i]
		}
	}
	return out, nil
}

// codecError is the error of a value the codec cannot convert (E4019), naming where
// in the value it is.
func codecError(op, path, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	return invalid("%s: %s", op, msg)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// encodeValue converts rv to a Value; path names it in errors.
func encodeValue(rv reflect.Value, path string, depth int) (herald.Value, error) {
	if depth > maxDepth {
		return herald.Null, codecError("marshal", path, "nested deeper than %d (a cycle?)", maxDepth)
	}
	if !rv.IsValid() {
		return herald.Null, nil
	}
	t := rv.Type()
	switch {
	case t == valueType:
		return rv.Interface().(herald.Value), nil
	case t == timeType:
		return herald.Timestamp(rv.Interface().(time.Time)), nil
	case t == durationType:
		return herald.Duration(time.Duration(rv.Int())), nil
	case t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface && t.Implements(jsonMarshal):
		return encodeJSONMarshaler(rv, path)
	case t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface && t.Implements(textMarshal):
		b, err := rv.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return herald.Null, codecError("marshal", path, "%v", err)
		}
		return herald.String(string(b)), nil
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return herald.Null, nil
		}
		return encodeValue(rv.Elem(), path, depth+1)
	case reflect.Bool:
		return herald.Bool(rv.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return herald.Int(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := rv.Uint(); u > math.MaxInt64 {
			return herald.Null, codecError("marshal", path, "%d is past the Int range", u)
		}
		return herald.Int(int64(rv.Uint())), nil
	case reflect.Float32, reflect.Float64:
		return herald.Float(rv.Float()), nil
	case reflect.String:
		return herald.String(rv.String()), nil
	case reflect.Slice, reflect.Array:
		return encodeList(rv, path, depth)
	case reflect.Map:
		return encodeMap(rv, path, depth)
	case reflect.Struct:
		return encodeStruct(rv, path, depth)
	}
	return herald.Null, codecError("marshal", path, "a %s is not a value", t)
}

func encodeList(rv reflect.Value, path string, depth int) (herald.Value, error) {
	if rv.Kind() == reflect.Slice && rv.IsNil() {
		return herald.Null, nil
	}
	if rv.Type().Elem().Kind() == reflect.Uint8 {
		b := make([]byte, rv.Len())
		reflect.Copy(reflect.ValueOf(b), rv)
		return herald.Bytes(b), nil
	}
	vs := make([]herald.Value, rv.Len())
	for i := range vs {
		v, err := encodeValue(rv.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
		if err != nil {
			return herald.Null, err
		}
		vs[i] = v
	}
	return herald.List(vs...), nil
}

func encodeMap(rv reflect.Value, path string, depth int) (herald.Value, error) {
	if rv.Type().Key().Kind() != reflect.String {
		return herald.Null, codecError("marshal", path, "a %s is not a value: map keys must be strings", rv.Type())
	}
	if rv.IsNil() {
		return herald.Null, nil
	}
	keys := make([]string, 0, rv.Len())
	for _, k := range rv.MapKeys() {
		keys = append(keys, k.String())
	}
	slices.Sort(keys)
	vals := make([]herald.Value, len(keys))
	for i, k := range keys {
		v, err := encodeValue(rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())), join(path, k), depth+1)
		if err != nil {
			return herald.Null, err
		}
		vals[i] = v
	}
	return herald.MapOf(keys, vals), nil
}

func encodeStruct(rv reflect.Value, path string, depth int) (herald.Value, error) {
	fields := fieldsOf(rv.Type())
	keys := make([]string, 0, len(fields))
	vals := make([]herald.Value, 0, len(fields))
	for _, f := range fields {
		fv, ok := fieldByIndex(rv, f.index)
		if !ok || (f.omitEmpty && fv.IsZero()) {
			continue
		}
		v, err := encodeValue(fv, join(path, f.name), depth+1)
		if err != nil {
			return herald.Null, err
		}
		if f.omitEmpty && v.IsNull() {
			continue
		}
		keys = append(keys, f.name)
		vals = append(vals, v)
	}
	return herald.MapOf(keys, vals), nil
}

// encodeJSONMarshaler stores a value by its own JSON: objects become Maps.
func encodeJSONMarshaler(rv reflect.Value, path string) (herald.Value, error) {
	raw, err := rv.Interface().(json.Marshaler).MarshalJSON()
	if err != nil {
		return herald.Null, codecError("marshal", path, "%v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return herald.Null, codecError("marshal", path, "its MarshalJSON: %v", err)
	}
	v, err := plainValue(x, 0)
	if err != nil {
		return herald.Null, codecError("marshal", path, "%v", err)
	}
	return v, nil
}

// plainValue converts a plain value — decoded JSON, or a Match's values — to a Value:
// objects become Maps, except the tagged form of Bytes.
func plainValue(x any, depth int) (herald.Value, error) {
	if depth > maxDepth {
		return herald.Null, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	switch t := x.(type) {
	case map[string]any:
		if _, ok := t[herald.BytesJSONKey]; ok && len(t) == 1 {
			return herald.FromJSON(t)
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		vals := make([]herald.Value, len(keys))
		for i, k := range keys {
			v, err := plainValue(t[k], depth+1)
			if err != nil {
				return herald.Null, err
			}
			vals[i] = v
		}
		return herald.MapOf(keys, vals), nil
	case []any:
		vs := make([]herald.Value, len(t))
		for i, e := range t {
			v, err := plainValue(e, depth+1)
			if err != nil {
				return herald.Null, err
			}
			vs[i] = v
		}
		return herald.List(vs...), nil
	case json.Number:
		return herald.FromJSON(t)
	}
	return herald.ValueOf(x)
}

// field is one field of a struct as the codec sees it.
type field struct {
	name      string
	index     []int
	omitEmpty bool
}

var fieldCache sync.Map // reflect.Type → []field

// fieldsOf lists the fields of struct type t by encoding/json's rules: exported
// fields by their json names, embedded structs' fields promoted (a name the outer
// struct has already wins).
func fieldsOf(t reflect.Type) []field {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]field)
	}
	var out []field
	seen := map[string]bool{}
	var walk func(t reflect.Type, index []int, depth int)
	walk = func(t reflect.Type, index []int, depth int) {
		var embedded []reflect.StructField
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				embedded = append(embedded, sf)
				continue
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			out = append(out, field{name: name, index: append(slices.Clone(index), i), omitEmpty: strings.Contains(","+opts+",", ",omitempty,")})
		}
		if depth < maxDepth {
			for _, sf := range embedded {
				ft := sf.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				walk(ft, append(slices.Clone(index), sf.Index...), depth+1)
			}
		}
	}
	walk(t, nil, 0)
	fieldCache.Store(t, out)
	return out
}

// fieldByIndex follows index through rv; ok is false where a nil embedded pointer
// leaves the field out.
func fieldByIndex(rv reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && rv.Kind() == reflect.Pointer {
			if rv.IsNil() {
				return reflect.Value{}, false
			}
			rv = rv.Elem()
		}
		rv = rv.Field(x)
	}
	return rv, true
}

// fieldForSet follows index through rv, allocating nil embedded pointers.
func fieldForSet(rv reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && rv.Kind() == reflect.Pointer {
			if rv.IsNil() {
				if !rv.CanSet() {
					return reflect.Value{}, false
				}
				rv.Set(reflect.New(rv.Type().Elem()))
			}
			rv = rv.Elem()
		}
		rv = rv.Field(x)
	}
	return rv, true
}
