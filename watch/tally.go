package watch

import (
	"sort"
	"sync"
)

// A tally counts, once for all the streams of a feed that share an evaluation (one
// share key), the events each of the feed's sets gives them, as running totals. A
// stream skipping the oldest of its backlog (skipFeed) then finds where the newest
// buffer's worth of events begins, and how many events it skips, from two totals
// instead of looking each set up again: a thousand identical streams that fall behind
// together count each set once between them, where each counted every set itself and
// counting took more of the fan-out budget than the events they sent.
type tally struct {
	mu   sync.Mutex
	base uint64  // the first set number counted
	next uint64  // sets [base, next) are counted
	sum  []int64 // sum[i%len(sum)]: the events of sets [base, i), kept for the last len(sum) i
}

// at returns the events of sets [base, i), if the tally still holds that total.
func (t *tally) at(i uint64) (int64, bool) {
	if i < t.base || i > t.next || t.next-i >= uint64(len(t.sum)) {
		return 0, false
	}
	return t.sum[i%uint64(len(t.sum))], true
}

// tallyFor returns the feed's tally for share key id, made on first use.
func (f *feed) tallyFor(id uint64) *tally {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tallies[id]
	if t == nil {
		if f.tallies == nil {
			f.tallies = map[uint64]*tally{}
		}
		t = &tally{sum: make([]int64, f.cap+1)}
		t.base = f.n - min(f.n, f.cap)
		t.next = t.base
		f.tallies[id] = t
	}
	return t
}

// dropTally forgets the tally of share key id, whose last stream has gone.
func (f *feed) dropTally(id uint64) {
	f.mu.Lock()
	delete(f.tallies, id)
	f.mu.Unlock()
}

// tallyTo counts the feed's sets up to number end into t, evaluating each through the
// cache the share's streams use; false when it cannot (a set fails to evaluate: the
// stream then counts the usual way, which reports it). A tally the feed has moved past
// starts again from the oldest set the feed holds. The stream holds an apply slot.
func (w *watcher) tallyTo(t *tally, end uint64) bool {
	for {
		t.mu.Lock()
		if oldest := w.feed.oldest(); t.next < oldest {
			t.base, t.next = oldest, oldest
			t.sum[oldest%uint64(len(t.sum))] = 0
		}
		if t.next >= end {
			t.mu.Unlock()
			return true
		}
		clear(w.feedBuf)
		sets, _, lost := w.feed.read(t.next, end, logPage, w.feedBuf[:0])
		w.feedBuf = sets
		if lost {
			t.mu.Unlock()
			continue // the feed moved on meanwhile: start again from what it holds
		}
		n := uint64(len(t.sum))
		for _, cs := range sets {
			evs, _, _, err := w.sharedSingle(cs)
			if err != nil {
				t.mu.Unlock()
				return false
			}
			t.sum[(t.next+1)%n] = t.sum[t.next%n] + int64(len(evs))
			t.next++
		}
		t.mu.Unlock()
		w.yield()
	}
}

// skipByTally is skipFeed's search through the share's tally: split is the number of
// the oldest set the stream keeps (its fpos when it skips nothing) and skipped the
// events of the sets before it. ok is false when the tally cannot tell (the stream
// shares no evaluation, its position is not one the tally holds, or the sets it
// skips include some it has applied already): the stream counts set by set instead.
func (w *watcher) skipByTally(end uint64, buffer int) (split uint64, skipped int, ok bool) {
	if w.shareID == 0 {
		return 0, 0, false
	}
	first, lost := w.feedSet(w.fpos)
	if lost || first.Seq <= w.cursor {
		return 0, 0, false
	}
	t := w.feed.tallyFor(w.shareID)
	if !w.tallyTo(t, end) {
		return 0, 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	top, ok1 := t.at(end)
	low, ok2 := t.at(w.fpos)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	if top-low < int64(buffer) {
		return w.fpos, 0, true
	}
	// The sets from split on hold at least a buffer's worth; from split+1 on they do
	// not. The totals grow with the set number, so a binary search finds it.
	span := int(end - w.fpos)
	k := sort.Search(span+1, func(k int) bool {
		s, _ := t.at(w.fpos + uint64(k))
		return top-s < int64(buffer)
	})
	split = w.fpos + uint64(k-1)
	at, _ := t.at(split)
	return split, int(at - low), true
}
