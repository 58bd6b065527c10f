package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
)

// Lease is a pull consumer: it leases up to n messages that a consume-mode WATCH
// statement matches and are ready now, and returns their consumed events once the
// leases are durable (none when nothing is ready). The leases are settled like any
// other — ACK, NACK, EXTEND by delivery id — and expire after the watch's ack_timeout;
// no stream holds them, so nothing releases them early. The queue REST API's pop is
// built on it.
//
// Pulls of one statement share a group, kept while it is used (and GroupIdle after),
// so a pull costs what it takes out, not the length of the queue.
func (s *Service) Lease(ctx context.Context, sessionID, query string, params map[string]herald.Value, n int) ([]herald.Event, error) {
	if n < 1 {
		return nil, nil
	}
	op, err := s.open(ctx, sessionID, query, params)
	if err != nil {
		return nil, err
	}
	key := "g:" + op.Query.Opts.Group
	if op.Query.Opts.Group == "" {
		sum := sha256.Sum256([]byte(op.Query.Text))
		key = "p:" + hex.EncodeToString(sum[:12])
	}
	g, err := s.group(ctx, key, op, nil)
	if err != nil {
		return nil, err
	}
	var now time.Time
	var picks []pick // waiting for their bodies to be read (see pick.go)
	w := &work{}
	s.mu.Lock()
	if s.groups[key] != g {
		s.mu.Unlock()
		return s.Lease(ctx, sessionID, query, params, n) // dropped meanwhile
	}
	err = s.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		s.catchUpLocked(tx)
		now = s.clock.Now()
		if len(g.members) == 0 {
			g.idleSince = now // kept for the next pull
		}
		if len(g.recheck) > 0 {
			s.recheckLocked(tx, g)
		}
		for _, e := range g.delayed.due(now) {
			s.queueLocked(e)
		}
		scanned, holder := 0, principalName(ctx)
		for len(w.leases)+len(picks) < n {
			cand, ok := s.nextReadyLocked(tx, g, now, &scanned)
			if !ok {
				break
			}
			if p := (pick{g: g, holder: holder, cand: cand}); len(picks) > 0 || p.needsRead() {
				picks = s.holdBackLocked(picks, []pick{p})
			} else if l := s.leaseLocked(tx, g, nil, holder, cand, now); l != nil {
				w.leases = append(w.leases, l)
			}
		}
		return nil
	})
	if err == nil && len(picks) > 0 {
		err = s.leaseAfterRead(picks, now, w)
	}
	for _, l := range w.leases {
		w.states = append(w.states, stateLocked(l.subj, l))
	}
	s.mu.Unlock()
	if err != nil || len(w.leases) == 0 {
		return nil, err
	}
	var pos at
	done := make(chan error, 1)
	err = s.commitAsync(func(tx *engine.SysTx) { s.write(tx, w, now) }, func(seq, tick uint64, err error) {
		pos = at{seq, tick}
		done <- err
	})
	if err == nil {
		err = <-done
	}
	if err != nil {
		s.unleaseRound(w)
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count.delivered.Add(uint64(len(w.leases)))
	s.tallyLeasesLocked(w.leases)
	out := make([]herald.Event, 0, len(w.leases))
	for _, l := range w.leases {
		if s.leases[l.key] != l {
			continue // expired already (an ack timeout shorter than a sync)
		}
		l.sent = true
		out = append(out, herald.Event{Type: EventConsumed, Match: l.match, DeliveryID: l.id, Attempt: l.attempt, Releases: l.releases, Seq: pos.seq, Tick: pos.tick, Deadline: l.deadline})
	}
	return out, nil
}
