// Package store defines the storage seam of Herald: the Backend interface every storage
// engine implements, and the batch and record types that cross it.
// The engine talks to storage only through Backend; store/storetest checks every
// implementation against the same conformance suite.
package store

import (
	"context"
	"errors"

	"github.com/herald-mq/herald"
)

// Sentinel errors of the storage seam.
var (
	// ErrCompacted is returned by Changes when the requested position is older than the
	// change log's retention horizon.
	ErrCompacted = errors.New("store: position compacted")
	// ErrPrecondition is returned for a batch whose preconditions do not hold; the batch
	// is not applied.
	ErrPrecondition = errors.New("store: precondition failed")
	// ErrOutOfOrder is returned for a batch whose Seq is not greater than the last
	// committed one.
	ErrOutOfOrder = errors.New("store: batch out of order")
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("store: closed")
	// ErrNoBody is returned by LoadBody for a body the store does not hold.
	ErrNoBody = errors.New("store: no such body")
)

// Meta is the durable position of a store.
type Meta struct {
	Seq     uint64 // last committed sequence number, 0 for an empty store
	Tick    uint64 // logical clock at that commit
	Horizon uint64 // change sets with Seq <= Horizon have been truncated from the log
}

// Precondition is a check a batch makes against the stored state, atomically with its
// commit. Exactly one of Node and Edge is set. With Present false the entity must not
// exist. With Present true it must exist and, when Attr is not empty, its attribute Attr
// must equal Value (compared with herald.Compare and the same kind).
type Precondition struct {
	Node    herald.NodeID
	Edge    herald.EdgeKey
	Present bool
	Attr    string
	Value   herald.Value
}

// Batch is the durable effect of one transaction: its change set (which the backend
// applies to the stored state — a nil after image deletes, any other image replaces —
// and appends to the change log), its preconditions, and its auxiliary records.
//
// A batch without a change set writes only its auxiliary records: it takes no seq, and
// leaves the position and the change log alone. Services keep state outside the graph
// this way (consume mode's leases), ordered with the commits around it.
type Batch struct {
	Changes *herald.ChangeSet
	Expect  []Precondition
	Aux     []AuxOp
}

// AuxOp writes or deletes one auxiliary record: a key and value outside the graph that
// a service keeps durable (LoadAux reads them back). A nil Value deletes the key. Once
// marks a record that is written once and deleted once, which lets a backend drop both
// writes cheaply when they meet.
type AuxOp struct {
	Key   []byte
	Value []byte
	Once  bool
}

// Record is one entity of a snapshot: exactly one field is set.
type Record struct {
	Type *herald.TypeDecl
	Node *herald.Node
	Edge *herald.Edge
}

// Backend is a durable store of the graph and its change log.
//
// Implementations must be safe for concurrent use; the engine calls Commit from a single
// writer goroutine, but readers (Load, Changes, GetNode) may run at the same time.
// AsyncCommitter is a Backend that can start a commit without waiting for its sync.
// CommitAsync checks and applies batches as Commit does and returns once they are in
// the write-ahead log, in call order; wait blocks until they are durable and must be
// called exactly once. Calls whose waits are made in call order see their batches
// durable in that order. The engine uses it to write the next group while the last
// one syncs.
type AsyncCommitter interface {
	CommitAsync(ctx context.Context, batches []*Batch) (errs []error, wait func() error, err error)
}

type Backend interface {
	// Meta returns the durable position.
	Meta(ctx context.Context) (Meta, error)

	// Load calls fn for every stored type declaration, then every node, then every edge,
	// from one consistent snapshot. It stops at the first error fn returns.
	Load(ctx context.Context, fn func(Record) error) error

	// GetNode returns a stored node, or nil when it does not exist.
	GetNode(ctx context.Context, id herald.NodeID) (*herald.Node, error)

	// LoadBody returns the encoding of the body that commit seq wrote for node id (see
	// herald.Body). A body is stored with the commit that creates it and kept until the
	// change log no longer reaches the commit that replaced or deleted it. Nodes the
	// backend returns carry bodies that read themselves through LoadBody.
	LoadBody(id herald.NodeID, seq uint64) ([]byte, error)

	// LoadBodies reads many bodies at once (see herald.BodyBatchSource): ids[i] and
	// seqs[i] name one, and a body the backend does not hold comes back nil.
	LoadBodies(ids []herald.NodeID, seqs []uint64) ([][]byte, error)

	// LoadAux calls fn with every auxiliary record (see AuxOp) in key order, from one
	// consistent snapshot. It stops at the first error fn returns.
	LoadAux(ctx context.Context, fn func(key, value []byte) error) error

	// Commit durably applies batches in order. Each batch is atomic and is checked against
	// its preconditions (seeing the effects of the earlier batches of the same call); the
	// whole call is made durable with one sync before it returns. errs has one entry per
	// batch: nil when applied, ErrPrecondition or ErrOutOfOrder when skipped. A non-nil err
	// means nothing of the call may be assumed durable; a malformed call (see Validate)
	// returns an error and applies nothing. Meta.Seq and Meta.Tick become those of the
	// last applied batch. Seq numbers may have gaps.
	Commit(ctx context.Context, batches []*Batch) (errs []error, err error)

	// Changes returns up to limit change sets with Seq > after, in Seq order (limit <= 0
	// means no limit). It returns ErrCompacted when after < Horizon.
	Changes(ctx context.Context, after uint64, limit int) ([]*herald.ChangeSet, error)

	// Truncate removes change sets with Seq <= upTo from the log and raises the horizon to
	// upTo, together with the bodies that no retained change set can reach any more
	// (those replaced or deleted by a commit up to upTo). upTo is capped at the last
	// committed Seq, so a reader that has seen every commit never gets ErrCompacted.
	// Truncating at or below the horizon is a no-op.
	Truncate(ctx context.Context, upTo uint64) error

	// Close releases the store. Further calls return ErrClosed.
	Close() error
}
