// Package pgstore is a store.Backend on PostgreSQL, through pgx: every Commit call is one
// transaction, and a leadership lease with a fencing term lets several Herald nodes share
// one database with exactly one of them committing while the others follow its change log.
package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store"
)

var (
	_ store.Backend          = (*Store)(nil)
	_ store.AsyncCommitter   = (*Store)(nil)
	_ herald.BodyBatchSource = (*Store)(nil)
)

// ErrFenced is returned by a commit of a store whose term is no longer the lease's: a
// deposed leader. Nothing of the commit is applied.
var ErrFenced = errors.New("pgstore: fenced: the leadership lease moved to another term")

// Options configures Open.
type Options struct {
	// Schema is the PostgreSQL schema holding the store's tables, created if absent;
	// "" means DefaultSchema. Lower-case letters, digits and underscores, at most 40.
	Schema string
	// MaxConns bounds the connection pool; 0 means 16.
	MaxConns int32
	// Term, when not zero, opens the store as the leader of that term (see SetTerm).
	Term uint64
	// Timeout bounds a call whose context has no deadline (a commit from start to
	// durability, Truncate, Meta, GetNode, the body reads and the lease calls), so that
	// an unreachable server turns into an error. 0 means one minute.
	Timeout time.Duration
	// Poll is how often WaitChanges asks the database when no notification comes;
	// 0 means one second.
	Poll time.Duration
	// Logger receives the store's few messages; nil means slog.Default().
	Logger *slog.Logger
	// Clock times the polls and the listener's reconnection backoff; nil means the real
	// clock. Time on the database's side (leases, expiries) is the database's own.
	Clock herald.Clock
}

// Store is a Backend on one PostgreSQL schema. It is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	q       queries
	schema  string
	channel string // NOTIFY channel of the change log
	timeout time.Duration
	poll    time.Duration
	clock   herald.Clock
	log     *slog.Logger

	// mu guards closed: every call holds it shared (an asynchronous commit until its
	// wait), Close exclusively.
	mu     sync.RWMutex
	closed bool

	// wmu serializes writers up to the point where their transaction holds the
	// position row. next is the position of the last commit entered (commit.go).
	wmu      sync.Mutex
	next     position
	stale    atomic.Bool  // next may be wrong: read the position under lock
	inflight atomic.Int32 // fast commits entered whose wait has not returned
	flight   []*call      // fast commits entered, until seen done
	term     atomic.Uint64

	follow follower // notifications and WaitChanges (follow.go)
}

// position is a commit position as the store mirrors it.
type position struct{ seq, tick uint64 }

// Open connects to the database at dsn (a pgx connection string), creates the store's
// schema and tables if they are absent, and opens the store.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	if !schemaName.MatchString(opts.Schema) {
		return nil, fmt.Errorf("pgstore: schema name %q: use lower-case letters, digits and underscores, at most 40", opts.Schema)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	cfg.MaxConns = orDefault(opts.MaxConns, 16)
	// A commit is durable when PostgreSQL says so only with synchronous_commit on (or
	// stronger); a server configured with it off is overridden for this store.
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT set_config('synchronous_commit', 'on', false) WHERE current_setting('synchronous_commit') = 'off'`)
		return err
	}
	s := &Store{
		q:       newQueries(opts.Schema),
		schema:  opts.Schema,
		channel: opts.Schema + "_changes",
		timeout: orDefault(opts.Timeout, time.Minute),
		poll:    orDefault(opts.Poll, time.Second),
		clock:   cmp.Or(opts.Clock, clock.Real()),
		log:     opts.Logger,
	}
	if s.log == nil {
		s.log = slog.Default().With("component", "pgstore")
	}
	s.term.Store(opts.Term)
	if err := s.open(ctx, cfg); err != nil {
		if s.pool != nil {
			s.pool.Close()
		}
		return nil, fmt.Errorf("pgstore: open schema %s: %w", opts.Schema, err)
	}
	s.follow.start(s, cfg.ConnConfig)
	return s, nil
}

func orDefault[T int32 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func (s *Store) open(ctx context.Context, cfg *pgxpool.Config) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	s.pool = pool
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return migrate(ctx, tx, s.schema) }); err != nil {
		return err
	}
	m, err := s.readMeta(ctx)
	if err != nil {
		return err
	}
	s.next = position{m.Seq, m.Tick}
	s.follow.latest.Store(m.Seq)
	return nil
}

// bound gives ctx the store's timeout unless it has a deadline.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.timeout)
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

// SetTerm makes the store the leader of term: every later commit and truncation checks,
// inside its transaction, that the lease is held at that term, and fails with ErrFenced
// otherwise. Term 0 commits unfenced, which the database allows only while nobody has
// ever taken its lease. Acquire calls SetTerm itself.
func (s *Store) SetTerm(term uint64) {
	s.term.Store(term)
	// A new leader's mirror of the position dates from before it led.
	s.stale.Store(true)
}

// Term returns the term the store commits under (0: unfenced).
func (s *Store) Term() uint64 { return s.term.Load() }

// Schema returns the name of the PostgreSQL schema the store lives in.
func (s *Store) Schema() string { return s.schema }

// Meta returns the committed position.
func (s *Store) Meta(ctx context.Context) (store.Meta, error) {
	if err := s.acquire(ctx); err != nil {
		return store.Meta{}, err
	}
	defer s.mu.RUnlock()
	ctx, cancel := s.bound(ctx)
	defer cancel()
	m, err := s.readMeta(ctx)
	if err != nil {
		return store.Meta{}, fmt.Errorf("pgstore: meta: %w", err)
	}
	return m, nil
}

func (s *Store) readMeta(ctx context.Context) (store.Meta, error) {
	var seq, tick, horizon int64
	if err := s.pool.QueryRow(ctx, s.q.meta).Scan(&seq, &tick, &horizon); err != nil {
		return store.Meta{}, err
	}
	return store.Meta{Seq: uint64(seq), Tick: uint64(tick), Horizon: uint64(horizon)}, nil
}

// Load calls fn for every type, node and edge, each kind in key order, from one
// REPEATABLE READ snapshot.
func (s *Store) Load(ctx context.Context, fn func(store.Record) error) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("pgstore: load: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	steps := []struct {
		sql    string
		decode func([]byte) (store.Record, error)
	}{
		{s.q.loadTypes, func(b []byte) (r store.Record, err error) { r.Type, err = store.DecodeTypeDecl(b); return }},
		{s.q.loadNodes, func(b []byte) (r store.Record, err error) { r.Node, err = store.DecodeNode(b, s); return }},
		{s.q.loadEdges, func(b []byte) (r store.Record, err error) { r.Edge, err = store.DecodeEdge(b); return }},
	}
	for _, step := range steps {
		if err := scanRecords(ctx, tx, step.sql, step.decode, fn); err != nil {
			return err
		}
	}
	return nil
}

// scanRecords streams the records sql selects through decode to fn.
func scanRecords(ctx context.Context, tx pgx.Tx, sql string, decode func([]byte) (store.Record, error), fn func(store.Record) error) error {
	rows, err := tx.Query(ctx, sql)
	if err != nil {
		return fmt.Errorf("pgstore: load: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		rec, err := decode(rows.RawValues()[0])
		if err != nil {
			return fmt.Errorf("pgstore: load: %w", err)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: load: %w", err)
	}
	return nil
}

// GetNode returns the stored node, or nil.
func (s *Store) GetNode(ctx context.Context, id herald.NodeID) (*herald.Node, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var rec []byte
	err := s.pool.QueryRow(ctx, s.q.getNode, []byte(id)).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: node %q: %w", id, err)
	}
	n, err := store.DecodeNode(rec, s)
	if err != nil {
		return nil, fmt.Errorf("pgstore: node %q: %w", id, err)
	}
	return n, nil
}

// Changes returns up to limit change sets after the given position, read in one
// statement together with the horizon.
func (s *Store) Changes(ctx context.Context, after uint64, limit int) ([]*herald.ChangeSet, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var lim any // NULL: no limit
	if limit > 0 {
		lim = int64(limit)
	}
	rows, err := s.pool.Query(ctx, s.q.changes, int64(min(after, math.MaxInt64)), lim)
	if err != nil {
		return nil, fmt.Errorf("pgstore: changes: %w", err)
	}
	defer rows.Close()
	var out []*herald.ChangeSet
	for rows.Next() {
		var horizon int64
		var b []byte
		if err := rows.Scan(&horizon, &b); err != nil {
			return nil, fmt.Errorf("pgstore: changes: %w", err)
		}
		if after < uint64(horizon) {
			return nil, store.ErrCompacted
		}
		if b == nil {
			break // the row of the horizon alone: no change sets
		}
		cs, err := store.DecodeChangeSet(b, s)
		if err != nil {
			return nil, fmt.Errorf("pgstore: changes: %w", err)
		}
		out = append(out, cs)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: changes: %w", err)
	}
	return out, nil
}

// LoadBody returns the stored encoding of node id's body written by commit seq.
func (s *Store) LoadBody(id herald.NodeID, seq uint64) ([]byte, error) {
	ctx, cancel := s.bound(context.Background())
	defer cancel()
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var data []byte
	err := s.pool.QueryRow(ctx, s.q.loadBody, []byte(id), int64(min(seq, math.MaxInt64))).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pgstore: body of %s at %d: %w", id, seq, store.ErrNoBody)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: body of %s at %d: %w", id, seq, err)
	}
	return data, nil
}

// LoadBodies returns the stored encodings of many bodies, nil for those it does not
// hold, with one query.
func (s *Store) LoadBodies(ids []herald.NodeID, seqs []uint64) ([][]byte, error) {
	if len(ids) != len(seqs) {
		return nil, fmt.Errorf("pgstore: LoadBodies: %d ids and %d seqs", len(ids), len(seqs))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := s.bound(context.Background())
	defer cancel()
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	keys, bseqs := make([][]byte, len(ids)), make([]int64, len(ids))
	for i := range ids {
		keys[i], bseqs[i] = []byte(ids[i]), int64(min(seqs[i], math.MaxInt64))
	}
	rows, err := s.pool.Query(ctx, s.q.loadBodies, keys, bseqs)
	if err != nil {
		return nil, fmt.Errorf("pgstore: LoadBodies: %w", err)
	}
	defer rows.Close()
	out := make([][]byte, len(ids))
	for rows.Next() {
		var i int64
		var data []byte
		if err := rows.Scan(&i, &data); err != nil {
			return nil, fmt.Errorf("pgstore: LoadBodies: %w", err)
		}
		out[i-1] = data
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: LoadBodies: %w", err)
	}
	return out, nil
}

// LoadAux calls fn with every auxiliary record in key order, from one statement's
// snapshot.
func (s *Store) LoadAux(ctx context.Context, fn func(key, value []byte) error) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	rows, err := s.pool.Query(ctx, s.q.loadAux)
	if err != nil {
		return fmt.Errorf("pgstore: aux: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return fmt.Errorf("pgstore: aux: %w", err)
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: aux: %w", err)
	}
	return nil
}

// Close waits for running calls (and the waits of asynchronous commits), stops the
// store's notifier and listener and closes its connections. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.follow.stop()
	s.pool.Close()
	return nil
}

// DropSchema removes a store's schema and everything in it from the database at dsn.
// Nothing can undo it.
func DropSchema(ctx context.Context, dsn, schema string) error {
	if !schemaName.MatchString(schema) {
		return fmt.Errorf("pgstore: schema name %q: use lower-case letters, digits and underscores, at most 40", schema)
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("pgstore: drop schema %s: %w", schema, err)
	}
	return nil
}
