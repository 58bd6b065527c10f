package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The leadership lease is one row of the schema's leader table: a term, the holder's
// name and advertised address, and an expiry on the database's clock, so that the
// nodes' own clocks play no part. Acquiring the lease starts a new term; a store that
// acquired it commits under that term, and every commit checks the term inside its own
// transaction (the fence function of schema.go), so a leader deposed while it was
// paused fails with ErrFenced instead of committing.
//
// The check share-locks the lease row, and acquiring updates it: a commit in flight
// and a new acquisition therefore never overlap. Either the commit ends first, and the
// new leader reads it when it catches up, or the acquisition does, and the commit is
// fenced.

// Lease is the leadership lease as the database holds it.
type Lease struct {
	Term    uint64    // acquisitions so far; 0 if the lease was never taken
	Holder  string    // the holder's name, "" once released
	Address string    // where the holder serves clients, as it advertised
	Expires time.Time // on the database's clock
	Held    bool      // held and not expired when read, by the database's clock
}

// Acquire takes the lease for holder, advertising address, for ttl, if nobody holds it,
// its holder let it expire, or holder itself holds it. On success it starts a new term,
// which the store then commits under (SetTerm); ok is false when another holder has it.
// Holder names must be unique among the nodes sharing the database.
func (s *Store) Acquire(ctx context.Context, holder, address string, ttl time.Duration) (term uint64, ok bool, err error) {
	if holder == "" || ttl <= 0 {
		return 0, false, fmt.Errorf("pgstore: acquire: a holder name and a positive ttl are needed")
	}
	err = s.leaseCall(ctx, func(ctx context.Context) error {
		var t int64
		err := s.pool.QueryRow(ctx, s.q.acquire, holder, address, ttl.Microseconds()).Scan(&t)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		term, ok = uint64(t), err == nil
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("pgstore: acquire: %w", err)
	}
	if ok {
		s.SetTerm(term)
	}
	return term, ok, nil
}

// Renew extends the lease of term to ttl from now. ok is false when the lease is at
// another term or was released: the caller is no longer the leader. A lease that
// expired without anybody taking it over is renewed.
func (s *Store) Renew(ctx context.Context, term uint64, ttl time.Duration) (ok bool, err error) {
	if ttl <= 0 {
		return false, fmt.Errorf("pgstore: renew: the ttl must be positive")
	}
	err = s.leaseCall(ctx, func(ctx context.Context) error {
		var t int64
		err := s.pool.QueryRow(ctx, s.q.renew, int64(term), ttl.Microseconds()).Scan(&t)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		ok = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: renew: %w", err)
	}
	return ok, nil
}

// Release gives up the lease of term, if it is still at that term, so that another node
// can take it at once. Commits under that term fail with ErrFenced from then on.
func (s *Store) Release(ctx context.Context, term uint64) error {
	err := s.leaseCall(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.q.release, int64(term))
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: release: %w", err)
	}
	return nil
}

// Leader reads the lease: who holds it, at which term, and where it serves clients.
func (s *Store) Leader(ctx context.Context) (Lease, error) {
	var l Lease
	err := s.leaseCall(ctx, func(ctx context.Context) error {
		var term int64
		err := s.pool.QueryRow(ctx, s.q.leader).Scan(&term, &l.Holder, &l.Address, &l.Expires, &l.Held)
		l.Term = uint64(term)
		return err
	})
	if err != nil {
		return Lease{}, fmt.Errorf("pgstore: leader: %w", err)
	}
	return l, nil
}

// leaseCall runs fn with the store open and the store's timeout.
func (s *Store) leaseCall(ctx context.Context, fn func(context.Context) error) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return fn(ctx)
}

// Node is one node sharing the store, as it last reported itself with Heartbeat.
type Node struct {
	Name    string
	Address string
	Role    string        // "leader" or "follower"
	Seq     uint64        // the position it had applied
	Behind  time.Duration // how far its graph was behind the newest commit it knew of
	SeenAt  time.Time     // on the database's clock
	Age     time.Duration // since SeenAt, by the database's clock when read
}

// Heartbeat records n (its SeenAt and Age are ignored) as the node's latest report.
func (s *Store) Heartbeat(ctx context.Context, n Node) error {
	err := s.leaseCall(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.q.heartbeat, n.Name, n.Address, n.Role, int64(n.Seq), n.Behind.Seconds())
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: heartbeat: %w", err)
	}
	return nil
}

// Nodes lists the nodes that have reported with Heartbeat, by name, with the age of
// their last report.
func (s *Store) Nodes(ctx context.Context) ([]Node, error) {
	var out []Node
	err := s.leaseCall(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.q.nodes)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n Node
			var seq int64
			var behind, age float64
			if err := rows.Scan(&n.Name, &n.Address, &n.Role, &seq, &behind, &n.SeenAt, &age); err != nil {
				return err
			}
			n.Seq = uint64(seq)
			n.Behind = time.Duration(behind * float64(time.Second))
			n.Age = time.Duration(age * float64(time.Second))
			out = append(out, n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: nodes: %w", err)
	}
	return out, nil
}
