package herald

import (
	"encoding/binary"
	"errors"
	"math"
	"unsafe"
)

// AppendBinary appends a self-delimiting binary encoding of v to buf.
func (v Value) AppendBinary(buf []byte) []byte {
	buf = append(buf, byte(v.k))
	switch v.k {
	case KindBool, KindInt, KindTimestamp, KindDuration:
		buf = binary.AppendVarint(buf, v.i)
	case KindFloat:
		buf = binary.BigEndian.AppendUint64(buf, uint64(v.i))
	case KindString, KindBytes:
		buf = binary.AppendUvarint(buf, uint64(v.i))
		buf = append(buf, v.str()...)
	case KindList:
		buf = binary.AppendUvarint(buf, uint64(len(v.elems())))
		for _, e := range v.elems() {
			buf = e.AppendBinary(buf)
		}
	case KindMap:
		buf = binary.AppendUvarint(buf, uint64(len(v.elems())))
		for i, e := range v.elems() {
			buf = AppendString(buf, v.x().m[i])
			buf = e.AppendBinary(buf)
		}
	}
	return buf
}

// ErrCorrupt reports undecodable stored bytes.
var ErrCorrupt = errors.New("herald: corrupt encoding")

// DecodeValue decodes one value from the front of b and returns the rest.
func DecodeValue(b []byte) (Value, []byte, error) { return decodeValue(b, math.MaxInt) }

// DecodeValueNested is DecodeValue for bytes from outside the process: lists and maps
// nested more than depth deep are ErrCorrupt, so hostile input cannot recurse without
// bound.
func DecodeValueNested(b []byte, depth int) (Value, []byte, error) {
	return decodeValue(b, depth)
}

// DecodeInterface decodes one value as DecodeValueNested does and returns its plain
// form (see Interface), building the plain lists and maps directly instead of a Value's
// on the way. Clients that hand matches out as Go maps use it. The strings it returns
// share b's memory, which must not change afterwards; they keep all of b alive. Bytes
// come out as a []byte of their own, which its holder may change.
func DecodeInterface(b []byte, depth int) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, ErrCorrupt
	}
	k := Kind(b[0])
	if k == KindString {
		str, rest, err := sharedStringAt(b)
		if err != nil {
			return nil, nil, err
		}
		return str, rest, nil
	}
	if k == KindBytes {
		raw, rest, ok := lenPrefixed(b[1:])
		if !ok {
			return nil, nil, ErrCorrupt
		}
		return append([]byte{}, raw...), rest, nil
	}
	if k != KindList && k != KindMap {
		v, rest, err := decodeValue(b, 0) // a scalar: nothing nests
		if err != nil {
			return nil, nil, err
		}
		return v.Interface(), rest, nil
	}
	if depth <= 0 {
		return nil, nil, ErrCorrupt
	}
	n, b, ok := decodeCount(b[1:])
	if !ok {
		return nil, nil, ErrCorrupt
	}
	var err error
	if k == KindList {
		out := make([]any, n)
		for i := range out {
			if out[i], b, err = DecodeInterface(b, depth-1); err != nil {
				return nil, nil, err
			}
		}
		return out, b, nil
	}
	out := make(map[string]any, n)
	for range n {
		var key string
		var e any
		if key, b, err = DecodeString(b); err != nil {
			return nil, nil, err
		}
		if e, b, err = DecodeInterface(b, depth-1); err != nil {
			return nil, nil, err
		}
		out[key] = e
	}
	return out, b, nil
}

// sharedStringAt decodes the string value at the front of b, its kind first, without
// copying its bytes: b must not change while the string lives.
func sharedStringAt(b []byte) (string, []byte, error) {
	str, rest, ok := lenPrefixed(b[1:])
	if !ok {
		return "", nil, ErrCorrupt
	}
	if len(str) == 0 {
		return "", rest, nil
	}
	return unsafe.String(&str[0], len(str)), rest, nil
}

// decodeValue decodes one value whose lists and maps nest at most depth deep.
func decodeValue(b []byte, depth int) (Value, []byte, error) {
	if len(b) == 0 {
		return Null, nil, ErrCorrupt
	}
	k, b := Kind(b[0]), b[1:]
	switch k {
	case KindNull:
		return Null, b, nil
	case KindBool, KindInt, KindTimestamp, KindDuration:
		i, n := binary.Varint(b)
		if n <= 0 {
			return Null, nil, ErrCorrupt
		}
		return Value{k: k, i: i}, b[n:], nil
	case KindFloat:
		if len(b) < 8 {
			return Null, nil, ErrCorrupt
		}
		return Float(math.Float64frombits(binary.BigEndian.Uint64(b))), b[8:], nil
	case KindString, KindBytes:
		str, rest, ok := lenPrefixed(b)
		if !ok {
			return Null, nil, ErrCorrupt
		}
		return textValue(k, string(str)), rest, nil
	case KindList:
		if depth <= 0 {
			return Null, nil, ErrCorrupt
		}
		n, b, ok := decodeCount(b)
		if !ok {
			return Null, nil, ErrCorrupt
		}
		vs := make([]Value, 0, n)
		for i := uint64(0); i < n; i++ {
			var e Value
			var err error
			if e, b, err = decodeValue(b, depth-1); err != nil {
				return Null, nil, err
			}
			vs = append(vs, e)
		}
		return compositeValue(KindList, &composite{l: vs}), b, nil
	case KindMap:
		if depth <= 0 {
			return Null, nil, ErrCorrupt
		}
		n, b, ok := decodeCount(b)
		if !ok {
			return Null, nil, ErrCorrupt
		}
		keys := make([]string, 0, n)
		vs := make([]Value, 0, n)
		for i := uint64(0); i < n; i++ {
			var k string
			var e Value
			var err error
			if k, b, err = DecodeString(b); err != nil {
				return Null, nil, err
			}
			if e, b, err = decodeValue(b, depth-1); err != nil {
				return Null, nil, err
			}
			keys, vs = append(keys, k), append(vs, e)
		}
		return compositeValue(KindMap, &composite{m: keys, l: vs}), b, nil
	}
	return Null, nil, ErrCorrupt
}

// AppendBinary appends a deterministic encoding of a (sorted by name, nulls omitted).
func (a Attrs) AppendBinary(buf []byte) []byte {
	n := 0
	for i := range a {
		if !a[i].Value.IsNull() {
			n++
		}
	}
	buf = binary.AppendUvarint(buf, uint64(n))
	for i := range a {
		if a[i].Value.IsNull() {
			continue
		}
		buf = AppendString(buf, a[i].Name)
		buf = a[i].Value.AppendBinary(buf)
	}
	return buf
}

// EncodedLen returns the length of a's binary encoding (AppendBinary) without encoding
// it, so that a buffer can be sized once.
func (a Attrs) EncodedLen() int {
	n, size := 0, 0
	for i := range a {
		if a[i].Value.IsNull() {
			continue
		}
		n++
		size += uvarintLen(uint64(len(a[i].Name))) + len(a[i].Name) + a[i].Value.EncodedLen()
	}
	return uvarintLen(uint64(n)) + size
}

// DecodeAttrs decodes an Attrs encoding from the front of b and returns the rest. Names
// must come in strictly ascending order, as AppendBinary writes them.
func DecodeAttrs(b []byte) (Attrs, []byte, error) { return decodeAttrs(b, math.MaxInt) }

// DecodeAttrsNested is DecodeAttrs for bytes from outside the process: values whose
// lists and maps nest more than depth deep are ErrCorrupt.
func DecodeAttrsNested(b []byte, depth int) (Attrs, []byte, error) {
	return decodeAttrs(b, depth)
}

func decodeAttrs(b []byte, depth int) (Attrs, []byte, error) {
	n, b, ok := decodeCount(b)
	if !ok {
		return nil, nil, ErrCorrupt
	}
	if n == 0 {
		return nil, b, nil
	}
	a := make(Attrs, 0, n)
	for i := uint64(0); i < n; i++ {
		var k string
		var err error
		if k, b, err = DecodeString(b); err != nil {
			return nil, nil, err
		}
		var v Value
		if v, b, err = decodeValue(b, depth); err != nil {
			return nil, nil, err
		}
		if len(a) > 0 && a[len(a)-1].Name >= k {
			return nil, nil, ErrCorrupt
		}
		a = append(a, Attr{Name: InternName(k), Value: v})
	}
	return a, b, nil
}

// AttrOf returns the attribute name of an Attrs encoding (AppendBinary), or null when
// it has none, decoding no other attribute on the way. A String or Bytes it returns
// shares b's memory, which must not change afterwards (a body's encoding never does).
func AttrOf(b []byte, name string) (Value, error) {
	n, b, ok := decodeCount(b)
	if !ok {
		return Null, ErrCorrupt
	}
	for range n {
		var k []byte
		if k, b, ok = lenPrefixed(b); !ok {
			return Null, ErrCorrupt
		}
		switch {
		case string(k) == name:
			if len(b) > 0 && (Kind(b[0]) == KindString || Kind(b[0]) == KindBytes) {
				str, _, err := sharedStringAt(b)
				if err != nil {
					return Null, err
				}
				return textValue(Kind(b[0]), str), nil
			}
			v, _, err := decodeValue(b, math.MaxInt)
			return v, err
		case string(k) > name:
			return Null, nil // names are sorted: it is not there
		}
		var err error
		if b, err = skipValue(b); err != nil {
			return Null, err
		}
	}
	return Null, nil
}

// skipValue returns what follows the value encoded at the front of b.
func skipValue(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, ErrCorrupt
	}
	k, b := Kind(b[0]), b[1:]
	switch k {
	case KindNull:
		return b, nil
	case KindBool, KindInt, KindTimestamp, KindDuration:
		if _, n := binary.Varint(b); n > 0 {
			return b[n:], nil
		}
	case KindFloat:
		if len(b) >= 8 {
			return b[8:], nil
		}
	case KindString, KindBytes:
		if _, rest, ok := lenPrefixed(b); ok {
			return rest, nil
		}
	case KindList, KindMap:
		n, b, ok := decodeCount(b)
		if !ok {
			return nil, ErrCorrupt
		}
		var err error
		for range n {
			if k == KindMap { // the key, a length-prefixed string
				if _, b, ok = lenPrefixed(b); !ok {
					return nil, ErrCorrupt
				}
			}
			if b, err = skipValue(b); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, ErrCorrupt
}

// AppendString appends a length-prefixed string, the building block of the binary
// encodings of values and of the store's records.
func AppendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// DecodeString decodes a string written by AppendString and returns the rest.
func DecodeString(b []byte) (string, []byte, error) {
	str, rest, ok := lenPrefixed(b)
	if !ok {
		return "", nil, ErrCorrupt
	}
	return string(str), rest, nil
}

// lenPrefixed splits a length-prefixed string (AppendString) from the front of b,
// without copying it.
func lenPrefixed(b []byte) (str, rest []byte, ok bool) {
	n, m := binary.Uvarint(b)
	if m <= 0 || uint64(len(b)-m) < n {
		return nil, nil, false
	}
	return b[m : m+int(n)], b[m+int(n):], true
}

// decodeCount reads the element count of a list, a map or a set of attributes from
// the front of b; a count larger than b's length is corrupt, as each element takes a
// byte at least.
func decodeCount(b []byte) (n uint64, rest []byte, ok bool) {
	n, m := binary.Uvarint(b)
	if m <= 0 || n > uint64(len(b)) {
		return 0, nil, false
	}
	return n, b[m:], true
}

// EncodedLen returns the length of v's binary encoding (AppendBinary) without encoding
// it.
func (v Value) EncodedLen() int {
	switch v.k {
	case KindNull:
		return 1
	case KindBool, KindInt, KindTimestamp, KindDuration:
		return 1 + varintLen(v.i)
	case KindFloat:
		return 9
	case KindString, KindBytes:
		return 1 + uvarintLen(uint64(v.i)) + int(v.i)
	}
	n := 1 + uvarintLen(uint64(len(v.elems())))
	for i, e := range v.elems() {
		if v.k == KindMap {
			n += uvarintLen(uint64(len(v.x().m[i]))) + len(v.x().m[i])
		}
		n += e.EncodedLen()
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}
