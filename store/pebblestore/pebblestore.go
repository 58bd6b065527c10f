// Package pebblestore is Herald's default store.Backend, embedded on cockroachdb/pebble.
// Every Commit call becomes one synced pebble batch, so a group of transactions costs a
// single fsync; see docs/storage.md for the key layout.
package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store"
)

var _ store.Backend = (*Store)(nil)

// Key layout. Every key starts with a one-byte prefix; Load relies on types, nodes and
// edges sorting in that order.
const (
	prefixMeta = 0x01 // followed by one byte naming the entry
	prefixType = 0x02 // followed by the type name
	prefixNode = 0x03 // followed by the node id
	prefixEdge = 0x04 // followed by the herald.EdgeKey bytes
	prefixLog  = 0x05 // followed by the change set's Seq, 8 bytes big-endian
	prefixBody = 0x06 // followed by the node id, a zero byte and the body's Seq (8 bytes)
	prefixAux  = 0x07 // followed by the auxiliary record's key
	prefixDead = 0x08 // followed by the Seq that let the body go, the body's Seq and the node id
)

var (
	keyFormat   = []byte{prefixMeta, 'f'} // uvarint layout version
	keyPosition = []byte{prefixMeta, 'p'} // uvarint Seq, uvarint Tick
	keyHorizon  = []byte{prefixMeta, 'h'} // uvarint Horizon
	keyMarked   = []byte{prefixMeta, 'm'} // present once the store has a position mark
)

// layoutVersion is stored under keyFormat; Open refuses a store written with a newer one.
// Version 2 added bodies, auxiliary records and the list of dead bodies; a version 1
// store is read as it is (its records decode unchanged) and marked version 2.
const layoutVersion = 2

// Options configures Open.
type Options struct {
	// FS is the filesystem the store lives on; nil means the operating system's.
	// Tests pass vfs.NewMem() or the crashable vfs.NewStrictMem().
	FS vfs.FS
	// Logger receives pebble's messages as they are: the caller labels them (the
	// server adds component=pebble). Nil means slog.Default() with component=pebble.
	Logger *slog.Logger
	// AcceptLoss opens a store whose write-ahead log ends before its position mark
	// (mark.go), at the position the log reaches, instead of refusing with ErrLostTail.
	AcceptLoss bool
	// MarkInterval is how often at most the position mark is rewritten; 0 means
	// DefaultMarkInterval.
	MarkInterval time.Duration
	// Clock times MarkInterval; nil means the real clock.
	Clock herald.Clock
	// PreparedLogs is how many write-ahead log files Open writes ahead of use when it
	// creates the store (none for a store that exists), so that the first logs are
	// not grown write by write (logfiles.go). Writing them fails softly: the store
	// opens without them. PreparedLogSize is their size; 0 means the memtable size.
	PreparedLogs    int
	PreparedLogSize int64
}

// FullPreparedLogs is the number of prepared log files that covers every log Pebble
// creates before it starts reusing retired ones (its memtables double from 256 KB to
// 64 MB meanwhile): 576 MB in all. A store writes them only when asked
// (Options.PreparedLogs); `herald serve` does not by default.
const FullPreparedLogs = 9

// Stats counts the work a Store has done since Open.
type Stats struct {
	Calls   uint64 // Commit calls that wrote something
	Batches uint64 // batches applied
	Syncs   uint64 // synced writes (Commit and Truncate)
}

// Store is a Backend on a pebble database. It is safe for concurrent use.
type Store struct {
	db *pebble.DB

	// mu guards closed: every operation holds it shared, Close holds it exclusively, so
	// the database is never closed under a running call.
	mu     sync.RWMutex
	closed bool

	// wmu serializes writers (Commit, Truncate) up to the point where their batch has
	// entered the log; next, the position of the last batch entered, changes only
	// under it. meta is the durable position.
	wmu    sync.Mutex
	next   store.Meta
	w      writer // prepare's, reused from commit to commit (under wmu)
	metaMu sync.Mutex
	meta   store.Meta

	calls, batches, syncs atomic.Uint64

	mark *marker // the position mark (mark.go)
	dir  string
	lock *pebble.Lock // the directory's, released after the database is closed
}

// memTableSize bounds one memtable; blockCacheSize is the block cache's.
const (
	memTableSize   = 64 << 20
	blockCacheSize = 32 << 20
)

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default().With("component", "pebble")
	}
	po := &pebble.Options{
		FS:                 opts.FS,
		Logger:             pebbleLogger{logger},
		FormatMajorVersion: pebble.FormatNewest,
		// A message is written at publish and deleted at its ACK, usually seconds
		// later: with a large memtable both meet before a flush and neither reaches a
		// table. Memtables start small and grow to this size as writes need.
		MemTableSize:                memTableSize,
		MemTableStopWritesThreshold: 4,
		// Bodies of a backlog larger than the engine's body cache are read back
		// by key: keep their blocks and the tables' indexes cached, and let bloom
		// filters skip the tables that do not hold a key.
		Cache: pebble.NewCache(blockCacheSize),
	}
	defer po.Cache.Unref()
	po.Levels = make([]pebble.LevelOptions, 7)
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	if po.FS == nil {
		po.FS = vfs.Default
	}
	if err := createDir(po.FS, dir); err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	// The directory is locked before anything in it is touched, so that a second
	// process on it neither removes the first one's prepared logs nor gets further
	// than this.
	lock, err := lockDir(po.FS, dir)
	if err != nil {
		return nil, err
	}
	po.Lock = lock
	if err := prepareLogs(po, dir, opts, logger); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	s := &Store{db: db, dir: dir, lock: lock}
	if err := s.init(); err != nil {
		_ = db.Close()
		_ = lock.Close()
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	if err := s.checkMark(po.FS, dir, opts, logger); err != nil {
		_ = db.Close()
		_ = lock.Close()
		return nil, err
	}
	return s, nil
}

// ErrLocked is returned by Open when another process (or another Store in this one)
// holds the directory's lock.
var ErrLocked = errors.New("pebblestore: data directory in use")

// lockDir takes the lock Pebble takes on dir (its LOCK file), and turns the error of a
// lock held elsewhere into ErrLocked, naming the holder's process id when the system
// tells it.
func lockDir(fsys vfs.FS, dir string) (*pebble.Lock, error) {
	lock, err := pebble.LockDirectory(dir, fsys)
	if err == nil {
		return lock, nil
	}
	if !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EACCES) && !strings.Contains(err.Error(), "lock held by current process") {
		return nil, fmt.Errorf("pebblestore: open %s: locking it: %w", dir, err)
	}
	holder := "another process ("
	if strings.Contains(err.Error(), "current process") {
		holder = "this process ("
	} else if fsys == vfs.Default {
		if pid := lockHolder(fsys.PathJoin(dir, lockFile)); pid > 0 {
			holder += fmt.Sprintf("pid %d, ", pid)
		}
	}
	return nil, fmt.Errorf("%w: %s is held by %sits %s file is locked)", ErrLocked, dir, holder, lockFile)
}

// lockFile is the name of Pebble's lock file in a store's directory.
const lockFile = "LOCK"

// checkMark compares the recovered position with the position mark (mark.go) and
// starts the marker.
func (s *Store) checkMark(fs vfs.FS, dir string, opts Options, logger *slog.Logger) error {
	clk := opts.Clock
	if clk == nil {
		clk = clock.Real()
	}
	interval := opts.MarkInterval
	if interval <= 0 {
		interval = DefaultMarkInterval
	}
	s.mark = newMarker(fs, dir, clk, interval)
	marked, ok, err := readMark(fs, dir)
	if err != nil {
		return fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	_, hadMark, err := getUvarints(s.db, keyMarked, 0)
	if err != nil {
		return fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	switch {
	case !ok && hadMark && !opts.AcceptLoss:
		return fmt.Errorf("%w: %s has no position mark (%s), though it wrote one: without it, commits its write-ahead log lost cannot be told from none (a deleted file or an incomplete restore?). The store is not opened; to open it at seq %d as it is, start with --accept-data-loss",
			ErrLostTail, dir, markFile, s.meta.Seq)
	case !ok && hadMark:
		logger.Error("opening a store whose position mark is missing, as told", "recovered_seq", s.meta.Seq)
	case ok && marked > s.meta.Seq && !opts.AcceptLoss:
		return fmt.Errorf("%w: %s reaches seq %d, but seq %d had been made durable; the store is not opened (a damaged disk or an incomplete restore?). To open it at seq %d, losing the commits after it, start with --accept-data-loss",
			ErrLostTail, dir, s.meta.Seq, marked, s.meta.Seq)
	case ok && marked > s.meta.Seq:
		logger.Error("opening a store that lost synced commits, as told", "recovered_seq", s.meta.Seq, "marked_seq", marked, "lost", marked-s.meta.Seq)
	}
	if !ok || marked != s.meta.Seq {
		if err := s.mark.write(s.meta.Seq); err != nil {
			return fmt.Errorf("pebblestore: open %s: writing the position mark: %w", dir, err)
		}
	}
	if !hadMark {
		// Written once the mark exists, so a store is never told to expect a mark it
		// has not got; in the first batch of a new store's log, where a lost tail
		// does not reach.
		if err := s.db.Set(keyMarked, nil, pebble.Sync); err != nil {
			return fmt.Errorf("pebblestore: open %s: %w", dir, err)
		}
	}
	s.mark.start()
	return nil
}

// createDir creates dir if it does not exist and syncs its parent, so that a new store
// does not vanish with its directory entry after a crash. Pebble syncs the directory's
// own contents.
func createDir(fs vfs.FS, dir string) error {
	if _, err := fs.Stat(dir); err == nil {
		return nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return syncDir(fs, fs.PathDir(dir))
}

// init checks or writes the layout version and reads the durable position.
func (s *Store) init() error {
	v, ok, err := getUvarints(s.db, keyFormat, 1)
	if err != nil {
		return err
	}
	switch {
	case ok && (v[0] < 1 || v[0] > layoutVersion):
		return fmt.Errorf("unsupported layout version %d (this build reads 1 to %d)", v[0], layoutVersion)
	case !ok || v[0] < layoutVersion:
		if err := s.db.Set(keyFormat, binary.AppendUvarint(nil, layoutVersion), pebble.Sync); err != nil {
			return err
		}
	}
	pos, _, err := getUvarints(s.db, keyPosition, 2)
	if err != nil {
		return err
	}
	hor, _, err := getUvarints(s.db, keyHorizon, 1)
	if err != nil {
		return err
	}
	s.meta = store.Meta{Seq: pos[0], Tick: pos[1], Horizon: hor[0]}
	s.next = s.meta
	return nil
}

type getter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

// getUvarints reads n uvarints stored at key; ok is false (and the values zero) when the
// key is absent.
func getUvarints(r getter, key []byte, n int) (vs []uint64, ok bool, err error) {
	vs = make([]uint64, n)
	b, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return vs, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	for i := range vs {
		v, m := binary.Uvarint(b)
		if m <= 0 {
			return nil, false, fmt.Errorf("pebblestore: meta %q: %w", key, herald.ErrCorrupt)
		}
		vs[i], b = v, b[m:]
	}
	return vs, true, nil
}

// get returns a copy-free view of the value at key, passed to fn while valid.
func get(r getter, key []byte, fn func([]byte) error) (found bool, err error) {
	b, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	return true, fn(b)
}

func nodeKey(id string) []byte  { return append([]byte{prefixNode}, id...) }
func edgeKey(key string) []byte { return append([]byte{prefixEdge}, key...) }

func logKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixLog}, seq)
}

func bodyKey(id herald.NodeID, seq uint64) []byte {
	return appendBodyKey(make([]byte, 0, 2+len(id)+8), id, seq)
}

func appendBodyKey(k []byte, id herald.NodeID, seq uint64) []byte {
	k = append(append(append(k, prefixBody), id...), 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

func appendDeadKey(k []byte, seq uint64, b store.BodyKey) []byte {
	k = binary.BigEndian.AppendUint64(append(k, prefixDead), seq)
	k = binary.BigEndian.AppendUint64(k, b.Seq)
	return append(k, b.Node...)
}

// acquire takes the shared lock for one call; it fails once the store is closed.
func (s *Store) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	return nil
}

// Meta returns the durable position.
func (s *Store) Meta(ctx context.Context) (store.Meta, error) {
	if err := s.acquire(ctx); err != nil {
		return store.Meta{}, err
	}
	defer s.mu.RUnlock()
	// Read the stored keys rather than s.meta, so that Meta is never behind what a
	// concurrent reader of the log or the graph has already seen.
	snap := s.db.NewSnapshot()
	defer snap.Close()
	pos, _, err := getUvarints(snap, keyPosition, 2)
	if err != nil {
		return store.Meta{}, err
	}
	hor, _, err := getUvarints(snap, keyHorizon, 1)
	if err != nil {
		return store.Meta{}, err
	}
	return store.Meta{Seq: pos[0], Tick: pos[1], Horizon: hor[0]}, nil
}

// Load calls fn for every type, node and edge, in key order, from one pebble snapshot.
// fn must not call Close.
func (s *Store) Load(ctx context.Context, fn func(store.Record) error) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIter(&pebble.IterOptions{
		LowerBound: []byte{prefixType},
		UpperBound: []byte{prefixEdge + 1},
	})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		var rec store.Record
		var err error
		switch v := it.Value(); it.Key()[0] {
		case prefixType:
			rec.Type, err = store.DecodeTypeDecl(v)
		case prefixNode:
			rec.Node, err = store.DecodeNode(v, s)
		case prefixEdge:
			rec.Edge, err = store.DecodeEdge(v)
		}
		if err != nil {
			return fmt.Errorf("pebblestore: key %q: %w", it.Key(), err)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return it.Error()
}

// GetNode returns the stored node, or nil.
func (s *Store) GetNode(ctx context.Context, id herald.NodeID) (*herald.Node, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var n *herald.Node
	_, err := get(s.db, nodeKey(string(id)), func(b []byte) (err error) {
		n, err = store.DecodeNode(b, s)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: node %q: %w", id, err)
	}
	return n, nil
}

// Commit applies batches in order as one synced pebble batch; see store.Backend.
// Preconditions read an indexed batch, so they see the database plus the batches of the
// same call applied before them; a call without preconditions uses a plain batch.
func (s *Store) Commit(ctx context.Context, batches []*store.Batch) ([]error, error) {
	errs, wait, err := s.CommitAsync(ctx, batches)
	if err != nil {
		return nil, err
	}
	return errs, wait()
}

// CommitAsync implements store.AsyncCommitter: the batches enter the write-ahead log
// in call order and the call returns without waiting for their sync; wait blocks until
// they are durable. A later call's batches sync together with, or after, an earlier
// call's, so a caller that waits in call order sees them durable in order, and the
// next group's write overlaps this one's sync. wait must be called (Close waits for
// it).
func (s *Store) CommitAsync(ctx context.Context, batches []*store.Batch) ([]error, func() error, error) {
	if err := store.Validate(batches); err != nil {
		return nil, nil, err
	}
	if err := s.acquire(ctx); err != nil {
		return nil, nil, err
	}
	s.wmu.Lock()
	errs, pb, meta, writes, err := s.prepare(ctx, batches)
	if err == nil && pb != nil {
		if err = s.db.ApplyNoSyncWait(pb, pebble.Sync); err != nil {
			err = fmt.Errorf("pebblestore: commit: %w", err)
		} else {
			s.next = meta
		}
	}
	s.wmu.Unlock()
	if err != nil || pb == nil {
		if pb != nil {
			_ = pb.Close()
		}
		s.mu.RUnlock()
		return errs, func() error { return err }, err
	}
	return errs, func() error {
		defer s.mu.RUnlock()
		err := pb.SyncWait()
		_ = pb.Close()
		if err != nil {
			return fmt.Errorf("pebblestore: commit: %w", err)
		}
		s.syncs.Add(1)
		s.calls.Add(1)
		s.batches.Add(uint64(writes))
		s.metaMu.Lock()
		if meta.Seq > s.meta.Seq {
			s.meta.Seq, s.meta.Tick = meta.Seq, meta.Tick
		}
		durable := s.meta.Seq
		s.metaMu.Unlock()
		s.mark.maybe(durable)
		return nil
	}, nil
}

// prepare builds the pebble batch of a commit under wmu: the change sets (checked
// against the position of the last prepared commit and their preconditions), the
// auxiliary records and the new position. pb is nil when there is nothing to write;
// writes counts the batches that wrote something.
func (s *Store) prepare(ctx context.Context, batches []*store.Batch) (errs []error, pb *pebble.Batch, meta store.Meta, writes int, err error) {
	meta = s.next
	indexed := false
	for _, b := range batches {
		indexed = indexed || len(b.Expect) > 0
	}
	if indexed {
		pb = s.db.NewIndexedBatch()
	} else {
		pb = s.db.NewBatch()
	}
	fail := func(err error) ([]error, *pebble.Batch, store.Meta, int, error) {
		_ = pb.Close()
		return nil, nil, meta, 0, err
	}
	errs = make([]error, len(batches))
	applied := 0
	w := &s.w // its buffers carry over from commit to commit (prepare runs under wmu)
	w.pb = pb
	defer w.release()
	for i, b := range batches {
		if cs := b.Changes; cs != nil {
			if cs.Seq <= meta.Seq {
				errs[i] = store.ErrOutOfOrder
				continue
			}
			ok, err := holds(pb, b.Expect)
			if err != nil {
				return fail(err)
			}
			if !ok {
				errs[i] = store.ErrPrecondition
				continue
			}
			if err := w.changeSet(cs); err != nil {
				return fail(err)
			}
			meta.Seq, meta.Tick = cs.Seq, cs.Tick
			applied++
		}
		if err := w.aux(b.Aux); err != nil {
			return fail(err)
		}
		writes++
	}
	if writes == 0 {
		_ = pb.Close()
		return errs, nil, meta, 0, nil
	}
	if applied > 0 {
		pos := binary.AppendUvarint(binary.AppendUvarint(nil, meta.Seq), meta.Tick)
		if err := pb.Set(keyPosition, pos, nil); err != nil {
			return fail(err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	return errs, pb, meta, writes, nil
}

// writer turns change sets and auxiliary records into the writes of one pebble batch.
type writer struct {
	pb   *pebble.Batch
	buf  []byte
	key  []byte // the key being written: the batch copies it, so it is reused
	val  []byte // the value being written, reused likewise
	rest []herald.Change
}

// release lets the batch go and keeps the buffers for the next commit, unless one
// grew past what an ordinary commit needs.
func (w *writer) release() {
	w.pb = nil
	const keep = 64 << 10
	if cap(w.buf) > keep || cap(w.val) > keep {
		w.buf, w.val = nil, nil
	}
	if cap(w.rest) > 1024 {
		w.rest = nil
	}
}

func (w *writer) changeSet(cs *herald.ChangeSet) error {
	w.rest = w.rest[:0]
	for i := range cs.Changes {
		c := &cs.Changes[i]
		if c.Kind == herald.NodeChange && c.NodeAfter == nil && store.WrittenOnce(c.NodeBefore) {
			// Written once since it was created: a single delete lets both writes vanish
			// together in compaction (often before either reaches a table).
			w.key = append(append(w.key[:0], prefixNode), c.NodeBefore.ID...)
			if err := w.pb.SingleDelete(w.key, nil); err != nil {
				return err
			}
			continue
		}
		w.rest = append(w.rest, *c) // a change set names each entity once: order does not matter
	}
	if len(w.rest) > 0 {
		for _, m := range store.Mutations(&herald.ChangeSet{Changes: w.rest}) {
			if err := w.write(m); err != nil {
				return err
			}
		}
		clear(w.rest) // let the nodes go
	}
	for _, n := range store.NewBodies(cs) {
		data, ok := n.Body.Data()
		if !ok {
			return fmt.Errorf("pebblestore: the new body of node %s (seq %d) is not in memory", n.ID, cs.Seq)
		}
		w.key = appendBodyKey(w.key[:0], n.ID, n.Body.Seq)
		if err := w.pb.Set(w.key, data, nil); err != nil {
			return err
		}
	}
	for _, b := range store.DeadBodies(cs) {
		w.key = appendDeadKey(w.key[:0], cs.Seq, b)
		if err := w.pb.Set(w.key, nil, nil); err != nil {
			return err
		}
	}
	w.buf = store.AppendChangeSet(w.buf[:0], cs)
	w.key = binary.BigEndian.AppendUint64(append(w.key[:0], prefixLog), cs.Seq)
	return w.pb.Set(w.key, w.buf, nil)
}

// write writes one mutation, through the writer's reused key and value buffers.
func (w *writer) write(m store.Mutation) error {
	switch m.Kind {
	case herald.NodeChange:
		w.key = append(append(w.key[:0], prefixNode), m.Key...)
	case herald.EdgeChange:
		w.key = append(append(w.key[:0], prefixEdge), m.Key...)
	case herald.TypeChange:
		w.key = append(append(w.key[:0], prefixType), m.Key...)
	}
	switch {
	case m.Node != nil:
		w.val = store.AppendNode(w.val[:0], m.Node)
	case m.Edge != nil:
		w.val = store.AppendEdge(w.val[:0], m.Edge)
	case m.Type != nil:
		w.val = store.AppendTypeDecl(w.val[:0], m.Type)
	default:
		return w.pb.Delete(w.key, nil)
	}
	return w.pb.Set(w.key, w.val, nil)
}

func (w *writer) aux(ops []store.AuxOp) error {
	for _, op := range ops {
		w.key = append(append(w.key[:0], prefixAux), op.Key...)
		k := w.key
		var err error
		switch {
		case op.Value != nil:
			err = w.pb.Set(k, op.Value, nil)
		case op.Once:
			err = w.pb.SingleDelete(k, nil)
		default:
			err = w.pb.Delete(k, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func holds(r getter, expect []store.Precondition) (bool, error) {
	for _, p := range expect {
		var key []byte
		if p.Node != "" {
			key = nodeKey(string(p.Node))
		} else {
			key = edgeKey(string(p.Edge))
		}
		var attrs herald.Attrs
		found, err := get(r, key, func(b []byte) error {
			if p.Attr == "" {
				return nil
			}
			if p.Node != "" {
				n, err := store.DecodeNode(b, nil)
				if err != nil {
					return err
				}
				attrs = n.Attrs
				return nil
			}
			e, err := store.DecodeEdge(b)
			if err != nil {
				return err
			}
			attrs = e.Attrs
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("pebblestore: precondition on %q: %w", key, err)
		}
		if !p.Holds(found, attrs) {
			return false, nil
		}
	}
	return true, nil
}

// Changes returns up to limit change sets after the given position, read from one
// snapshot together with the horizon.
func (s *Store) Changes(ctx context.Context, after uint64, limit int) ([]*herald.ChangeSet, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	hor, _, err := getUvarints(snap, keyHorizon, 1)
	if err != nil {
		return nil, err
	}
	if after < hor[0] {
		return nil, store.ErrCompacted
	}
	var out []*herald.ChangeSet
	if after == ^uint64(0) {
		return out, nil
	}
	it, err := snap.NewIter(&pebble.IterOptions{
		LowerBound: logKey(after + 1),
		UpperBound: []byte{prefixLog + 1},
	})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for it.First(); it.Valid() && (limit <= 0 || len(out) < limit); it.Next() {
		cs, err := store.DecodeChangeSet(it.Value(), s)
		if err != nil {
			return nil, fmt.Errorf("pebblestore: key %q: %w", it.Key(), err)
		}
		out = append(out, cs)
	}
	return out, it.Error()
}

// Truncate deletes change sets up to upTo (capped at the last committed Seq) with one
// range deletion and records the new horizon in the same synced batch.
func (s *Store) Truncate(ctx context.Context, upTo uint64) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.metaMu.Lock()
	meta := s.meta
	s.metaMu.Unlock()

	upTo = min(upTo, meta.Seq)
	if upTo <= meta.Horizon {
		return nil
	}
	pb := s.db.NewBatch()
	defer pb.Close()
	// logKey(upTo) followed by a zero byte is the first key after it.
	if err := pb.DeleteRange(logKey(0), append(logKey(upTo), 0), nil); err != nil {
		return err
	}
	// Bodies let go by the commits truncated now can no longer be read by anyone.
	deadEnd := binary.BigEndian.AppendUint64([]byte{prefixDead}, upTo+1)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixDead}, UpperBound: deadEnd})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < 17 {
			continue
		}
		bseq := binary.BigEndian.Uint64(k[9:17])
		if err := pb.SingleDelete(bodyKey(herald.NodeID(k[17:]), bseq), nil); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	if err := pb.DeleteRange([]byte{prefixDead}, deadEnd, nil); err != nil {
		return err
	}
	if err := pb.Set(keyHorizon, binary.AppendUvarint(nil, upTo), nil); err != nil {
		return err
	}
	if err := pb.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("pebblestore: truncate: %w", err)
	}
	s.syncs.Add(1)
	s.metaMu.Lock()
	s.meta.Horizon = upTo
	s.metaMu.Unlock()
	return nil
}

// LoadBody returns the stored encoding of node id's body written by commit seq.
func (s *Store) LoadBody(id herald.NodeID, seq uint64) ([]byte, error) {
	if err := s.acquire(context.Background()); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var out []byte
	found, err := get(s.db, bodyKey(id, seq), func(b []byte) error {
		out = append([]byte(nil), b...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: body of %s at %d: %w", id, seq, err)
	}
	if !found {
		return nil, fmt.Errorf("pebblestore: body of %s at %d: %w", id, seq, store.ErrNoBody)
	}
	return out, nil
}

// LoadBodies returns the stored encodings of many bodies, nil for those it does not
// hold, reading them with one iterator in key order: bodies written one after another
// share blocks, so a run of them costs about one block read.
func (s *Store) LoadBodies(ids []herald.NodeID, seqs []uint64) ([][]byte, error) {
	if len(ids) != len(seqs) {
		return nil, fmt.Errorf("pebblestore: LoadBodies: %d ids and %d seqs", len(ids), len(seqs))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	if err := s.acquire(context.Background()); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	keys := make([][]byte, len(ids))
	order := make([]int, len(ids))
	for i := range ids {
		keys[i], order[i] = bodyKey(ids[i], seqs[i]), i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: keys[order[0]], UpperBound: append(slices.Clone(keys[order[len(order)-1]]), 0)})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: LoadBodies: %w", err)
	}
	out := make([][]byte, len(ids))
	for _, i := range order {
		if it.SeekGE(keys[i]) && bytes.Equal(it.Key(), keys[i]) {
			out[i] = slices.Clone(it.Value())
		}
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("pebblestore: LoadBodies: %w", err)
	}
	return out, nil
}

// LoadAux calls fn with every auxiliary record in key order, from one snapshot.
func (s *Store) LoadAux(ctx context.Context, fn func(key, value []byte) error) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixAux}, UpperBound: []byte{prefixAux + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(it.Key()[1:], it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// Flush writes the memtable out to a table and waits for it.
func (s *Store) Flush() error {
	if err := s.acquire(context.Background()); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	return s.db.Flush()
}

// WriteStats are the bytes the store has written since Open, from Pebble's metrics: to
// its write-ahead log, by flushes of memtables into tables, and by compactions.
type WriteStats struct {
	WAL, Flushed, Compacted uint64
}

// Total returns every byte written to the disk.
func (w WriteStats) Total() uint64 { return w.WAL + w.Flushed + w.Compacted }

// WriteStats returns the bytes written so far, for write amplification.
func (s *Store) WriteStats() WriteStats {
	m := s.db.Metrics()
	var w WriteStats
	w.WAL = m.WAL.BytesWritten
	for _, l := range m.Levels {
		w.Flushed += l.BytesFlushed
		w.Compacted += l.BytesCompacted
	}
	return w
}

// Syncs returns how many synced writes the store has made since Open. Divided into
// Stats().Batches it gives the number of transactions per fsync of group commit.
func (s *Store) Syncs() uint64 { return s.syncs.Load() }

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{Calls: s.calls.Load(), Batches: s.batches.Load(), Syncs: s.syncs.Load()}
}

// Close waits for running calls and closes the database. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.metaMu.Lock()
	durable := s.meta.Seq
	s.metaMu.Unlock()
	s.mark.stop()
	markErr := s.mark.write(durable)
	err := s.db.Close()
	if lerr := s.lock.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("pebblestore: close: %w", err)
	}
	if markErr != nil {
		return fmt.Errorf("pebblestore: close: writing the position mark: %w", markErr)
	}
	return nil
}

// pebbleLogger adapts slog to pebble's Logger. It adds no attributes of its own.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Info(fmt.Sprintf(format, args...))
}

// Fatalf logs and panics: pebble calls it only for unrecoverable states.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic("pebblestore: " + msg)
}
