// Package convert translates between the wire's typed values (heraldv1.Value trees, or
// bytes in Herald's binary value encoding where a stream asked for them) and the data
// model's (herald.Value), for the server's RPC handlers and the Go client alike. Every
// kind crosses unchanged: an Int stays an Int, a Timestamp a Timestamp. Codec, the Go
// client's protobuf codec, reads a consume stream's frames at once.
package convert

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
)

// HeaderBinaryAttrs is a response header of the Publish call, set ("1") by a server that
// reads PublishMessage.attrs_binary. The headers come with the first acknowledgements,
// so a client sends its first frame with attrs and switches once it has seen the
// header: a server that predates the field would ignore it and store the messages
// without their attributes.
const HeaderBinaryAttrs = "Herald-Binary-Attrs"

// maxDepth bounds the nesting of lists and maps a decoded value may have.
const maxDepth = 64

// ToWire returns v as a wire value.
func ToWire(v herald.Value) *heraldv1.Value {
	switch v.Kind() {
	case herald.KindBool:
		return &heraldv1.Value{Kind: &heraldv1.Value_BoolValue{BoolValue: v.AsBool()}}
	case herald.KindInt:
		return &heraldv1.Value{Kind: &heraldv1.Value_IntValue{IntValue: v.AsInt()}}
	case herald.KindFloat:
		return &heraldv1.Value{Kind: &heraldv1.Value_FloatValue{FloatValue: v.AsFloat()}}
	case herald.KindString:
		return &heraldv1.Value{Kind: &heraldv1.Value_StringValue{StringValue: v.AsString()}}
	case herald.KindTimestamp:
		return &heraldv1.Value{Kind: &heraldv1.Value_TimestampValue{TimestampValue: v.AsInt()}}
	case herald.KindDuration:
		return &heraldv1.Value{Kind: &heraldv1.Value_DurationValue{DurationValue: v.AsInt()}}
	case herald.KindBytes:
		return &heraldv1.Value{Kind: &heraldv1.Value_BytesValue{BytesValue: v.AsBytes()}}
	case herald.KindList:
		l := v.AsList()
		out := &heraldv1.ValueList{Values: make([]*heraldv1.Value, len(l))}
		for i, e := range l {
			out.Values[i] = ToWire(e)
		}
		return &heraldv1.Value{Kind: &heraldv1.Value_ListValue{ListValue: out}}
	case herald.KindMap:
		vals := v.MapValues()
		out := &heraldv1.ValueMap{Keys: v.MapKeys(), Values: make([]*heraldv1.Value, len(vals))}
		for i, e := range vals {
			out.Values[i] = ToWire(e)
		}
		return &heraldv1.Value{Kind: &heraldv1.Value_MapValue{MapValue: out}}
	}
	return &heraldv1.Value{Kind: &heraldv1.Value_NullValue{NullValue: true}}
}

// EventValue returns a value that a stream sends in one of two forms: decoded from bin,
// its binary encoding, when the server filled it (the stream was opened with
// binary_match), else from the wire value w (null when unset).
func EventValue(bin []byte, w *heraldv1.Value) (herald.Value, error) {
	if len(bin) == 0 {
		return FromWire(w)
	}
	v, rest, err := herald.DecodeValueNested(bin, maxDepth)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("%w: %d bytes after the value", herald.ErrCorrupt, len(rest))
	}
	return v, err
}

// EventPlain returns a value that a stream sends in one of two forms, as EventValue
// does, in its plain Go form (herald.Value.Interface).
func EventPlain(bin []byte, w *heraldv1.Value) (any, error) {
	if len(bin) == 0 {
		v, err := FromWire(w)
		return v.Interface(), err
	}
	x, rest, err := herald.DecodeInterface(bin, maxDepth)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("%w: %d bytes after the value", herald.ErrCorrupt, len(rest))
	}
	return x, err
}

// AttrsFromBinary decodes attributes sent in Herald's binary encoding
// (PublishMessage.attrs_binary) and checks them as FromWireMap checks a map of wire
// values: no nesting deeper than the wire allows, and, as protobuf
// requires of its strings, names and strings in valid UTF-8.
func AttrsFromBinary(b []byte, what string) (map[string]herald.Value, error) {
	a, rest, err := herald.DecodeAttrsNested(b, maxDepth)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("%w: %d bytes after the %ss", herald.ErrCorrupt, len(rest), what)
	}
	if err != nil {
		return nil, herald.Errorf(herald.CodeMalformedRequest, "%ss in binary: %v", what, err)
	}
	if len(a) == 0 {
		return nil, nil
	}
	out := make(map[string]herald.Value, len(a))
	for _, x := range a {
		switch {
		case !utf8.ValidString(x.Name):
			err = fmt.Errorf("the name is not valid UTF-8")
		case !validUTF8(x.Value):
			err = fmt.Errorf("a string that is not valid UTF-8")
		}
		if err != nil {
			return nil, herald.Errorf(herald.CodeMalformedRequest, "%s %q: %v", what, x.Name, err)
		}
		out[x.Name] = x.Value
	}
	return out, nil
}

// validUTF8 reports whether every string in v, map keys included, is valid UTF-8.
func validUTF8(v herald.Value) bool {
	switch v.Kind() {
	case herald.KindString:
		return utf8.ValidString(v.AsString())
	case herald.KindList:
		for _, e := range v.AsList() {
			if !validUTF8(e) {
				return false
			}
		}
	case herald.KindMap:
		for i, k := range v.MapKeys() {
			if !utf8.ValidString(k) || !validUTF8(v.MapValues()[i]) {
				return false
			}
		}
	}
	return true
}

// FromWire returns a wire value as a data-model value; an unset value is null. A map
// whose keys and values differ in number is an error.
func FromWire(w *heraldv1.Value) (herald.Value, error) { return fromWire(w, 0) }

func fromWire(w *heraldv1.Value, depth int) (herald.Value, error) {
	if depth > maxDepth {
		return herald.Null, fmt.Errorf("values nested deeper than %d", maxDepth)
	}
	switch k := w.GetKind().(type) {
	case *heraldv1.Value_BoolValue:
		return herald.Bool(k.BoolValue), nil
	case *heraldv1.Value_IntValue:
		return herald.Int(k.IntValue), nil
	case *heraldv1.Value_FloatValue:
		return herald.Float(k.FloatValue), nil
	case *heraldv1.Value_StringValue:
		return herald.String(k.StringValue), nil
	case *heraldv1.Value_TimestampValue:
		return herald.Timestamp(time.Unix(0, k.TimestampValue)), nil
	case *heraldv1.Value_DurationValue:
		return herald.Duration(time.Duration(k.DurationValue)), nil
	case *heraldv1.Value_BytesValue:
		return herald.Bytes(k.BytesValue), nil
	case *heraldv1.Value_ListValue:
		vs := make([]herald.Value, len(k.ListValue.GetValues()))
		for i, e := range k.ListValue.GetValues() {
			v, err := fromWire(e, depth+1)
			if err != nil {
				return herald.Null, err
			}
			vs[i] = v
		}
		return herald.List(vs...), nil
	case *heraldv1.Value_MapValue:
		keys, wv := k.MapValue.GetKeys(), k.MapValue.GetValues()
		if len(keys) != len(wv) {
			return herald.Null, fmt.Errorf("a map with %d keys and %d values", len(keys), len(wv))
		}
		vs := make([]herald.Value, len(wv))
		for i, e := range wv {
			v, err := fromWire(e, depth+1)
			if err != nil {
				return herald.Null, err
			}
			vs[i] = v
		}
		return herald.MapOf(keys, vs), nil
	}
	return herald.Null, nil
}

// FromWireMap converts named wire values (parameters, attributes); a value may be a
// map, nested to any depth up to the limit.
func FromWireMap(in map[string]*heraldv1.Value, what string) (map[string]herald.Value, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]herald.Value, len(in))
	for name, w := range in {
		v, err := FromWire(w)
		if err != nil {
			return nil, herald.Errorf(herald.CodeMalformedRequest, "%s %s: %v", what, name, err)
		}
		out[name] = v
	}
	return out, nil
}

// ToWireMap converts named values for the wire.
func ToWireMap(in map[string]herald.Value) map[string]*heraldv1.Value {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]*heraldv1.Value, len(in))
	for name, v := range in {
		out[name] = ToWire(v)
	}
	return out
}
