package client

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
)

func (jsonCodec) Unmarshal(match map[string]any, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return codecError("decode", "", "want a non-nil pointer, not a %T", v)
	}
	return decodeValue(match, rv.Elem(), "", 0)
}

// decodeValue stores the plain value x (a Match's: nil, bool, int64, float64, string,
// []byte, []any, map[string]any) in rv.
func decodeValue(x any, rv reflect.Value, path string, depth int) error {
	if depth > maxDepth {
		return codecError("decode", path, "nested deeper than %d", maxDepth)
	}
	t := rv.Type()
	if x == nil {
		rv.SetZero()
		return nil
	}
	if t.Kind() == reflect.Pointer {
		if rv.IsNil() {
			rv.Set(reflect.New(t.Elem()))
		}
		return decodeValue(x, rv.Elem(), path, depth+1)
	}
	if done, err := decodeSpecial(x, rv, path); done {
		return err
	}
	mismatch := func() error {
		return codecError("decode", path, "cannot store a %s in a %s", kindOfPlain(x), t)
	}
	switch t.Kind() {
	case reflect.Interface:
		if reflect.TypeOf(x).AssignableTo(t) {
			rv.Set(reflect.ValueOf(x))
			return nil
		}
	case reflect.Bool:
		if b, ok := x.(bool); ok {
			rv.SetBool(b)
			return nil
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if i, ok := integral(x); ok && !rv.OverflowInt(i) {
			rv.SetInt(i)
			return nil
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if i, ok := integral(x); ok && i >= 0 && !rv.OverflowUint(uint64(i)) {
			rv.SetUint(uint64(i))
			return nil
		}
	case reflect.Float32, reflect.Float64:
		switch n := x.(type) {
		case float64:
			rv.SetFloat(n)
			return nil
		case int64:
			rv.SetFloat(float64(n))
			return nil
		}
	case reflect.String:
		if s, ok := x.(string); ok {
			rv.SetString(s)
			return nil
		}
	case reflect.Slice, reflect.Array:
		return decodeList(x, rv, path, depth, mismatch)
	case reflect.Map:
		return decodeMap(x, rv, path, depth, mismatch)
	case reflect.Struct:
		if m, ok := x.(map[string]any); ok {
			return decodeStruct(m, rv, path, depth)
		}
	}
	return mismatch()
}

// decodeSpecial handles the types with a form of their own: herald.Value, time.Time,
// time.Duration, and those that unmarshal themselves. done reports whether it did.
func decodeSpecial(x any, rv reflect.Value, path string) (done bool, err error) {
	t := rv.Type()
	switch {
	case t == valueType:
		v, err := plainValue(x, 0)
		if err != nil {
			return true, codecError("decode", path, "%v", err)
		}
		rv.Set(reflect.ValueOf(v))
		return true, nil
	case t == durationType:
		switch d := x.(type) {
		case string:
			parsed, err := time.ParseDuration(d)
			if err != nil {
				return true, codecError("decode", path, "%v", err)
			}
			rv.SetInt(int64(parsed))
			return true, nil
		case int64:
			rv.SetInt(d)
			return true, nil
		}
		return true, codecError("decode", path, "cannot store a %s in a time.Duration", kindOfPlain(x))
	case reflect.PointerTo(t).Implements(jsonUnmarsh):
		raw, err := json.Marshal(x)
		if err == nil {
			err = rv.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(raw)
		}
		if err != nil {
			return true, codecError("decode", path, "%v", err)
		}
		return true, nil
	case reflect.PointerTo(t).Implements(textUnmarsh):
		s, ok := x.(string)
		if !ok {
			return true, codecError("decode", path, "cannot store a %s in a %s", kindOfPlain(x), t)
		}
		if err := rv.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return true, codecError("decode", path, "%v", err)
		}
		return true, nil
	}
	return false, nil
}

func decodeList(x any, rv reflect.Value, path string, depth int, mismatch func() error) error {
	t := rv.Type()
	if b, ok := x.([]byte); ok && t.Elem().Kind() == reflect.Uint8 {
		if t.Kind() == reflect.Array {
			if len(b) != t.Len() {
				return codecError("decode", path, "%d bytes do not fit a %s", len(b), t)
			}
			reflect.Copy(rv, reflect.ValueOf(b))
			return nil
		}
		rv.Set(reflect.ValueOf(append([]byte{}, b...)).Convert(t))
		return nil
	}
	l, ok := x.([]any)
	if !ok {
		return mismatch()
	}
	if t.Kind() == reflect.Array {
		if len(l) != t.Len() {
			return codecError("decode", path, "%d elements do not fit a %s", len(l), t)
		}
	} else {
		rv.Set(reflect.MakeSlice(t, len(l), len(l)))
	}
	for i, e := range l {
		if err := decodeValue(e, rv.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func decodeMap(x any, rv reflect.Value, path string, depth int, mismatch func() error) error {
	t := rv.Type()
	m, ok := x.(map[string]any)
	if !ok || t.Key().Kind() != reflect.String {
		return mismatch()
	}
	if rv.IsNil() {
		rv.Set(reflect.MakeMapWithSize(t, len(m)))
	}
	for k, e := range m {
		ev := reflect.New(t.Elem()).Elem()
		if err := decodeValue(e, ev, join(path, k), depth+1); err != nil {
			return err
		}
		rv.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
	}
	return nil
}

// decodeStruct fills rv's fields from m, by name as encoding/json matches them:
// exactly, else ignoring case. Keys without a field are left alone.
func decodeStruct(m map[string]any, rv reflect.Value, path string, depth int) error {
	for _, f := range fieldsOf(rv.Type()) {
		x, ok := m[f.name]
		if !ok {
			for k, e := range m {
				if strings.EqualFold(k, f.name) {
					x, ok = e, true
					break
				}
			}
		}
		if !ok {
			continue
		}
		fv, ok := fieldForSet(rv, f.index)
		if !ok {
			continue
		}
		if err := decodeValue(x, fv, join(path, f.name), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// integral returns x as an integer when it is one.
func integral(x any) (int64, bool) {
	switch n := x.(type) {
	case int64:
		return n, true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<63 {
			return int64(n), true
		}
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// kindOfPlain names what a plain value is, for errors.
func kindOfPlain(x any) string {
	switch x.(type) {
	case nil:
		return "null"
	case bool:
		return "Bool"
	case int64:
		return "Int"
	case float64:
		return "Float"
	case string:
		return "String"
	case []byte:
		return "Bytes"
	case []any:
		return "List"
	case map[string]any:
		return "Map"
	}
	return fmt.Sprintf("%T", x)
}
