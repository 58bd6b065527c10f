package pgstore

import (
	"fmt"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store"
)

// plan is what one Commit call writes: the batches it applies, checked in order, turned
// into the net effect of the call on each table, so that each table takes one or two
// multi-row statements whatever the number of batches.
type plan struct {
	pos      position
	errs     []error
	writes   int  // batches that write something
	advanced bool // a change set applied: the position moves
	err      error

	reads *readSet // the stored rows preconditions name (locked path only)

	types, nodes, edges, aux table
	changes                  struct {
		seqs []int64
		sets [][]byte
	}
	bodies struct {
		at    map[store.BodyKey]int
		nodes [][]byte
		seqs  []int64
		data  [][]byte
	}
	dead struct {
		seqs, bodySeqs []int64
		nodes          [][]byte
	}
	buf []byte // holds the encodings, which the tables refer to
}

// readSet holds stored records by key, as read under the position lock.
type readSet struct{ nodes, edges map[string][]byte }

// table is the net effect of a call on one table: the last value written to each key,
// nil for a deletion.
type table struct {
	at   map[string]int
	keys [][]byte
	vals [][]byte
}

func (t *table) set(key string, val []byte) {
	if i, ok := t.at[key]; ok {
		t.vals[i] = val
		return
	}
	if t.at == nil {
		t.at = make(map[string]int)
	}
	t.at[key] = len(t.keys)
	t.keys = append(t.keys, []byte(key))
	t.vals = append(t.vals, val)
}

func (t *table) get(key string) (val []byte, ok bool) {
	i, ok := t.at[key]
	if !ok {
		return nil, false
	}
	return t.vals[i], true
}

// stmts adds the statements that write t: a multi-row delete and a multi-row upsert.
func (t *table) stmts(out []stmt, put, del string) []stmt {
	var putK, putV, delK [][]byte
	for i, k := range t.keys {
		if t.vals[i] == nil {
			delK = append(delK, k)
		} else {
			putK, putV = append(putK, k), append(putV, t.vals[i])
		}
	}
	if len(delK) > 0 {
		out = append(out, stmt{del, [][]byte{byteaArray(delK)}})
	}
	if len(putK) > 0 {
		out = append(out, stmt{put, [][]byte{byteaArray(putK), byteaArray(putV)}})
	}
	return out
}

// deletesPutBy reports whether t deletes a key that o writes.
func (t *table) deletesPutBy(o *table) bool {
	if len(o.at) == 0 {
		return false
	}
	for i, k := range t.keys {
		if j, ok := o.at[string(k)]; ok && t.vals[i] == nil && o.vals[j] != nil {
			return true
		}
	}
	return false
}

// deletesPutBy reports whether p deletes a key that one of calls writes.
func (p *plan) deletesPutBy(calls []*call) bool {
	for _, c := range calls {
		o := c.plan
		if p.nodes.deletesPutBy(&o.nodes) || p.edges.deletesPutBy(&o.edges) ||
			p.types.deletesPutBy(&o.types) || p.aux.deletesPutBy(&o.aux) {
			return true
		}
	}
	return false
}

func newPlan(pos position, n int, reads *readSet) *plan {
	return &plan{pos: pos, errs: make([]error, n), reads: reads}
}

// add checks batch i against the position and its preconditions (which see the stored
// rows plus the batches added before it) and, when it passes, adds its writes.
func (p *plan) add(i int, b *store.Batch) {
	if p.err != nil {
		return
	}
	if cs := b.Changes; cs != nil {
		if cs.Seq <= p.pos.seq {
			p.errs[i] = store.ErrOutOfOrder
			return
		}
		ok, err := p.holds(b.Expect)
		if err != nil {
			p.err = err
			return
		}
		if !ok {
			p.errs[i] = store.ErrPrecondition
			return
		}
		if p.err = p.changeSet(cs); p.err != nil {
			return
		}
		p.pos, p.advanced = position{cs.Seq, cs.Tick}, true
	}
	for _, op := range b.Aux {
		p.aux.set(string(op.Key), op.Value) // a nil value deletes, Once or not
	}
	p.writes++
}

func (p *plan) changeSet(cs *herald.ChangeSet) error {
	for _, m := range store.Mutations(cs) {
		t, start := p.table(m.Kind), len(p.buf)
		switch {
		case m.Node != nil:
			p.buf = store.AppendNode(p.buf, m.Node)
		case m.Edge != nil:
			p.buf = store.AppendEdge(p.buf, m.Edge)
		case m.Type != nil:
			p.buf = store.AppendTypeDecl(p.buf, m.Type)
		default:
			t.set(m.Key, nil)
			continue
		}
		t.set(m.Key, p.buf[start:len(p.buf):len(p.buf)])
	}
	for _, n := range store.NewBodies(cs) {
		data, ok := n.Body.Data()
		if !ok {
			return fmt.Errorf("pgstore: the new body of node %s (seq %d) is not in memory", n.ID, cs.Seq)
		}
		p.body(store.BodyKey{Node: n.ID, Seq: n.Body.Seq}, data)
	}
	for _, d := range store.DeadBodies(cs) {
		p.dead.seqs = append(p.dead.seqs, int64(cs.Seq))
		p.dead.bodySeqs = append(p.dead.bodySeqs, int64(d.Seq))
		p.dead.nodes = append(p.dead.nodes, []byte(d.Node))
	}
	start := len(p.buf)
	p.buf = store.AppendChangeSet(p.buf, cs)
	p.changes.seqs = append(p.changes.seqs, int64(cs.Seq))
	p.changes.sets = append(p.changes.sets, p.buf[start:len(p.buf):len(p.buf)])
	return nil
}

func (p *plan) body(k store.BodyKey, data []byte) {
	b := &p.bodies
	if i, ok := b.at[k]; ok {
		b.data[i] = data
		return
	}
	if b.at == nil {
		b.at = make(map[store.BodyKey]int)
	}
	b.at[k] = len(b.nodes)
	b.nodes = append(b.nodes, []byte(k.Node))
	b.seqs = append(b.seqs, int64(k.Seq))
	b.data = append(b.data, data)
}

func (p *plan) table(k herald.ChangeKind) *table {
	switch k {
	case herald.NodeChange:
		return &p.nodes
	case herald.EdgeChange:
		return &p.edges
	default:
		return &p.types
	}
}

// holds checks preconditions against the writes of the call so far, then the rows read.
func (p *plan) holds(expect []store.Precondition) (bool, error) {
	for _, pre := range expect {
		t, key, stored := &p.nodes, string(pre.Node), p.reads.nodes
		if pre.Node == "" {
			t, key, stored = &p.edges, string(pre.Edge), p.reads.edges
		}
		rec, present := t.get(key)
		if present {
			present = rec != nil
		} else {
			rec, present = stored[key]
		}
		var attrs herald.Attrs
		if present && pre.Attr != "" {
			var err error
			if attrs, err = decodeAttrs(pre.Node != "", rec); err != nil {
				return false, fmt.Errorf("pgstore: precondition on %q: %w", key, err)
			}
		}
		if !pre.Holds(present, attrs) {
			return false, nil
		}
	}
	return true, nil
}

func decodeAttrs(isNode bool, rec []byte) (herald.Attrs, error) {
	if isNode {
		n, err := store.DecodeNode(rec, nil)
		if err != nil {
			return nil, err
		}
		return n.Attrs, nil
	}
	e, err := store.DecodeEdge(rec)
	if err != nil {
		return nil, err
	}
	return e.Attrs, nil
}

// stmts adds the plan's writes to out, as a few multi-row statements.
func (p *plan) stmts(out []stmt, q *queries) []stmt {
	out = p.types.stmts(out, q.putTypes, q.delTypes)
	out = p.nodes.stmts(out, q.putNodes, q.delNodes)
	out = p.edges.stmts(out, q.putEdges, q.delEdges)
	if c := &p.changes; len(c.seqs) > 0 {
		out = append(out, stmt{q.putChanges, [][]byte{int8Array(c.seqs), byteaArray(c.sets)}})
	}
	if b := &p.bodies; len(b.nodes) > 0 {
		out = append(out, stmt{q.putBodies, [][]byte{byteaArray(b.nodes), int8Array(b.seqs), byteaArray(b.data)}})
	}
	if d := &p.dead; len(d.seqs) > 0 {
		out = append(out, stmt{q.putDead, [][]byte{int8Array(d.seqs), int8Array(d.bodySeqs), byteaArray(d.nodes)}})
	}
	return p.aux.stmts(out, q.putAux, q.delAux)
}
