package watch

import "github.com/herald-mq/herald"

// A best-effort stream that drops (on_full: drop) keeps the newest events its buffer
// holds and reports the older ones as a gap. When such a stream is further behind in
// its feed than its buffer holds, applying the whole backlog in order would queue
// every event only for most of them to push older ones out: under a fan-out budget
// that already binds, that is where the budget went, so a stream that fell behind
// stayed behind, and delivered less the further it was. skipFeed instead counts the
// oldest part of the backlog into the gap without queueing it: what the stream then
// sends is what dropping would have left (the newest events, at least a buffer's
// worth, and a gap with the exact count in front of them) without a queue's push and
// pop per event; identical streams count the skipped commits once between them
// (tally.go).

// The same holds for a stream further behind than its feed keeps: it would read the
// change log and apply every commit it missed. When the commits the feed still holds
// give a buffer's worth of events, everything before them would be dropped anyway, so
// skipLost counts the missed commits from the change log into the gap (a look-up each,
// shared as above) and goes back to the feed. Without it such a stream applied
// seconds of commits for every event it kept, fell further behind for it, and read
// the change log for good.

// skipping is false only in tests that compare skipping with dropping one by one.
var skipping = true

// mayDrop reports whether the stream may skip the oldest of a backlog (skipFeed): it
// reads a feed, drops the oldest when full, and its events are those of each commit
// alone, with nothing of its own waiting to go before them.
func (w *watcher) mayDrop() bool {
	o := &w.q.Opts
	return skipping && w.feed != nil && !o.Reliable && o.OnFull == "drop" && w.q.Single() &&
		!o.PerTick && o.WinSize == 0 && w.q.OnMatch() == nil && !w.q.Silent() &&
		w.shown == nil && len(w.initial) == 0 && len(w.held) == 0 &&
		w.warning == nil && w.reset == nil
}

// skipFeed skips the oldest of the stream's feed backlog, up to set number end, when
// the newest sets of it alone hold a buffer's worth of events: the older sets are
// counted into the gap, as are the events queued before them, and the stream reads
// on from the oldest set kept. It reports false when the stream ended.
func (w *watcher) skipFeed(end uint64) bool {
	buffer := w.q.Opts.Buffer
	if w.fpos >= end || end-w.fpos <= uint64(buffer) || !w.mayDrop() {
		return true
	}
	if !w.takeSlot() {
		return false
	}
	if split, skipped, ok := w.skipByTally(end, buffer); ok {
		if split > w.fpos {
			last, lost := w.feedSet(split - 1)
			if lost {
				return true // the feed moved on: catchUp reads the change log
			}
			w.cursor, w.tick = last.Seq, last.Tick
			w.applied.Store(w.cursor)
			w.fpos = split
			w.dropQueued(skipped)
		}
		return true
	}
	split, ok := w.keptFrom(end, buffer)
	if !ok || split == w.fpos {
		return true
	}
	skipped := 0
	for w.fpos < split {
		sets, lost := w.readFeed(split)
		if lost {
			return true // the feed moved on: catchUp reads the change log
		}
		for i, cs := range sets {
			n, ok, err := w.skipSet(i, cs)
			if !ok {
				return false
			}
			if err != nil {
				// Applied the usual way, the set ends the stream or restarts it.
				w.fpos -= uint64(len(sets) - i)
				w.dropQueued(skipped)
				return true
			}
			skipped += n
		}
	}
	w.dropQueued(skipped)
	w.yield()
	return true
}

// keptFrom returns the number of the oldest feed set that the newest buffer events of
// the backlog before end come from; fpos when the backlog holds fewer. ok is false
// when that cannot be told (the feed moved on, or a set fails to evaluate): the
// backlog is then applied the usual way.
func (w *watcher) keptFrom(end uint64, buffer int) (split uint64, ok bool) {
	split, kept := end, 0
	for split > w.fpos && kept < buffer {
		from := w.fpos
		if split-from > logPage {
			from = split - logPage
		}
		clear(w.feedBuf)
		sets, _, lost := w.feed.read(from, split, logPage, w.feedBuf[:0])
		w.feedBuf = sets
		if lost {
			return 0, false
		}
		for i := len(sets) - 1; i >= 0 && kept < buffer; i-- {
			n, err := w.countSet(sets[i])
			if err != nil {
				return 0, false
			}
			kept += n
			split = from + uint64(i)
		}
		if kept < buffer {
			split = from
		}
		w.yield()
	}
	if kept < buffer {
		return w.fpos, true
	}
	return split, true
}

// skipSet counts cs, the i-th set of a page the stream skips, and moves the stream's
// position past it, handing its apply slot on and yielding as applySets does. ok is
// false when the stream ended; err is the set's evaluation failing, which leaves the
// position where it was.
func (w *watcher) skipSet(i int, cs *herald.ChangeSet) (n int, ok bool, err error) {
	if i > 0 && i%applyShare == 0 {
		w.giveSlot()
	}
	if !w.takeSlot() {
		return 0, false, nil
	}
	if n, err = w.countSet(cs); err != nil {
		return 0, true, err
	}
	if cs.Seq > w.cursor {
		w.cursor, w.tick = cs.Seq, cs.Tick
		w.applied.Store(w.cursor)
	}
	if i%yieldEvery == yieldEvery-1 {
		w.yield()
	}
	return n, true, nil
}

// countSet is how many events cs gives the stream, evaluated through the cache that
// identical watches share.
func (w *watcher) countSet(cs *herald.ChangeSet) (int, error) {
	if cs.Seq <= w.cursor {
		return 0, nil
	}
	evs, _, _, err := w.sharedSingle(cs)
	return len(evs), err
}

// dropQueued puts the events that wait for the transport, and skipped more events the
// stream skipped after them, into the gap, which then shows the stream's position: the
// last set skipped. It moves the position there first.
func (w *watcher) dropQueued(skipped int) {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	w.takeBackLocked()
	for w.outq.len() > 0 {
		w.outq.popFront()
		w.gap++
	}
	w.queued.Store(0)
	w.gap += skipped
	if w.gap > 0 {
		w.gapSeq, w.gapTick = w.cursor, w.tick
	}
}

// skipLost is skipFeed for a stream that has fallen behind what its feed holds (end is
// the feed's tail): when the sets the feed holds give a buffer's worth of events, the
// commits before the oldest set kept are counted into the gap from the change log and
// the stream reads on from the feed; reading reports whether it did (false: the stream
// reads the change log as usual). ok is false when the stream ended.
func (w *watcher) skipLost(end uint64) (reading, ok bool) {
	if !w.mayDrop() {
		return false, true
	}
	if !w.takeSlot() {
		return false, false
	}
	// What the feed holds now: the end this turn began with may be older than all of it.
	end = max(end, w.feed.tail())
	w.fpos = w.feed.oldest()
	split, found := w.keptFrom(end, w.q.Opts.Buffer)
	if !found || split == w.fpos {
		return false, true // the feed holds less than a buffer's worth, or moved on
	}
	sets, _, lost := w.feed.read(split, split+1, 1, w.feedBuf[:0])
	w.feedBuf = sets
	if lost || len(sets) == 0 {
		return false, true
	}
	keep := sets[0].Seq
	skipped := 0
	for done := false; !done; {
		page, err := w.svc.changes(w.cursor, logPage)
		if err != nil {
			w.dropQueued(skipped)
			return false, true // read the usual way, which reports what went wrong
		}
		done = len(page) < logPage
		for i, cs := range page {
			if cs.Seq >= keep {
				done = true
				break
			}
			n, ok, err := w.skipSet(i, cs)
			if !ok {
				return false, false
			}
			if err != nil {
				w.dropQueued(skipped)
				return false, true
			}
			skipped += n
		}
	}
	w.cursor = max(w.cursor, keep-1)
	w.applied.Store(w.cursor)
	w.fpos = split
	w.dropQueued(skipped)
	w.yield()
	return true, true
}
