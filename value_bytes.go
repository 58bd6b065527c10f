package herald

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"unsafe"
)

// BytesJSONKey is the key of the JSON object that stands for a Bytes value:
// {"$bytes": "aGVsbG8="} holds the bytes of "hello" in standard base64 (RFC 4648 §4,
// padded). A bare JSON string is always a String, so the two kinds stay apart in JSON.
const BytesJSONKey = "$bytes"

// Bytes returns a Bytes value holding a copy of b.
func Bytes(b []byte) Value { return bytesValue(string(b)) }

// AsBytes returns a copy of the bytes of a Bytes value (empty, not nil, for empty
// Bytes); nil for any other kind.
func (v Value) AsBytes() []byte {
	if v.k != KindBytes {
		return nil
	}
	return append([]byte{}, v.str()...)
}

// BytesFromString returns a Bytes value holding the bytes of s. A string cannot change,
// so the value shares them instead of copying.
func BytesFromString(s string) Value { return bytesValue(s) }

// BytesAsString returns the bytes of a Bytes value as a string that shares them, sparing
// the copy AsBytes makes (a string cannot change, so neither can the value through
// it); "" for any other kind.
func (v Value) BytesAsString() string {
	if v.k != KindBytes {
		return ""
	}
	return v.str()
}

// appendJSONBytes appends the JSON form of a Bytes value: {"$bytes":"<base64>"}.
// Base64's alphabet needs no escaping in JSON.
func (v Value) appendJSONBytes(buf []byte) []byte {
	buf = append(buf, `{"`+BytesJSONKey+`":"`...)
	buf = base64.StdEncoding.AppendEncode(buf, unsafe.Slice((*byte)(v.p), int(v.i)))
	return append(buf, `"}`...)
}

// bytesFromJSON reads the JSON form of a Bytes value from a decoded JSON object that
// has the key BytesJSONKey; another key beside it is an error.
func bytesFromJSON(obj map[string]any) (Value, error) {
	x, ok := obj[BytesJSONKey]
	if !ok || len(obj) != 1 {
		return Null, fmt.Errorf(`{"%s": …} is the form of Bytes and has no other key`, BytesJSONKey)
	}
	s, ok := x.(string)
	if !ok {
		return Null, fmt.Errorf("%s must hold a base64 string, not %T", BytesJSONKey, x)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return Null, fmt.Errorf("%s: not standard base64: %v", BytesJSONKey, err)
	}
	return Bytes(b), nil
}

// bytesOf returns a Bytes value holding the elements of rv, a slice or array whose
// elements are bytes (of a named type or not).
func bytesOf(rv reflect.Value) Value {
	if rv.Kind() == reflect.Array && !rv.CanAddr() {
		a := reflect.New(rv.Type()).Elem()
		a.Set(rv)
		rv = a
	}
	return Bytes(rv.Bytes())
}
