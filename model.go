package herald

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// NodeID identifies a node. It is written `#name` in the language; generated ids are
// random and URL-safe.
type NodeID string

// Node is a vertex of the graph: an id, a type name and attributes. A Node is immutable
// once committed; a write installs a new one.
type Node struct {
	ID   NodeID
	Type string
	// Created is the seq of the commit that created the node; it orders nodes by
	// arrival (consume mode's `ordering: arrival`) and survives restarts.
	Created uint64
	// Ver is the seq of the commit that wrote this image of the node.
	Ver uint64
	// Attrs are the attributes held in memory. The large values of a user node (those
	// whose encoding is longer than InlineLimit) are kept in Body instead, which need not
	// stay in memory: read attributes with Attr, AllAttrs and HasAttr, which see both.
	// Attrs and Body never hold the same name.
	Attrs Attrs
	Body  *Body
}

// Clone returns a copy of n that shares its immutable attribute values and body.
func (n *Node) Clone() *Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Attrs = n.Attrs.Clone()
	return &c
}

// Attr returns the attribute name, reading it from the body when it lives there. A
// missing attribute is null; an error means the body could not be read from the store.
func (n *Node) Attr(name string) (Value, error) {
	if i, ok := n.Attrs.find(name); ok {
		return n.Attrs[i].Value, nil
	}
	if n.Body == nil || !n.Body.Has(name) {
		return Null, nil
	}
	return n.Body.Attr(n.ID, name)
}

// HasAttr reports whether n has the attribute name (in memory or in its body).
func (n *Node) HasAttr(name string) bool {
	return n.Attrs.Has(name) || (n.Body != nil && n.Body.Has(name))
}

// AttrNames returns the names of all of n's attributes, sorted.
func (n *Node) AttrNames() []string {
	if n.Body == nil {
		return n.Attrs.Keys()
	}
	names := append(n.Attrs.Keys(), n.Body.Names...)
	sort.Strings(names)
	return names
}

// AllAttrs returns every attribute of n, those of its body included.
func (n *Node) AllAttrs() (Attrs, error) {
	if n.Body == nil {
		return n.Attrs, nil
	}
	b, err := n.Body.Attrs(n.ID)
	if err != nil {
		return nil, err
	}
	return n.Attrs.Merge(b), nil
}

// SameAttrs reports whether n and m hold the same attributes: equal values in memory
// and the same body.
func (n *Node) SameAttrs(m *Node) bool {
	return n.Attrs.Equal(m.Attrs) && n.Body.same(m.Body)
}

// Edge is a typed, ordered relation between one or more nodes, with attributes.
// An edge is identified by its type and its endpoints: linking the same endpoints twice
// with the same type names the same edge.
type Edge struct {
	Type      string
	Endpoints []NodeID
	Attrs     Attrs
}

// Key returns the identity of e: its type and endpoints.
func (e *Edge) Key() EdgeKey { return MakeEdgeKey(e.Type, e.Endpoints) }

// Clone returns a deep copy of e.
func (e *Edge) Clone() *Edge {
	if e == nil {
		return nil
	}
	return &Edge{Type: e.Type, Endpoints: append([]NodeID(nil), e.Endpoints...), Attrs: e.Attrs.Clone()}
}

// EdgeKey is the canonical identity of an edge: type and endpoints joined by NUL bytes.
type EdgeKey string

// MakeEdgeKey builds the key of the edge typ(endpoints...).
func MakeEdgeKey(typ string, endpoints []NodeID) EdgeKey {
	var b strings.Builder
	b.WriteString(typ)
	for _, id := range endpoints {
		b.WriteByte(0)
		b.WriteString(string(id))
	}
	return EdgeKey(b.String())
}

// DeclKind tells node declarations from edge declarations.
type DeclKind uint8

// Declaration kinds.
const (
	NodeDecl DeclKind = iota + 1
	EdgeDecl
)

// AttrDecl declares one attribute of a type.
type AttrDecl struct {
	Name     string
	Type     Kind
	Any      bool   // the attribute accepts any kind (declared as `Any`)
	Optional bool   // declared with a trailing `?`: null allowed even if Required is unset
	Required bool   // `[required]`: must be non-null after defaults are applied
	Default  *Value // `= expr`, evaluated at declaration time
}

// EndpointDecl declares one endpoint of an edge type.
type EndpointDecl struct {
	Name string
	Type string // node type name; "" accepts any node
}

// TypeDecl is a declared node or edge type.
type TypeDecl struct {
	Kind      DeclKind
	Name      string
	Sealed    bool
	Attrs     []AttrDecl
	Endpoints []EndpointDecl // edges only
}

// Same reports whether t and o declare the same type: the same kind, name, seal,
// attributes (defaults compared as values) and endpoints.
func (t *TypeDecl) Same(o *TypeDecl) bool {
	if t.Kind != o.Kind || t.Name != o.Name || t.Sealed != o.Sealed ||
		len(t.Attrs) != len(o.Attrs) || !slices.Equal(t.Endpoints, o.Endpoints) {
		return false
	}
	for i, a := range t.Attrs {
		b := o.Attrs[i]
		if a.Name != b.Name || a.Type != b.Type || a.Any != b.Any || a.Optional != b.Optional ||
			a.Required != b.Required || (a.Default == nil) != (b.Default == nil) {
			return false
		}
		if a.Default != nil && (a.Default.Kind() != b.Default.Kind() || Compare(*a.Default, *b.Default) != 0) {
			return false
		}
	}
	return true
}

// Attr returns the declaration of the named attribute, or nil.
func (t *TypeDecl) Attr(name string) *AttrDecl {
	for i := range t.Attrs {
		if t.Attrs[i].Name == name {
			return &t.Attrs[i]
		}
	}
	return nil
}

// AttrTrace is the attribute that carries a message's trace context: the W3C
// traceparent of the span that published it (see docs/tracing.md). Every node type
// accepts it, declared or not, as a string; the Go client sets it when it publishes
// within a trace and reads it back from each delivery.
const AttrTrace = "_trace"

// IsSystemType reports whether name is a Layer 0 system type (starting with `_`), which
// users may read but not write.
func IsSystemType(name string) bool { return strings.HasPrefix(name, "_") }

// ChangeKind names what a Change touches.
type ChangeKind uint8

// Change kinds.
const (
	NodeChange ChangeKind = iota + 1
	EdgeChange
	TypeChange
)

// Change is one operation of a commit with its before and after images. A nil before
// image means the entity was created; a nil after image means it was deleted.
type Change struct {
	Kind                  ChangeKind
	NodeBefore, NodeAfter *Node
	EdgeBefore, EdgeAfter *Edge
	TypeBefore, TypeAfter *TypeDecl
}

// ChangeSet is everything one committed transaction did, in order, with its position.
type ChangeSet struct {
	Seq     uint64    // commit sequence number, the resume position
	Tick    uint64    // logical clock at commit
	Time    time.Time // wall-clock commit time (from the injected clock)
	Actor   NodeID    // session actor, if any
	Changes []Change
}

// Tick is the logical clock of the graph. It advances with commits, with TICK or on an
// interval, depending on the server's tick mode.
type Tick = uint64
