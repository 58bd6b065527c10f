package store

import (
	"fmt"

	"github.com/herald-mq/herald"
)

// The helpers in this file pin down the semantics every Backend shares, so that the
// backends differ only in how they store bytes.

// Mutation is one write a change set makes to the stored state. Exactly one of Node,
// Edge and Type is set, unless the mutation deletes, in which case all three are nil.
type Mutation struct {
	Kind herald.ChangeKind
	Key  string // node id, edge key or type name
	Node *herald.Node
	Edge *herald.Edge
	Type *herald.TypeDecl
}

// Delete reports whether m removes the entity at Key.
func (m Mutation) Delete() bool { return m.Node == nil && m.Edge == nil && m.Type == nil }

// Mutations returns the writes of cs in order. For each change, the image of its Kind is
// used: a non-nil after image is written at its key; a before image whose key is not
// written by the after image (the after image is nil, or has another key) is deleted.
// Call Validate first: Mutations ignores changes that Validate rejects.
func Mutations(cs *herald.ChangeSet) []Mutation {
	var ms []Mutation
	for i := range cs.Changes {
		c := &cs.Changes[i]
		var before, after string
		var hasBefore, hasAfter bool
		put := Mutation{Kind: c.Kind}
		switch c.Kind {
		case herald.NodeChange:
			if hasBefore = c.NodeBefore != nil; hasBefore {
				before = string(c.NodeBefore.ID)
			}
			if hasAfter = c.NodeAfter != nil; hasAfter {
				after, put.Node = string(c.NodeAfter.ID), c.NodeAfter
			}
		case herald.EdgeChange:
			if hasBefore = c.EdgeBefore != nil; hasBefore {
				before = string(c.EdgeBefore.Key())
			}
			if hasAfter = c.EdgeAfter != nil; hasAfter {
				after, put.Edge = string(c.EdgeAfter.Key()), c.EdgeAfter
			}
		case herald.TypeChange:
			if hasBefore = c.TypeBefore != nil; hasBefore {
				before = c.TypeBefore.Name
			}
			if hasAfter = c.TypeAfter != nil; hasAfter {
				after, put.Type = c.TypeAfter.Name, c.TypeAfter
			}
		default:
			continue
		}
		if hasBefore && (!hasAfter || before != after) {
			ms = append(ms, Mutation{Kind: c.Kind, Key: before})
		}
		if hasAfter {
			put.Key = after
			ms = append(ms, put)
		}
	}
	return ms
}

// Validate checks that batches are well formed: every batch has a change set, every
// change has a known kind and an image of that kind, and every precondition names
// exactly one entity. A backend's Commit returns Validate's error for the whole call,
// without applying anything.
func Validate(batches []*Batch) error {
	for i, b := range batches {
		if b == nil || (b.Changes == nil && len(b.Aux) == 0) {
			return fmt.Errorf("store: batch %d has neither a change set nor auxiliary records", i)
		}
		for j, op := range b.Aux {
			if len(op.Key) == 0 {
				return fmt.Errorf("store: batch %d: auxiliary record %d has an empty key", i, j)
			}
		}
		if b.Changes == nil {
			if len(b.Expect) > 0 {
				return fmt.Errorf("store: batch %d: preconditions need a change set", i)
			}
			continue
		}
		for j := range b.Changes.Changes {
			c := &b.Changes.Changes[j]
			var ok bool
			switch c.Kind {
			case herald.NodeChange:
				ok = c.NodeBefore != nil || c.NodeAfter != nil
			case herald.EdgeChange:
				ok = c.EdgeBefore != nil || c.EdgeAfter != nil
			case herald.TypeChange:
				ok = c.TypeBefore != nil || c.TypeAfter != nil
			}
			if !ok {
				return fmt.Errorf("store: batch %d (seq %d): change %d of kind %d has no image of its kind", i, b.Changes.Seq, j, c.Kind)
			}
		}
		for j, p := range b.Expect {
			if (p.Node == "") == (p.Edge == "") {
				return fmt.Errorf("store: batch %d (seq %d): precondition %d must name exactly one of a node and an edge", i, b.Changes.Seq, j)
			}
		}
	}
	return nil
}

// Holds reports whether p holds for an entity that exists (present) with attributes
// attrs. A missing attribute reads as null.
func (p Precondition) Holds(present bool, attrs herald.Attrs) bool {
	if present != p.Present {
		return false
	}
	if !present || p.Attr == "" {
		return true
	}
	v := attrs.Get(p.Attr)
	return v.Kind() == p.Value.Kind() && herald.Compare(v, p.Value) == 0
}

// BodyKey names a stored body: the node and the commit that wrote it.
type BodyKey struct {
	Node herald.NodeID
	Seq  uint64
}

// NewBodies returns the nodes of cs whose body cs itself wrote: the bodies a backend
// stores with the commit. Their encodings are in memory (herald.Body.Data).
func NewBodies(cs *herald.ChangeSet) []*herald.Node {
	var out []*herald.Node
	for i := range cs.Changes {
		if n := cs.Changes[i].NodeAfter; n != nil && n.Body != nil && n.Body.Seq == cs.Seq {
			out = append(out, n)
		}
	}
	return out
}

// DeadBodies returns the bodies cs leaves behind: those of nodes it deletes or whose body
// it replaces. Once the change log is truncated past cs, nothing can read them.
func DeadBodies(cs *herald.ChangeSet) []BodyKey {
	var out []BodyKey
	for i := range cs.Changes {
		c := &cs.Changes[i]
		b := c.NodeBefore
		if c.Kind != herald.NodeChange || b == nil || b.Body == nil {
			continue
		}
		if a := c.NodeAfter; a != nil && a.ID == b.ID && a.Body != nil && a.Body.Seq == b.Body.Seq {
			continue
		}
		out = append(out, BodyKey{b.ID, b.Body.Seq})
	}
	return out
}

// WrittenOnce reports whether the node image before was the only image ever stored
// under its key since the node was created, so deleting it may use a backend's
// cheaper single delete.
func WrittenOnce(before *herald.Node) bool {
	return before != nil && before.Ver != 0 && before.Ver == before.Created
}
