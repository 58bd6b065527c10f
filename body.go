package herald

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// InlineLimit is the largest encoded size of an attribute value that a user node keeps in
// memory. Larger values (long strings, big lists) go to the node's Body, which is
// written to the store once and read back when a statement needs it, so a backlog of
// messages costs memory for their small attributes only. Values this large are not
// indexed either.
const InlineLimit = 128

// Body holds the large attribute values of one image of a node. It is written to the
// store once, under the node's id and Seq, by the commit that created it, and shared by
// later images of the node that leave those values alone. Its encoding stays in memory
// only while the server keeps it cached (a newly written body, for a while); otherwise
// it is read from its source when an attribute is needed.
type Body struct {
	Seq   uint64   // the commit that wrote it
	Names []string // the attributes it holds, sorted
	Size  int      // length of its encoding

	src  BodySource
	data atomic.Pointer[[]byte] // its encoding, while held in memory
}

// nameLists holds the lists of attribute names that bodies share: the messages of a
// type keep the same attributes in their bodies, so a backlog holds one list of names,
// not one per message. The lists are never changed.
var (
	nameListsMu sync.RWMutex
	nameLists   = map[string][]string{}
)

// nameListLimit bounds how many lists are interned.
const nameListLimit = 1 << 12

// DecodeNames decodes count names written one after another by AppendString, sorted,
// into the list that InternNames would return for them. A list already held is found
// from the encoding itself, which is the key the lists are held under, so that loading
// a backlog decodes each list of names once rather than once per body. It returns the
// rest of b.
func DecodeNames(b []byte, count int) ([]string, []byte, error) {
	rest := b
	for range count {
		var ok bool
		if _, rest, ok = lenPrefixed(rest); !ok {
			return nil, nil, ErrCorrupt
		}
	}
	enc := b[:len(b)-len(rest)]
	var unsorted bool
	list := heldNames(enc, func() []string {
		names := make([]string, count)
		for i, e := 0, enc; i < count; i++ {
			name, after, _ := lenPrefixed(e)
			if i > 0 && names[i-1] >= string(name) {
				unsorted = true
				return nil
			}
			names[i], e = InternName(string(name)), after
		}
		return names
	})
	if unsorted {
		return nil, nil, ErrCorrupt
	}
	return list, rest, nil
}

// InternNames returns a list equal to names (sorted, as a body's are), shared with
// every body whose attributes have the same names; names itself when there are too
// many lists already. Neither may be changed afterwards.
func InternNames(names []string) []string {
	return internNameList(func(i int) string { return names[i] }, len(names), names...)
}

// internNameList is InternNames for the n names name(0), …, name(n-1); have, when
// given, is the list itself, used as the new entry instead of a copy.
func internNameList(name func(int) string, n int, have ...string) []string {
	var buf [256]byte
	key := buf[:0]
	for i := range n {
		key = AppendString(key, name(i))
	}
	return heldNames(key, func() []string {
		if have == nil {
			have = make([]string, n)
			for i := range have {
				have[i] = name(i)
			}
		}
		return have
	})
}

// heldNames returns the list held under key, the names' encoding (AppendString, one
// after another). When none is, it holds the list that list returns, unless that is nil
// or there are too many lists already, and returns it.
func heldNames(key []byte, list func() []string) []string {
	nameListsMu.RLock()
	held, ok := nameLists[string(key)]
	nameListsMu.RUnlock()
	if ok {
		return held
	}
	names := list()
	if names == nil {
		return nil
	}
	nameListsMu.Lock()
	defer nameListsMu.Unlock()
	if held, ok := nameLists[string(key)]; ok {
		return held
	}
	if len(nameLists) < nameListLimit {
		nameLists[string(key)] = names
	}
	return names
}

func (a Attrs) name(i int) string { return a[i].Name }

// BodySource reads bodies back from the store that holds them.
type BodySource interface {
	// LoadBody returns the encoding of the body written for node id by commit seq.
	LoadBody(id NodeID, seq uint64) ([]byte, error)
}

// NewBody returns a body holding attrs (whose encoding is data), written by commit seq
// and kept in memory until Release; src reads it back afterwards.
func NewBody(seq uint64, attrs Attrs, data []byte, src BodySource) *Body {
	b := &Body{Seq: seq, Names: internNameList(attrs.name, len(attrs)), Size: len(data), src: src}
	b.data.Store(&data)
	return b
}

// BodyRef returns a body that is not in memory: its attributes are read from src when
// needed.
func BodyRef(seq uint64, names []string, size int, src BodySource) *Body {
	return &Body{Seq: seq, Names: names, Size: size, src: src}
}

// Has reports whether the body holds the attribute name.
func (b *Body) Has(name string) bool {
	_, ok := slices.BinarySearch(b.Names, name)
	return ok
}

// Data returns the body's encoding if it is in memory.
func (b *Body) Data() ([]byte, bool) {
	if p := b.data.Load(); p != nil {
		return *p, true
	}
	return nil, false
}

// Encoded returns the body's encoding, reading it from the store when it is not in
// memory (without keeping it).
func (b *Body) Encoded(id NodeID) ([]byte, error) {
	if p := b.data.Load(); p != nil {
		return *p, nil
	}
	if b.src == nil {
		return nil, Errorf(CodeReadFailed, "the body of node #%s (seq %d) has no source to read it from", id, b.Seq)
	}
	data, err := b.src.LoadBody(id, b.Seq)
	if err != nil {
		return nil, &Error{Code: CodeReadFailed, Message: fmt.Sprintf("reading the body of node #%s (seq %d): %v", id, b.Seq, err), Err: err}
	}
	return data, nil
}

// Attrs decodes the body's attributes; id is the node's.
func (b *Body) Attrs(id NodeID) (Attrs, error) {
	data, err := b.Encoded(id)
	if err != nil {
		return nil, err
	}
	a, rest, err := DecodeAttrs(data)
	if err == nil && len(rest) > 0 {
		err = ErrCorrupt
	}
	if err != nil {
		return nil, &Error{Code: CodeReadFailed, Message: fmt.Sprintf("decoding the body of node #%s (seq %d): %v", id, b.Seq, err), Err: err}
	}
	return a, nil
}

// Attr returns the body's attribute name (null when it has none), decoding only that one.
func (b *Body) Attr(id NodeID, name string) (Value, error) {
	data, err := b.Encoded(id)
	if err != nil {
		return Null, err
	}
	v, err := AttrOf(data, name)
	if err != nil {
		return Null, &Error{Code: CodeReadFailed, Message: fmt.Sprintf("decoding attribute %s of the body of node #%s (seq %d): %v", name, id, b.Seq, err), Err: err}
	}
	return v, nil
}

// BodyBatchSource is a BodySource that reads many bodies in one pass. Bodies written
// one after another lie together in the store, so reading a run of them in key order
// costs about one read, where reading them one at a time costs one each.
type BodyBatchSource interface {
	BodySource
	// LoadBodies returns the encodings of the bodies named by ids[i] and seqs[i]; a
	// body the source does not hold comes back nil.
	LoadBodies(ids []NodeID, seqs []uint64) ([][]byte, error)
}

// HoldBodies reads the bodies of nodes that are not in memory, in one pass per source
// that can (BodyBatchSource), and keeps them in memory until the caller releases
// them: it returns the bodies it made resident. Bodies it could not read are left as
// they were, to be read (and their errors reported) one at a time.
func HoldBodies(nodes []*Node) []*Body {
	var (
		src  BodyBatchSource
		bs   []*Body
		ids  []NodeID
		seqs []uint64
	)
	for _, n := range nodes {
		b := n.Body
		if b == nil || b.data.Load() != nil {
			continue
		}
		s, ok := b.src.(BodyBatchSource)
		if !ok || (src != nil && s != src) {
			continue // read one at a time
		}
		src = s
		bs, ids, seqs = append(bs, b), append(ids, n.ID), append(seqs, b.Seq)
	}
	if len(bs) < 2 {
		return nil
	}
	datas, err := src.LoadBodies(ids, seqs)
	if err != nil || len(datas) != len(bs) {
		return nil
	}
	held := bs[:0]
	for i, b := range bs {
		if datas[i] != nil && b.data.CompareAndSwap(nil, &datas[i]) {
			held = append(held, b)
		}
	}
	return held
}

// Hold makes the body resident, reading it from its source when it is not in memory,
// and reports whether it did: the caller then releases it. A body that cannot be read
// is left as it was, to be read (and its error reported) when it is needed.
func (b *Body) Hold(id NodeID) bool {
	if b.data.Load() != nil || b.src == nil {
		return false
	}
	data, err := b.src.LoadBody(id, b.Seq)
	if err != nil {
		return false
	}
	return b.data.CompareAndSwap(nil, &data)
}

// Release drops the body's encoding from memory; it is read from its source from then
// on.
func (b *Body) Release() { b.data.Store(nil) }

// Source returns where the body is read back from.
func (b *Body) Source() BodySource { return b.src }

// same reports whether two bodies are one: the same version of the same values.
func (b *Body) same(o *Body) bool {
	if b == nil || o == nil {
		return b == o
	}
	return b.Seq == o.Seq && slices.Equal(b.Names, o.Names) && b.Size == o.Size
}

// SplitAttrs separates the values of attrs that a user node keeps in memory from those
// that go to its body (encoded longer than InlineLimit). big is nil when there are none.
func SplitAttrs(attrs Attrs) (inline, big Attrs) {
	for i := range attrs {
		if attrs[i].Value.EncodedLen() > InlineLimit {
			if big == nil {
				inline = append(make(Attrs, 0, len(attrs)-1), attrs[:i]...)
			}
			big = append(big, attrs[i])
		} else if big != nil {
			inline = append(inline, attrs[i])
		}
	}
	if big == nil {
		return attrs, nil
	}
	return inline, big
}

// interned holds attribute and type names decoded from the store, so a million nodes
// loaded at start share their few names instead of holding a copy each.
var interned sync.Map

// internLimit bounds how many names are interned.
const internLimit = 1 << 16

var internCount atomic.Int64

// InternName returns a shared copy of s, for names read from the store.
func InternName(s string) string {
	if v, ok := interned.Load(s); ok {
		return v.(string)
	}
	if internCount.Load() >= internLimit || len(s) > 64 {
		return s
	}
	v, loaded := interned.LoadOrStore(s, s)
	if !loaded {
		internCount.Add(1)
	}
	return v.(string)
}
