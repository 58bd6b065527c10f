package engine

import (
	"sync"
	"time"

	"github.com/herald-mq/herald"
)

// The free-space reserve: writes that users start (statements, publishes, COMMITs) are
// refused with E5005 while the disk holding the store has less free space than
// Config.MinFreeBytes, before they touch the graph, so that the store itself never
// runs out of space with commits half applied: reads go on, /readyz reports the state,
// and writes resume by themselves once space is freed. The server's own small writes
// (leases, settlements, Layer 0) still go through, into the reserve.

// DefaultMinFreeBytes is Config.MinFreeBytes's default: room for a memtable flush and
// a compaction's output beside the write-ahead log.
const DefaultMinFreeBytes = 256 << 20

// spaceCheckEvery bounds how often the free space is read: what is written between
// two reads comes out of the reserve.
const spaceCheckEvery = 100 * time.Millisecond

// SpaceReporter is implemented by backends that can tell the free space of the disk
// they write to.
type SpaceReporter interface {
	FreeBytes() (uint64, error)
}

type spaceState struct {
	mu   sync.Mutex
	at   time.Time
	full bool
	free uint64
}

// spaceOK refreshes the free-space reading when it is stale and answers E5005 while
// the disk is below the reserve.
func (e *Engine) spaceOK() error {
	rep, ok := e.cfg.Backend.(SpaceReporter)
	if !ok || e.cfg.MinFreeBytes <= 0 {
		return nil
	}
	now := e.clock.Now()
	st := &e.space
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.at.IsZero() || now.Sub(st.at) >= spaceCheckEvery || now.Before(st.at) {
		st.at = now
		free, err := rep.FreeBytes()
		if err == nil {
			full := free < uint64(e.cfg.MinFreeBytes)
			switch {
			case full && !st.full:
				e.log.Error("the store's disk is below its free-space reserve: writes are refused until space is freed; reads go on",
					"free_bytes", free, "reserve_bytes", e.cfg.MinFreeBytes)
			case !full && st.full:
				e.log.Info("the store's disk has room again: writes resume", "free_bytes", free)
			}
			st.full, st.free = full, free
		}
	}
	if st.full {
		return herald.Errorf(herald.CodeStorageFull, "the disk holding the store has %d bytes free, below the reserve of %d: writes are refused until space is freed (reads go on)", st.free, e.cfg.MinFreeBytes)
	}
	return nil
}
