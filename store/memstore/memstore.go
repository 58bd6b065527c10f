// Package memstore is an in-memory store.Backend for tests: nothing survives the process.
// It follows the same semantics as the durable backends, down to copying every entity
// through the store's binary encodings on the way in and on the way out.
package memstore

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store"
)

var _ store.Backend = (*Store)(nil)

// Store is an in-memory Backend. The zero value is not usable; call New.
//
// Entities are kept in their encoded form, so callers can never alias stored state and
// every value that comes out is normalized exactly as a durable backend normalizes it
// (null attributes dropped, times in UTC).
type Store struct {
	mu     sync.RWMutex
	closed bool
	meta   store.Meta
	types  map[string][]byte
	nodes  map[string][]byte
	edges  map[string][]byte
	log    []logEntry // Seq ascending; only entries with Seq > meta.Horizon
	bodies map[store.BodyKey][]byte
	dead   []deadBody // Seq ascending
	aux    map[string][]byte
}

// deadBody is a body that the commit at seq let go.
type deadBody struct {
	seq  uint64
	body store.BodyKey
}

type logEntry struct {
	seq uint64
	cs  []byte
}

// New returns an empty store.
func New() *Store {
	return &Store{
		types:  make(map[string][]byte),
		nodes:  make(map[string][]byte),
		edges:  make(map[string][]byte),
		bodies: make(map[store.BodyKey][]byte),
		aux:    make(map[string][]byte),
	}
}

// Meta returns the store's position.
func (s *Store) Meta(ctx context.Context) (store.Meta, error) {
	if err := ctx.Err(); err != nil {
		return store.Meta{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.Meta{}, store.ErrClosed
	}
	return s.meta, nil
}

// Load calls fn for every type, node and edge (each group in key order) of one snapshot.
func (s *Store) Load(ctx context.Context, fn func(store.Record) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	// Encoded entities are immutable, so copying the maps' values is a snapshot.
	types, nodes, edges := sortedValues(s.types), sortedValues(s.nodes), sortedValues(s.edges)
	s.mu.RUnlock()

	for _, b := range types {
		t, err := store.DecodeTypeDecl(b)
		if err != nil {
			return err
		}
		if err := fn(store.Record{Type: t}); err != nil {
			return err
		}
	}
	for _, b := range nodes {
		n, err := store.DecodeNode(b, s)
		if err != nil {
			return err
		}
		if err := fn(store.Record{Node: n}); err != nil {
			return err
		}
	}
	for _, b := range edges {
		e, err := store.DecodeEdge(b)
		if err != nil {
			return err
		}
		if err := fn(store.Record{Edge: e}); err != nil {
			return err
		}
	}
	return nil
}

func sortedValues(m map[string][]byte) [][]byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vs := make([][]byte, len(keys))
	for i, k := range keys {
		vs[i] = m[k]
	}
	return vs
}

// GetNode returns a copy of the stored node, or nil.
func (s *Store) GetNode(ctx context.Context, id herald.NodeID) (*herald.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	b, ok := s.nodes[string(id)]
	if !ok {
		return nil, nil
	}
	return store.DecodeNode(b, s)
}

// Commit applies batches in order; see store.Backend.
func (s *Store) Commit(ctx context.Context, batches []*store.Batch) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.Validate(batches); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	errs := make([]error, len(batches))
	for i, b := range batches {
		if cs := b.Changes; cs != nil {
			if cs.Seq <= s.meta.Seq {
				errs[i] = store.ErrOutOfOrder
				continue
			}
			if !s.holds(b.Expect) {
				errs[i] = store.ErrPrecondition
				continue
			}
			for _, n := range store.NewBodies(cs) {
				data, ok := n.Body.Data()
				if !ok {
					return nil, fmt.Errorf("memstore: the new body of node %s (seq %d) is not in memory", n.ID, cs.Seq)
				}
				s.bodies[store.BodyKey{Node: n.ID, Seq: n.Body.Seq}] = append([]byte(nil), data...)
			}
			for _, m := range store.Mutations(cs) {
				s.apply(m)
			}
			for _, d := range store.DeadBodies(cs) {
				s.dead = append(s.dead, deadBody{cs.Seq, d})
			}
			s.log = append(s.log, logEntry{seq: cs.Seq, cs: store.AppendChangeSet(nil, cs)})
			s.meta.Seq, s.meta.Tick = cs.Seq, cs.Tick
		}
		for _, op := range b.Aux {
			if op.Value == nil {
				delete(s.aux, string(op.Key))
			} else {
				s.aux[string(op.Key)] = append([]byte(nil), op.Value...)
			}
		}
	}
	return errs, nil
}

// LoadBody returns a copy of a stored body.
func (s *Store) LoadBody(id herald.NodeID, seq uint64) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	b, ok := s.bodies[store.BodyKey{Node: id, Seq: seq}]
	if !ok {
		return nil, fmt.Errorf("memstore: body of %s at %d: %w", id, seq, store.ErrNoBody)
	}
	return append([]byte(nil), b...), nil
}

// LoadBodies returns copies of many stored bodies, nil for those it does not hold.
func (s *Store) LoadBodies(ids []herald.NodeID, seqs []uint64) ([][]byte, error) {
	if len(ids) != len(seqs) {
		return nil, fmt.Errorf("memstore: LoadBodies: %d ids and %d seqs", len(ids), len(seqs))
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	out := make([][]byte, len(ids))
	for i := range ids {
		if b, ok := s.bodies[store.BodyKey{Node: ids[i], Seq: seqs[i]}]; ok {
			out[i] = append([]byte(nil), b...)
		}
	}
	return out, nil
}

// LoadAux calls fn with every auxiliary record in key order.
func (s *Store) LoadAux(ctx context.Context, fn func(key, value []byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	keys := make([]string, 0, len(s.aux))
	for k := range s.aux {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		vals[i] = s.aux[k]
	}
	s.mu.RUnlock()
	for i, k := range keys {
		if err := fn([]byte(k), vals[i]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) holds(expect []store.Precondition) bool {
	for _, p := range expect {
		var b []byte
		var ok bool
		if p.Node != "" {
			b, ok = s.nodes[string(p.Node)]
		} else {
			b, ok = s.edges[string(p.Edge)]
		}
		var attrs herald.Attrs
		if ok && p.Attr != "" {
			if p.Node != "" {
				n, err := store.DecodeNode(b, s)
				if err != nil {
					return false
				}
				attrs = n.Attrs
			} else {
				e, err := store.DecodeEdge(b)
				if err != nil {
					return false
				}
				attrs = e.Attrs
			}
		}
		if !p.Holds(ok, attrs) {
			return false
		}
	}
	return true
}

func (s *Store) apply(m store.Mutation) {
	var table map[string][]byte
	switch m.Kind {
	case herald.NodeChange:
		table = s.nodes
	case herald.EdgeChange:
		table = s.edges
	case herald.TypeChange:
		table = s.types
	}
	switch {
	case m.Node != nil:
		table[m.Key] = store.AppendNode(nil, m.Node)
	case m.Edge != nil:
		table[m.Key] = store.AppendEdge(nil, m.Edge)
	case m.Type != nil:
		table[m.Key] = store.AppendTypeDecl(nil, m.Type)
	default:
		delete(table, m.Key)
	}
}

// Changes returns copies of up to limit change sets after the given position.
func (s *Store) Changes(ctx context.Context, after uint64, limit int) ([]*herald.ChangeSet, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, store.ErrClosed
	}
	if after < s.meta.Horizon {
		s.mu.RUnlock()
		return nil, store.ErrCompacted
	}
	i := sort.Search(len(s.log), func(i int) bool { return s.log[i].seq > after })
	entries := s.log[i:]
	if limit > 0 && len(entries) > limit {
		entries = entries[:limit]
	}
	entries = append([]logEntry(nil), entries...)
	s.mu.RUnlock()

	out := make([]*herald.ChangeSet, len(entries))
	for i, e := range entries {
		cs, err := store.DecodeChangeSet(e.cs, s)
		if err != nil {
			return nil, err
		}
		out[i] = cs
	}
	return out, nil
}

// Truncate drops change sets up to upTo (capped at the last committed Seq).
func (s *Store) Truncate(ctx context.Context, upTo uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	upTo = min(upTo, s.meta.Seq)
	if upTo <= s.meta.Horizon {
		return nil
	}
	i := sort.Search(len(s.log), func(i int) bool { return s.log[i].seq > upTo })
	s.log = append([]logEntry(nil), s.log[i:]...)
	j := sort.Search(len(s.dead), func(i int) bool { return s.dead[i].seq > upTo })
	for _, d := range s.dead[:j] {
		delete(s.bodies, d.body)
	}
	s.dead = append([]deadBody(nil), s.dead[j:]...)
	s.meta.Horizon = upTo
	return nil
}

// Close releases the store's memory. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.types, s.nodes, s.edges, s.log, s.bodies, s.dead, s.aux = nil, nil, nil, nil, nil, nil, nil
	return nil
}
