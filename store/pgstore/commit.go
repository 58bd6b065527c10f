package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-mq/herald/store"
)

// A commit takes one of two paths.
//
// The fast path, for a call without preconditions while the store knows the position
// (next), sends the whole call as one pipeline of statements between two Syncs, which
// PostgreSQL runs as one implicit transaction, committed at the Sync: fence checks the
// term, multi-row statements (unnest of arrays) write the net effect of the call on
// each table, and advance moves the position from next to the call's, failing if
// another writer moved it. Any error rolls the whole transaction back. CommitAsync
// returns once every statement has run — the transaction then holds the position row,
// so the next call's advance waits for this one to commit, which keeps commits in call
// order — and wait reads the answer to the Sync: the commit.
//
// The locked path, for calls with preconditions or after the position may have moved
// (an error, a new term), is an explicit transaction: it locks the position row, reads
// the position and the rows the preconditions name, checks the batches in Go against
// those rows plus the writes of the batches before them, and writes and commits.

// errMoved reports that the stored position is not the one this store expected: another
// writer committed, or an earlier commit of this store failed.
var errMoved = errors.New("pgstore: the stored position moved")

// Commit applies batches in order as one PostgreSQL transaction; see store.Backend.
func (s *Store) Commit(ctx context.Context, batches []*store.Batch) ([]error, error) {
	errs, wait, err := s.CommitAsync(ctx, batches)
	if err != nil {
		return nil, err
	}
	return errs, wait()
}

// CommitAsync implements store.AsyncCommitter: it returns once the call's transaction
// holds the position (so later calls commit after it), and wait returns once
// PostgreSQL has committed it. wait must be called exactly once (Close waits for it).
func (s *Store) CommitAsync(ctx context.Context, batches []*store.Batch) ([]error, func() error, error) {
	if err := validate(batches); err != nil {
		return nil, nil, err
	}
	if err := s.acquire(ctx); err != nil {
		return nil, nil, err
	}
	ctx, cancel := s.bound(ctx)
	s.wmu.Lock()
	errs, c, err := s.enter(ctx, batches)
	s.wmu.Unlock()
	if err != nil || c == nil {
		cancel()
		s.mu.RUnlock()
		if err != nil {
			return nil, nil, err
		}
		return errs, func() error { return nil }, nil
	}
	return errs, func() error {
		defer s.mu.RUnlock()
		defer cancel()
		return s.finish(c)
	}, nil
}

// validate adds to store.Validate what PostgreSQL's bigint needs.
func validate(batches []*store.Batch) error {
	if err := store.Validate(batches); err != nil {
		return err
	}
	for i, b := range batches {
		if b.Changes != nil && b.Changes.Seq > math.MaxInt64 {
			return fmt.Errorf("pgstore: batch %d: seq %d is beyond PostgreSQL's bigint", i, b.Changes.Seq)
		}
	}
	return nil
}

// call is a commit entered. For a fast commit, pl and conn are set while it awaits its
// Sync, and plan tells later calls what it writes.
type call struct {
	pl       *pgconn.Pipeline
	conn     *pgxpool.Conn
	seq      uint64
	advanced bool
	plan     *plan
	done     atomic.Bool
}

// enter checks and writes a call, under wmu. c is nil when nothing is written.
func (s *Store) enter(ctx context.Context, batches []*store.Batch) (errs []error, c *call, err error) {
	// idle: every commit entered before has finished, so next is what they left, and a
	// moved position can only be another writer's doing.
	idle := s.inflight.Load() == 0
	if s.stale.Load() || hasExpect(batches) {
		return s.commitLocked(ctx, batches, idle)
	}
	errs, c, err = s.commitFast(ctx, batches)
	if errors.Is(err, errMoved) && idle {
		// Nothing was written: check the batches again against the stored position.
		return s.commitLocked(ctx, batches, true)
	}
	return errs, c, err
}

func hasExpect(batches []*store.Batch) bool {
	for _, b := range batches {
		if len(b.Expect) > 0 {
			return true
		}
	}
	return false
}

func (s *Store) commitFast(ctx context.Context, batches []*store.Batch) ([]error, *call, error) {
	p := newPlan(s.next, len(batches), nil)
	for i, b := range batches {
		p.add(i, b)
	}
	if p.err != nil || p.writes == 0 {
		return p.errs, nil, p.err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		s.stale.Store(true)
		return nil, nil, fmt.Errorf("pgstore: commit: %w", err)
	}
	stmts := []stmt{{s.q.fence, [][]byte{int8Param(int64(s.term.Load()))}}}
	s.flight = slices.DeleteFunc(s.flight, func(c *call) bool { return c.done.Load() })
	if p.deletesPutBy(s.flight) {
		// A DELETE does not see, and so does not wait for, a row that a commit in
		// flight inserts: wait for the commits in flight first, by locking the position.
		stmts = append(stmts, stmt{s.q.lockMeta, nil})
	}
	stmts = p.stmts(stmts, &s.q)
	stmts = append(stmts, stmt{s.q.advance, [][]byte{int8Param(int64(s.next.seq)), int8Param(int64(p.pos.seq)), int8Param(int64(p.pos.tick))}})
	pl, err := sendPipeline(ctx, conn.Conn(), stmts, true)
	if err != nil {
		conn.Release()
		s.stale.Store(true)
		return nil, nil, commitErr(err)
	}
	s.next = p.pos
	s.inflight.Add(1)
	c := &call{pl: pl, conn: conn, seq: p.pos.seq, advanced: p.advanced, plan: p}
	s.flight = append(s.flight, c)
	return p.errs, c, nil
}

// finish waits for a call's commit and announces it.
func (s *Store) finish(c *call) error {
	if c.pl != nil {
		err := syncDone(c.pl)
		c.conn.Release()
		if err != nil {
			s.stale.Store(true) // before inflight drops: see enter
		}
		c.done.Store(true)
		s.inflight.Add(-1)
		if err != nil {
			return commitErr(err)
		}
	}
	if c.advanced {
		s.follow.committed(c.seq)
	}
	return nil
}

// commitLocked commits a call in an explicit transaction that first locks the position
// row (waiting for the commits in flight) and reads the rows its preconditions name.
// Unless idle, the position it finds must be the one the commits in flight left.
func (s *Store) commitLocked(ctx context.Context, batches []*store.Batch, idle bool) ([]error, *call, error) {
	s.stale.Store(true) // until this transaction has read the position
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: commit: %w", err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: commit: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	pos, reads, err := s.lockAndRead(ctx, tx, batches)
	if err != nil {
		return nil, nil, commitErr(err)
	}
	if !idle && pos != s.next {
		return nil, nil, fmt.Errorf("%w: at seq %d, but a commit in flight was to leave it at %d", errMoved, pos.seq, s.next.seq)
	}
	p := newPlan(pos, len(batches), reads)
	for i, b := range batches {
		p.add(i, b)
	}
	if p.err != nil {
		return nil, nil, p.err
	}
	if p.writes == 0 {
		s.next = pos
		s.stale.Store(false)
		return p.errs, nil, nil
	}
	stmts := p.stmts(nil, &s.q)
	stmts = append(stmts, stmt{s.q.setMeta, [][]byte{int8Param(int64(p.pos.seq)), int8Param(int64(p.pos.tick))}})
	pl, err := sendPipeline(ctx, conn.Conn(), stmts, false)
	if err == nil {
		err = syncDone(pl)
	}
	if err != nil {
		return nil, nil, commitErr(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, commitErr(err)
	}
	s.next = p.pos
	s.stale.Store(false)
	return p.errs, &call{seq: p.pos.seq, advanced: p.advanced}, nil
}

// lockAndRead checks the term, locks and reads the position, and reads the nodes and
// edges that the batches' preconditions name.
func (s *Store) lockAndRead(ctx context.Context, tx pgx.Tx, batches []*store.Batch) (position, *readSet, error) {
	var nodeKeys, edgeKeys [][]byte
	for _, b := range batches {
		for _, p := range b.Expect {
			if p.Node != "" {
				nodeKeys = append(nodeKeys, []byte(p.Node))
			} else {
				edgeKeys = append(edgeKeys, []byte(p.Edge))
			}
		}
	}
	rb := &pgx.Batch{}
	rb.Queue(s.q.fence, int64(s.term.Load()))
	rb.Queue(s.q.lockMeta)
	rb.Queue(s.q.readNodes, nodeKeys)
	rb.Queue(s.q.readEdges, edgeKeys)
	br := tx.SendBatch(ctx, rb)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return position{}, nil, err
	}
	var seq, tick, horizon int64
	if err := br.QueryRow().Scan(&seq, &tick, &horizon); err != nil {
		return position{}, nil, err
	}
	reads := &readSet{nodes: map[string][]byte{}, edges: map[string][]byte{}}
	for _, m := range []map[string][]byte{reads.nodes, reads.edges} {
		rows, err := br.Query()
		if err != nil {
			return position{}, nil, err
		}
		for rows.Next() {
			var k, v []byte
			if err := rows.Scan(&k, &v); err != nil {
				rows.Close()
				return position{}, nil, err
			}
			m[string(k)] = v
		}
		if err := rows.Err(); err != nil {
			return position{}, nil, err
		}
	}
	return position{uint64(seq), uint64(tick)}, reads, br.Close()
}

// fenceErr turns the errors that the fence and advance functions raise into ErrFenced
// and errMoved; it returns other errors as they are.
func fenceErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == codeFenced:
			return fmt.Errorf("%w (%s)", ErrFenced, pe.Message)
		case pe.Code == codeMoved:
			return fmt.Errorf("%w (%s)", errMoved, pe.Message)
		case pe.Code == codeUniqueViolation && (pe.TableName == "changes" || pe.TableName == "bodies"):
			// A seq above the position this store expected is taken (see putChanges).
			return fmt.Errorf("%w (%s)", errMoved, pe.Message)
		}
	}
	return err
}

func commitErr(err error) error {
	if e := fenceErr(err); e != err {
		return e
	}
	return fmt.Errorf("pgstore: commit: %w", err)
}

// Truncate deletes the change sets up to upTo (capped at the last committed seq) and
// the bodies only they could reach, and raises the horizon, in one transaction.
func (s *Store) Truncate(ctx context.Context, upTo uint64) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	ctx, cancel := s.bound(ctx)
	defer cancel()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rb := &pgx.Batch{}
		rb.Queue(s.q.fence, int64(s.term.Load()))
		rb.Queue(s.q.lockMeta)
		br := tx.SendBatch(ctx, rb)
		var seq, tick, horizon int64
		_, err := br.Exec()
		if err == nil {
			err = br.QueryRow().Scan(&seq, &tick, &horizon)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		up := min(int64(min(upTo, math.MaxInt64)), seq)
		if up <= horizon {
			return nil
		}
		wb := &pgx.Batch{}
		wb.Queue(s.q.truncBodies, up)
		wb.Queue(s.q.truncDead, up)
		wb.Queue(s.q.truncChanges, up)
		wb.Queue(s.q.setHorizon, up)
		return tx.SendBatch(ctx, wb).Close()
	})
	if err != nil {
		if e := fenceErr(err); e != err {
			return e
		}
		return fmt.Errorf("pgstore: truncate: %w", err)
	}
	return nil
}
