package watch

import (
	"context"
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/token"
	"github.com/herald-mq/herald/standing"
)

// Watch management: a stream is a standing.Watch, which the engine's standing.Core
// names by handle or _Watch id and on which it runs PAUSE, RESUME, CANCEL and ALTER
// WATCH; this file is the stream's side of them, and of its _Watch node.

var _ standing.Watch = (*watcher)(nil)

// nodeID is the _Watch node of a stream.
func (w *watcher) nodeID() herald.NodeID { return herald.NodeID("ww" + strings.ToLower(idSafe(w.id))) }

func idSafe(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('x')
		}
	}
	return b.String()
}

// Node is the stream's _Watch node (standing.Watch).
func (w *watcher) Node() herald.NodeID { return w.nodeID() }

// Query is the statement the stream runs now (standing.Watch).
func (w *watcher) Query() *standing.Query {
	w.alterMu.Lock()
	defer w.alterMu.Unlock()
	return w.q
}

// Owner is the principal the stream acts for (standing.Watch).
func (w *watcher) Owner() *herald.Principal { return w.principal }

// Record is what the stream's _Watch node shows (standing.Watch): its statement,
// options, status and counters. The first record written links the stream's session
// to the node.
func (w *watcher) Record(status string) standing.Record {
	w.statMu.Lock()
	delivered, last, pos := w.delivered, w.lastAt, w.sentSeq
	w.statMu.Unlock()
	id := w.nodeID()
	return standing.Record{
		ID: id, Query: w.Query(), Status: status, Handle: w.handle,
		Delivered: int64(delivered), Pending: int64(len(w.events)) + w.queued.Load(), Last: last, Position: pos,
		Link: func(tx *engine.SysTx) { w.link.Do(func() { w.slot.LinkIn(tx, id) }) },
	}
}

// saveNode writes the stream's _Watch node with status.
func (w *watcher) saveNode(ctx context.Context, status string) {
	if err := w.svc.core.Save(ctx, w.Record(status)); err != nil {
		w.svc.log.Warn("watch: writing the _Watch node failed", "err", err)
	}
}

// dropNode removes the stream's _Watch node when it ends; a cancelled watch keeps it,
// with status "cancelled", until the server restarts.
func (w *watcher) dropNode() {
	w.mu.Lock()
	keep := w.cancelled || w.overflow // ended by the server, not by its client: say so
	w.mu.Unlock()
	if keep {
		w.saveNode(context.Background(), "cancelled")
		return
	}
	if err := w.svc.core.Drop(context.Background(), w.nodeID()); err != nil {
		w.svc.log.Warn("watch: removing the _Watch node failed", "err", err)
	}
}

// Control pauses, resumes or cancels the stream (standing.Watch). A paused stream
// keeps its position; on RESUME it catches up from the change log, so nothing is lost
// meanwhile. A cancelled stream records its status itself as it ends.
func (w *watcher) Control(_ context.Context, op token.Token) (string, error) {
	switch op {
	case token.PAUSE:
		w.setPaused(true)
		return "paused", nil
	case token.RESUME:
		w.setPaused(false)
		return "active", nil
	case token.CANCEL:
		w.cancel()
	}
	return "", nil
}

// setPaused stops or restarts the stream's delivery.
func (w *watcher) setPaused(p bool) {
	w.mu.Lock()
	w.paused = p
	if !p {
		w.behind, w.queue = true, nil
	}
	w.mu.Unlock()
	w.signal(w.wake)
}

// cancel ends the stream for good.
func (w *watcher) cancel() {
	w.mu.Lock()
	w.cancelled = true
	w.mu.Unlock()
	w.Close()
}

// position returns the seq of the last event the stream sent.
func (w *watcher) position() uint64 {
	w.statMu.Lock()
	defer w.statMu.Unlock()
	return w.sentSeq
}

// Alter runs the stream with q from now on (standing.Watch): the change takes effect
// at once, and the difference it makes is sent as added and removed events. A window
// cannot be added, removed or resized.
func (w *watcher) Alter(ctx context.Context, q *standing.Query) (string, error) {
	if cur := w.Query(); q.Opts.WinSize != cur.Opts.WinSize || q.Opts.WinSlide != cur.Opts.WinSlide {
		return "", herald.Errorf(herald.CodeInvalidQuery, "ALTER WATCH cannot add, remove or resize a window")
	}
	req := alterReq{q: q, done: make(chan error, 1)}
	w.call()
	select {
	case w.reqs <- request{alter: &req}:
	case <-w.done:
		w.uncall()
		return "", herald.Errorf(herald.CodeWatchNotFound, "the watch has ended")
	case <-ctx.Done():
		w.uncall()
		return "", ctx.Err()
	}
	select {
	case err := <-req.done:
		if err != nil {
			return "", err
		}
		return "active", nil
	case <-w.done:
		return "", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// request is a call served on the stream's goroutine: an ALTER WATCH (alter), or a
// Flush (sync, closed once the stream has caught up).
type request struct {
	alter *alterReq
	sync  chan struct{}
}

type alterReq struct {
	q    *standing.Query
	done chan error
}

// applyAlter swaps in a new query on the stream's goroutine and reports the matches
// the change adds or removes.
func (w *watcher) applyAlter(req alterReq) bool {
	// Everything up to the durable position reaches the queue: apply it, then the
	// difference is stated at that position.
	seq, tick := w.awaitDispatched()
	if !w.catchUp() {
		req.done <- herald.Errorf(herald.CodeWatchNotFound, "the watch has ended")
		return false
	}
	if w.cursor < seq {
		w.cursor, w.tick = seq, tick
		w.applied.Store(w.cursor)
	}
	// Both statements are run on the graph as of the cursor, so the difference is exact
	// at that position.
	var before, after map[string]row
	old := w.q
	p := newPast(w.cursor, func(ch herald.Change) bool { return old.Reads(ch) || req.q.Reads(ch) })
	err := w.withPast(p, func(g *graph.Graph) error {
		var err error
		if before, err = old.Matches(p.view(g), time.Time{}, w.interrupt()); err != nil {
			return err
		}
		after, err = req.q.Matches(p.view(g), time.Time{}, w.interrupt())
		return err
	})
	if err != nil {
		req.done <- err
		return true
	}
	w.swapQuery(req.q)
	// What came between the old index and the new is in neither the queue nor the feed
	// for certain: read on from the change log.
	w.setBehind()
	if w.q.Single() {
		w.past = nil
	} else {
		w.past = p
	}
	req.done <- nil
	return w.sendDiff(before, after)
}

// swapQuery makes q the stream's query: the dispatch index follows it (its types, its
// nodes read by id, deliver_on), and so do its share of identical watches' results.
// The compiled query it opened with is given back: the altered one is its own.
func (w *watcher) swapQuery(q *standing.Query) {
	s := w.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	s.indexLocked(w, false)
	open := s.watchers[w.id] == w // not yet removed: it holds what it gives back
	if open {
		s.core.Release(w.hold)
		w.hold = ""
	}
	w.alterMu.Lock()
	w.q = q
	w.alterMu.Unlock()
	if _, ok := feedType(q); !ok {
		w.feed = nil // its own queue from now on (the stream's goroutine runs this)
	}
	s.indexLocked(w, true)
	if open {
		s.releaseShare(w.share)
		w.share = q.ShareKey(w.principal)
		w.shareID, w.share = s.internShare(w.share)
	}
}

// sendDiff sends the matches before has and after lacks as removed, then those after
// has and before lacks as added, at the cursor.
func (w *watcher) sendDiff(before, after map[string]row) bool {
	var evs []herald.Event
	for _, r := range w.q.Sorted(before) {
		if _, ok := after[r.Key]; !ok {
			evs = append(evs, herald.Event{Type: herald.EventRemoved, Match: r.Value, Seq: w.cursor, Tick: w.tick})
		}
	}
	for _, r := range w.q.Sorted(after) {
		if _, ok := before[r.Key]; !ok {
			evs = append(evs, herald.Event{Type: herald.EventAdded, Match: r.Value, Seq: w.cursor, Tick: w.tick})
		}
	}
	if len(evs) > 0 {
		evs[len(evs)-1].Last = true
	}
	for i := range evs {
		if !w.send(&evs[i]) {
			return false
		}
	}
	return true
}
