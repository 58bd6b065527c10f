package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store"
)

// A follower (Config.Follower) keeps its graph current with the change log another node
// writes to a shared store: it reads the change sets it has not seen, applies them as
// the writer did, and hands them to its listeners as durable, so that MATCH and
// watch-mode streams work on it as on the writer. It commits nothing itself.

// errFollower refuses a commit on a follower.
var errFollower = herald.Errorf(herald.CodeNotLeader, "this node follows another's change log and commits nothing: writes go to the leader")

// followBatch bounds the change sets read at once.
const followBatch = 512

// Follow applies the change log after the engine's position until ctx ends or the
// store fails, waiting with wait (which returns once change sets after its argument may
// exist, or ctx's error) when it has caught up. It is for an engine opened with
// Config.Follower, and one caller at a time.
func (e *Engine) Follow(ctx context.Context, wait func(ctx context.Context, after uint64) error) error {
	if !e.cfg.Follower {
		return errors.New("engine: Follow needs an engine opened with Config.Follower")
	}
	for {
		seq, _ := e.Position()
		sets, err := e.cfg.Backend.Changes(ctx, seq, followBatch)
		if errors.Is(err, store.ErrCompacted) {
			return fmt.Errorf("engine: the change log no longer holds seq %d (truncated past this follower): reopen it from the store: %w", seq+1, err)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("engine: read the change log after seq %d: %w", seq, err)
		}
		if len(sets) > 0 {
			if err := e.applyFollowed(sets); err != nil {
				return err
			}
			continue
		}
		if err := wait(ctx, seq); err != nil {
			return err
		}
	}
}

// applyFollowed applies change sets read from the log to the graph, in seq order, and
// hands them to the listeners: applied ones first, then durable ones, as a commit's.
func (e *Engine) applyFollowed(sets []*herald.ChangeSet) error {
	e.mu.Lock()
	for _, cs := range sets {
		if cs.Seq != e.seq+1 {
			e.mu.Unlock()
			return fmt.Errorf("engine: the change log skips from seq %d to %d", e.seq, cs.Seq)
		}
		e.g.Apply(cs)
		e.cons.applied(cs.Changes)
		e.recent.add(cs)
		e.appliedListeners.notify([]*herald.ChangeSet{cs})
		e.seq, e.tick = cs.Seq, cs.Tick
	}
	e.mu.Unlock()
	e.pipe.followed(sets)
	return nil
}
