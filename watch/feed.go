package watch

import (
	"sync"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/standing"
)

// A feed holds the change sets that touch one type, once, for every stream whose only
// entry in the dispatch index is that type (a watch on a queue's type, say): the
// dispatcher appends a commit to the feed instead of to each stream's queue, and wakes
// the feed's streams once for everything appended since it last did, not once per
// commit. A thousand streams on one type then cost the dispatcher the same per commit
// as one, and the streams read what they missed from the feed at their own pace. A
// stream that falls further behind than the feed holds reads the change log instead,
// as a stream whose own queue overflowed does.
type feed struct {
	mu   sync.Mutex
	cap  uint64
	ring []*herald.ChangeSet // set number i at ring[i%cap]
	n    uint64              // sets appended so far
	// tallies count the events of the sets for the streams that skip (tally.go), by
	// share key; made when first needed.
	tallies map[uint64]*tally

	// Under Service.mu.
	members  map[*watcher]bool
	dirty    bool      // appended to since the members were last woken
	lastSeq  uint64    // the last commit appended: one commit changes a type many times
	lastWake time.Time // when its members were last woken (Config.FeedLinger)
}

// feedCap is how many change sets a feed keeps: 128 KiB of pointers a type, for as many
// sets as the service keeps in memory for lagging streams anyway (recentCap). With 4,096,
// four seconds at 1,000 commits a second, a thousand streams held to the fan-out budget
// fell past their feed in some runs, and from then on each counted what it skipped from
// the change log, alone (see skipLost), and fell further behind.
var feedCap uint64 = 16384 // a variable for tests (SetFeedCap)

// feedType returns the type whose feed serves a stream of query q: one whose only
// dispatch index entry is a single type.
func feedType(q *standing.Query) (string, bool) {
	if q.Opts.PerTick || len(q.Refs()) > 0 || q.Eq() != nil || q.AnyType() || len(q.Types()) != 1 {
		return "", false
	}
	for t := range q.Types() {
		return t, true
	}
	return "", false
}

// add appends cs unless it is the commit added last. The dispatcher calls it with
// Service.mu held; it reports whether cs was added.
func (f *feed) add(cs *herald.ChangeSet) bool {
	if cs.Seq == f.lastSeq {
		return false
	}
	f.lastSeq = cs.Seq
	f.mu.Lock()
	if f.ring == nil {
		f.ring = make([]*herald.ChangeSet, f.cap)
	}
	f.ring[f.n%f.cap] = cs
	f.n++
	f.mu.Unlock()
	return true
}

// tail is the number of the next set to be appended: a stream that reads from it on
// gets every set appended after this call.
func (f *feed) tail() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// oldest is the number of the oldest set the feed still holds.
func (f *feed) oldest() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n - min(f.n, f.cap)
}

// feedSet returns set number i, or lost when the feed no longer holds it.
func (w *watcher) feedSet(i uint64) (*herald.ChangeSet, bool) {
	var one [1]*herald.ChangeSet
	sets, _, lost := w.feed.read(i, i+1, 1, one[:0])
	if lost || len(sets) == 0 {
		return nil, true
	}
	return sets[0], false
}

// read appends to buf the sets from number pos on, before number end and at most limit
// of them, and returns them with the number after the last. lost is true when sets
// after pos are no longer held: the reader must go to the change log.
func (f *feed) read(pos, end uint64, limit int, buf []*herald.ChangeSet) (sets []*herald.ChangeSet, next uint64, lost bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n-pos > f.cap {
		return buf, pos, true
	}
	for ; pos < min(f.n, end) && len(buf) < limit; pos++ {
		buf = append(buf, f.ring[pos%f.cap])
	}
	return buf, pos, false
}

// indexFeed adds w to (or removes it from) the feed of its type, creating or dropping
// the feed; s.mu must be held. A stream joining reads from the feed's tail on: what
// the dispatcher appends after its registration. Leaving does not touch w.feed, which
// the stream's goroutine owns (ALTER WATCH, on that goroutine, clears it).
func (s *Service) indexFeed(w *watcher, typ string, add bool) {
	f := s.feeds[typ]
	if !add {
		if f != nil {
			delete(f.members, w)
			if len(f.members) == 0 {
				delete(s.feeds, typ)
			}
		}
		return
	}
	if f == nil {
		f = &feed{cap: feedCap, members: map[*watcher]bool{}}
		s.feeds[typ] = f
	}
	f.members[w] = true
	w.feed, w.fpos = f, f.tail()
}

// touchFeedLocked appends cs to the feed of typ, if there is one, and marks the feed
// for the next wake of its streams (Service.wakeFeedsLocked).
func (s *Service) touchFeedLocked(typ string, cs *herald.ChangeSet) {
	f := s.feeds[typ]
	if f == nil || !f.add(cs) || f.dirty {
		return
	}
	f.dirty = true
	s.dirtyFeeds = append(s.dirtyFeeds, f)
}

// wakeFeedsLocked adds to woken every stream of a feed appended to since the last
// call, unless the feed's members were woken less than Config.FeedLinger ago: such a
// feed stays dirty, and due is when the earliest of those may be woken (zero: none
// waits). s.mu must be held.
func (s *Service) wakeFeedsLocked(woken []*watcher) (_ []*watcher, due time.Time) {
	var now time.Time
	if s.cfg.FeedLinger > 0 {
		now = s.clock.Now()
	}
	keep := s.dirtyFeeds[:0]
	for _, f := range s.dirtyFeeds {
		if s.cfg.FeedLinger > 0 {
			if next := f.lastWake.Add(s.cfg.FeedLinger); now.Before(next) {
				keep = append(keep, f)
				if due.IsZero() || next.Before(due) {
					due = next
				}
				continue
			}
			f.lastWake = now
		}
		f.dirty = false
		for w := range f.members {
			woken = s.queueWakeLocked(w, woken)
		}
	}
	clear(s.dirtyFeeds[len(keep):])
	s.dirtyFeeds = keep
	return woken, due
}

// readFeed takes the next sets from the stream's feed, before number end, into its
// scratch buffer; lost is true when the feed no longer holds them. Only the stream's
// goroutine calls it.
func (w *watcher) readFeed(end uint64) (sets []*herald.ChangeSet, lost bool) {
	clear(w.feedBuf)
	sets, w.fpos, lost = w.feed.read(w.fpos, end, logPage, w.feedBuf[:0])
	w.feedBuf = sets
	return sets, lost
}
