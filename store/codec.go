package store

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/herald-mq/herald"
)

// codecVersion is the first byte of every encoding produced by this file. Version 2
// added a node's version and body; decoders read version 1 as well, and reject any
// other, so a future format can be told apart from these.
const (
	codecVersion   = 2
	codecVersionV1 = 1
)

// The encodings below are deterministic: the same value always encodes to the same
// bytes (attributes are sorted by name, null attributes are omitted). Strings are a
// uvarint length followed by the bytes; counts are uvarints.
//
//	node      = version id type created ver attrs body
//	body      = 0 | 1 seq count name... size  (the body's values are stored apart)
//	edge      = version type count endpoint... attrs
//	typedecl  = version kind name flags count attrdecl... count endpointdecl...
//	changeset = version seq tick time actor count change...
//	change    = kind presence image...   (presence: one bit per image, see imgXxx)
//
// Images inside a change set are encoded without their own version byte.

// AppendNode appends the encoding of n to buf.
func AppendNode(buf []byte, n *herald.Node) []byte {
	return appendNode(append(buf, codecVersion), n)
}

// DecodeNode decodes a node encoded by AppendNode. The whole of b must be consumed. A
// body of the node reads itself from src.
func DecodeNode(b []byte, src herald.BodySource) (*herald.Node, error) {
	v, b, err := checkVersion(b)
	if err != nil {
		return nil, corrupt("node", err)
	}
	n, b, err := decodeNode(b, v, src)
	return finish(n, b, err, "node")
}

// AppendEdge appends the encoding of e to buf.
func AppendEdge(buf []byte, e *herald.Edge) []byte {
	return appendEdge(append(buf, codecVersion), e)
}

// DecodeEdge decodes an edge encoded by AppendEdge. The whole of b must be consumed.
func DecodeEdge(b []byte) (*herald.Edge, error) {
	_, b, err := checkVersion(b)
	if err != nil {
		return nil, corrupt("edge", err)
	}
	e, b, err := decodeEdge(b)
	return finish(e, b, err, "edge")
}

// AppendTypeDecl appends the encoding of t to buf.
func AppendTypeDecl(buf []byte, t *herald.TypeDecl) []byte {
	return appendTypeDecl(append(buf, codecVersion), t)
}

// DecodeTypeDecl decodes a declaration encoded by AppendTypeDecl. The whole of b must be
// consumed.
func DecodeTypeDecl(b []byte) (*herald.TypeDecl, error) {
	_, b, err := checkVersion(b)
	if err != nil {
		return nil, corrupt("type", err)
	}
	t, b, err := decodeTypeDecl(b)
	return finish(t, b, err, "type")
}

// AppendChangeSet appends the encoding of cs to buf. The commit time keeps its instant
// (nanosecond precision) but not its location or monotonic reading: it decodes in UTC,
// and the zero time decodes as the zero time.
func AppendChangeSet(buf []byte, cs *herald.ChangeSet) []byte {
	buf = append(buf, codecVersion)
	buf = binary.AppendUvarint(buf, cs.Seq)
	buf = binary.AppendUvarint(buf, cs.Tick)
	buf = appendTime(buf, cs.Time)
	buf = herald.AppendString(buf, string(cs.Actor))
	buf = binary.AppendUvarint(buf, uint64(len(cs.Changes)))
	for i := range cs.Changes {
		buf = appendChange(buf, &cs.Changes[i])
	}
	return buf
}

// DecodeChangeSet decodes a change set encoded by AppendChangeSet. The whole of b must
// be consumed. Bodies of its nodes read themselves from src.
func DecodeChangeSet(b []byte, src herald.BodySource) (*herald.ChangeSet, error) {
	cs, b, err := decodeChangeSet(b, src)
	return finish(cs, b, err, "change set")
}

// Presence bits of the images of a Change.
const (
	imgNodeBefore = 1 << iota
	imgNodeAfter
	imgEdgeBefore
	imgEdgeAfter
	imgTypeBefore
	imgTypeAfter
	imgAll = imgTypeAfter<<1 - 1
)

// Flag bits of a TypeDecl and an AttrDecl.
const (
	flagSealed = 1 << iota
	flagTypeAll

	flagAny      = 1
	flagOptional = 2
	flagRequired = 4
	flagDefault  = 8
	flagAttrAll  = 15
)

func appendNode(buf []byte, n *herald.Node) []byte {
	buf = herald.AppendString(buf, string(n.ID))
	buf = herald.AppendString(buf, n.Type)
	buf = binary.AppendUvarint(buf, n.Created)
	buf = binary.AppendUvarint(buf, n.Ver)
	buf = n.Attrs.AppendBinary(buf)
	if n.Body == nil {
		return append(buf, 0)
	}
	buf = append(buf, 1)
	buf = binary.AppendUvarint(buf, n.Body.Seq)
	buf = binary.AppendUvarint(buf, uint64(len(n.Body.Names)))
	for _, name := range n.Body.Names {
		buf = herald.AppendString(buf, name)
	}
	return binary.AppendUvarint(buf, uint64(n.Body.Size))
}

func decodeNode(b []byte, version byte, src herald.BodySource) (*herald.Node, []byte, error) {
	id, b, err := herald.DecodeString(b)
	if err != nil {
		return nil, nil, err
	}
	typ, b, err := herald.DecodeString(b)
	if err != nil {
		return nil, nil, err
	}
	n := &herald.Node{ID: herald.NodeID(id), Type: herald.InternName(typ)}
	var m int
	if n.Created, m = binary.Uvarint(b); m <= 0 {
		return nil, nil, herald.ErrCorrupt
	}
	b = b[m:]
	if version >= 2 {
		if n.Ver, m = binary.Uvarint(b); m <= 0 {
			return nil, nil, herald.ErrCorrupt
		}
		b = b[m:]
	}
	if n.Attrs, b, err = herald.DecodeAttrs(b); err != nil {
		return nil, nil, err
	}
	if version < 2 {
		return n, b, nil
	}
	if len(b) == 0 || b[0] > 1 {
		return nil, nil, herald.ErrCorrupt
	}
	if b[0] == 0 {
		return n, b[1:], nil
	}
	b = b[1:]
	seq, m := binary.Uvarint(b)
	if m <= 0 {
		return nil, nil, herald.ErrCorrupt
	}
	count, b, err := decodeCount(b[m:])
	if err != nil || count == 0 {
		return nil, nil, herald.ErrCorrupt
	}
	names, b, err := herald.DecodeNames(b, int(count))
	if err != nil {
		return nil, nil, err
	}
	for _, name := range names {
		if n.Attrs.Has(name) {
			return nil, nil, herald.ErrCorrupt
		}
	}
	size, m := binary.Uvarint(b)
	if m <= 0 || size > 1<<40 {
		return nil, nil, herald.ErrCorrupt
	}
	n.Body = herald.BodyRef(seq, names, int(size), src)
	return n, b[m:], nil
}

func appendEdge(buf []byte, e *herald.Edge) []byte {
	buf = herald.AppendString(buf, e.Type)
	buf = binary.AppendUvarint(buf, uint64(len(e.Endpoints)))
	for _, id := range e.Endpoints {
		buf = herald.AppendString(buf, string(id))
	}
	return e.Attrs.AppendBinary(buf)
}

func decodeEdge(b []byte) (*herald.Edge, []byte, error) {
	typ, b, err := herald.DecodeString(b)
	if err != nil {
		return nil, nil, err
	}
	n, b, err := decodeCount(b)
	if err != nil {
		return nil, nil, err
	}
	var eps []herald.NodeID
	if n > 0 {
		eps = make([]herald.NodeID, n)
	}
	for i := range eps {
		var s string
		if s, b, err = herald.DecodeString(b); err != nil {
			return nil, nil, err
		}
		eps[i] = herald.NodeID(s)
	}
	attrs, b, err := herald.DecodeAttrs(b)
	if err != nil {
		return nil, nil, err
	}
	return &herald.Edge{Type: typ, Endpoints: eps, Attrs: attrs}, b, nil
}

func appendTypeDecl(buf []byte, t *herald.TypeDecl) []byte {
	buf = append(buf, byte(t.Kind))
	buf = herald.AppendString(buf, t.Name)
	var flags byte
	if t.Sealed {
		flags |= flagSealed
	}
	buf = append(buf, flags)
	buf = binary.AppendUvarint(buf, uint64(len(t.Attrs)))
	for i := range t.Attrs {
		a := &t.Attrs[i]
		buf = herald.AppendString(buf, a.Name)
		buf = append(buf, byte(a.Type))
		var f byte
		if a.Any {
			f |= flagAny
		}
		if a.Optional {
			f |= flagOptional
		}
		if a.Required {
			f |= flagRequired
		}
		if a.Default != nil {
			f |= flagDefault
		}
		buf = append(buf, f)
		if a.Default != nil {
			buf = a.Default.AppendBinary(buf)
		}
	}
	buf = binary.AppendUvarint(buf, uint64(len(t.Endpoints)))
	for _, ep := range t.Endpoints {
		buf = herald.AppendString(buf, ep.Name)
		buf = herald.AppendString(buf, ep.Type)
	}
	return buf
}

func decodeTypeDecl(b []byte) (*herald.TypeDecl, []byte, error) {
	if len(b) == 0 {
		return nil, nil, herald.ErrCorrupt
	}
	t := &herald.TypeDecl{Kind: herald.DeclKind(b[0])}
	name, b, err := herald.DecodeString(b[1:])
	if err != nil {
		return nil, nil, err
	}
	t.Name = name
	if len(b) == 0 || b[0] >= flagTypeAll {
		return nil, nil, herald.ErrCorrupt
	}
	t.Sealed = b[0]&flagSealed != 0
	n, b, err := decodeCount(b[1:])
	if err != nil {
		return nil, nil, err
	}
	if n > 0 {
		t.Attrs = make([]herald.AttrDecl, n)
	}
	for i := range t.Attrs {
		a := &t.Attrs[i]
		if a.Name, b, err = herald.DecodeString(b); err != nil {
			return nil, nil, err
		}
		if len(b) < 2 || b[1] > flagAttrAll {
			return nil, nil, herald.ErrCorrupt
		}
		a.Type, a.Any, a.Optional, a.Required = herald.Kind(b[0]), b[1]&flagAny != 0, b[1]&flagOptional != 0, b[1]&flagRequired != 0
		hasDefault := b[1]&flagDefault != 0
		b = b[2:]
		if hasDefault {
			var v herald.Value
			if v, b, err = herald.DecodeValue(b); err != nil {
				return nil, nil, err
			}
			a.Default = &v
		}
	}
	if n, b, err = decodeCount(b); err != nil {
		return nil, nil, err
	}
	if n > 0 {
		t.Endpoints = make([]herald.EndpointDecl, n)
	}
	for i := range t.Endpoints {
		ep := &t.Endpoints[i]
		if ep.Name, b, err = herald.DecodeString(b); err != nil {
			return nil, nil, err
		}
		if ep.Type, b, err = herald.DecodeString(b); err != nil {
			return nil, nil, err
		}
	}
	return t, b, nil
}

func appendChange(buf []byte, c *herald.Change) []byte {
	var mask byte
	for bit, present := range [...]bool{
		c.NodeBefore != nil, c.NodeAfter != nil,
		c.EdgeBefore != nil, c.EdgeAfter != nil,
		c.TypeBefore != nil, c.TypeAfter != nil,
	} {
		if present {
			mask |= 1 << bit
		}
	}
	buf = append(buf, byte(c.Kind), mask)
	if c.NodeBefore != nil {
		buf = appendNode(buf, c.NodeBefore)
	}
	if c.NodeAfter != nil {
		buf = appendNode(buf, c.NodeAfter)
	}
	if c.EdgeBefore != nil {
		buf = appendEdge(buf, c.EdgeBefore)
	}
	if c.EdgeAfter != nil {
		buf = appendEdge(buf, c.EdgeAfter)
	}
	if c.TypeBefore != nil {
		buf = appendTypeDecl(buf, c.TypeBefore)
	}
	if c.TypeAfter != nil {
		buf = appendTypeDecl(buf, c.TypeAfter)
	}
	return buf
}

func decodeChange(b []byte, c *herald.Change, version byte, src herald.BodySource) ([]byte, error) {
	if len(b) < 2 || b[1] > imgAll {
		return nil, herald.ErrCorrupt
	}
	c.Kind = herald.ChangeKind(b[0])
	mask := b[1]
	b = b[2:]
	var err error
	for _, img := range []struct {
		bit  byte
		node **herald.Node
	}{{imgNodeBefore, &c.NodeBefore}, {imgNodeAfter, &c.NodeAfter}} {
		if mask&img.bit != 0 {
			if *img.node, b, err = decodeNode(b, version, src); err != nil {
				return nil, err
			}
		}
	}
	for _, img := range []struct {
		bit  byte
		edge **herald.Edge
	}{{imgEdgeBefore, &c.EdgeBefore}, {imgEdgeAfter, &c.EdgeAfter}} {
		if mask&img.bit != 0 {
			if *img.edge, b, err = decodeEdge(b); err != nil {
				return nil, err
			}
		}
	}
	for _, img := range []struct {
		bit byte
		typ **herald.TypeDecl
	}{{imgTypeBefore, &c.TypeBefore}, {imgTypeAfter, &c.TypeAfter}} {
		if mask&img.bit != 0 {
			if *img.typ, b, err = decodeTypeDecl(b); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

func decodeChangeSet(b []byte, src herald.BodySource) (*herald.ChangeSet, []byte, error) {
	version, b, err := checkVersion(b)
	if err != nil {
		return nil, nil, err
	}
	cs := &herald.ChangeSet{}
	var m int
	if cs.Seq, m = binary.Uvarint(b); m <= 0 {
		return nil, nil, herald.ErrCorrupt
	}
	b = b[m:]
	if cs.Tick, m = binary.Uvarint(b); m <= 0 {
		return nil, nil, herald.ErrCorrupt
	}
	b = b[m:]
	if cs.Time, b, err = decodeTime(b); err != nil {
		return nil, nil, err
	}
	actor, b, err := herald.DecodeString(b)
	if err != nil {
		return nil, nil, err
	}
	cs.Actor = herald.NodeID(actor)
	n, b, err := decodeCount(b)
	if err != nil {
		return nil, nil, err
	}
	if n > 0 {
		cs.Changes = make([]herald.Change, n)
	}
	for i := range cs.Changes {
		if b, err = decodeChange(b, &cs.Changes[i], version, src); err != nil {
			return nil, nil, err
		}
	}
	return cs, b, nil
}

// appendTime encodes t as a presence byte and, for a non-zero time, Unix seconds
// (varint) and nanoseconds (uvarint).
func appendTime(buf []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(buf, 0)
	}
	buf = append(buf, 1)
	buf = binary.AppendVarint(buf, t.Unix())
	return binary.AppendUvarint(buf, uint64(t.Nanosecond()))
}

func decodeTime(b []byte) (time.Time, []byte, error) {
	if len(b) == 0 || b[0] > 1 {
		return time.Time{}, nil, herald.ErrCorrupt
	}
	if b[0] == 0 {
		return time.Time{}, b[1:], nil
	}
	b = b[1:]
	sec, m := binary.Varint(b)
	if m <= 0 {
		return time.Time{}, nil, herald.ErrCorrupt
	}
	b = b[m:]
	nsec, m := binary.Uvarint(b)
	if m <= 0 || nsec >= 1e9 {
		return time.Time{}, nil, herald.ErrCorrupt
	}
	return time.Unix(sec, int64(nsec)).UTC(), b[m:], nil
}

// decodeCount decodes an element count. Every element takes at least one byte, so a
// count larger than the remaining input is corrupt; this bounds allocations.
func decodeCount(b []byte) (int, []byte, error) {
	n, m := binary.Uvarint(b)
	if m <= 0 || n > uint64(len(b)-m) {
		return 0, nil, herald.ErrCorrupt
	}
	return int(n), b[m:], nil
}

func checkVersion(b []byte) (byte, []byte, error) {
	if len(b) == 0 {
		return 0, nil, herald.ErrCorrupt
	}
	if b[0] != codecVersion && b[0] != codecVersionV1 {
		return 0, nil, fmt.Errorf("unknown format version %d: %w", b[0], herald.ErrCorrupt)
	}
	return b[0], b[1:], nil
}

func finish[T any](v *T, rest []byte, err error, what string) (*T, error) {
	if err != nil {
		return nil, corrupt(what, err)
	}
	if len(rest) != 0 {
		return nil, corrupt(what, fmt.Errorf("%d trailing bytes: %w", len(rest), herald.ErrCorrupt))
	}
	return v, nil
}

func corrupt(what string, err error) error {
	return fmt.Errorf("store: decode %s: %w", what, err)
}
