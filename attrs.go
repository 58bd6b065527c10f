package herald

import (
	"sort"
	"strings"
)

// Attr is one named attribute value.
type Attr struct {
	Name  string
	Value Value
}

// Attrs is a set of named attribute values: a slice sorted by name, without nulls (a
// missing attribute reads as null). It is immutable once built — With, Without and Set
// return a new slice — so nodes can share it. Build one from a map with AttrsOf.
type Attrs []Attr

// AttrsOf returns the attributes of m, sorted by name, nulls dropped.
func AttrsOf(m map[string]Value) Attrs {
	if len(m) == 0 {
		return nil
	}
	a := make(Attrs, 0, len(m))
	for k, v := range m {
		if !v.IsNull() {
			a = append(a, Attr{k, v})
		}
	}
	sort.Slice(a, func(i, j int) bool { return a[i].Name < a[j].Name })
	return a
}

// find returns the index of name in a, or where it would be inserted and false.
func (a Attrs) find(name string) (int, bool) {
	if len(a) <= 8 {
		for i := range a {
			switch c := strings.Compare(a[i].Name, name); {
			case c == 0:
				return i, true
			case c > 0:
				return i, false
			}
		}
		return len(a), false
	}
	i := sort.Search(len(a), func(i int) bool { return a[i].Name >= name })
	return i, i < len(a) && a[i].Name == name
}

// Get returns the attribute name, or null.
func (a Attrs) Get(name string) Value {
	if i, ok := a.find(name); ok {
		return a[i].Value
	}
	return Null
}

// Has reports whether a holds the attribute name.
func (a Attrs) Has(name string) bool {
	_, ok := a.find(name)
	return ok
}

// With returns a copy of a with name set to v (removed when v is null).
func (a Attrs) With(name string, v Value) Attrs {
	i, ok := a.find(name)
	switch {
	case v.IsNull() && !ok:
		return a
	case v.IsNull():
		out := make(Attrs, 0, len(a)-1)
		return append(append(out, a[:i]...), a[i+1:]...)
	case ok:
		out := append(Attrs(nil), a...)
		out[i].Value = v
		return out
	}
	out := make(Attrs, 0, len(a)+1)
	out = append(out, a[:i]...)
	out = append(out, Attr{name, v})
	return append(out, a[i:]...)
}

// Merge returns the attributes of a and b together (b wins on a name both hold).
func (a Attrs) Merge(b Attrs) Attrs {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make(Attrs, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].Name < b[j].Name):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].Name < a[i].Name:
			out = append(out, b[j])
			j++
		default:
			out = append(out, b[j])
			i++
			j++
		}
	}
	return out
}

// Map returns the attributes as a map.
func (a Attrs) Map() map[string]Value {
	m := make(map[string]Value, len(a))
	for _, at := range a {
		m[at.Name] = at.Value
	}
	return m
}

// Clone returns a copy of a (the values are immutable and shared).
func (a Attrs) Clone() Attrs {
	if a == nil {
		return nil
	}
	return append(Attrs(nil), a...)
}

// Keys returns the attribute names in sorted order.
func (a Attrs) Keys() []string {
	ks := make([]string, len(a))
	for i := range a {
		ks[i] = a[i].Name
	}
	return ks
}

// Equal reports whether a and b hold the same attributes, each of the same kind.
func (a Attrs) Equal(b Attrs) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Value.k != b[i].Value.k || Compare(a[i].Value, b[i].Value) != 0 {
			return false
		}
	}
	return true
}
