package watch

import (
	"context"
	"errors"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/store"
)

// logPage is how many change sets one read of the change log returns.
const logPage = 256

// beginSince positions the watcher for `initial: since(n)`: after the last commit whose
// tick is at most n, found in the change log.
func (w *watcher) beginSince(ctx context.Context) error {
	var after uint64
	for {
		sets, err := w.svc.eng.Changes(ctx, after, logPage)
		if herald.CodeOf(err) == herald.CodeCompacted || errors.Is(err, store.ErrCompacted) {
			// Older ticks are gone: say so, then start from a fresh snapshot.
			w.reset = herald.Errorf(herald.CodeCompacted, "the requested position is older than the change log keeps; a new snapshot follows")
			return w.snapshot(true)
		}
		if err != nil {
			return err
		}
		if len(sets) == 0 {
			break
		}
		stop := false
		for _, cs := range sets {
			if cs.Tick > w.q.Opts.Since {
				stop = true
				break
			}
			after = cs.Seq
		}
		if stop {
			break
		}
	}
	w.cursor = after
	w.applied.Store(w.cursor)
	w.setBehind()
	if !w.q.Single() {
		w.past = newPast(after, w.q.Reads)
	}
	return nil
}

// loop runs a stream from its open: the reset and the snapshot first, then its
// service loop (run).
func (w *watcher) loop() {
	if w.warning != nil {
		if !w.send(&herald.Event{Type: herald.EventWarning, Seq: w.cursor, Tick: w.tick, Code: w.warning.Code, Message: w.warning.Message}) {
			w.finish()
			return
		}
	}
	if w.reset != nil {
		if !w.send(&herald.Event{Type: herald.EventReset, Seq: w.cursor, Tick: w.tick, Code: w.reset.Code, Message: w.reset.Message}) {
			w.finish()
			return
		}
	}
	if !w.sendInitial() {
		w.finish()
		return
	}
	w.run()
}

// run serves the stream until it ends, then finishes it; or until it parks (see
// park.go), when a kick runs it again on a new goroutine.
func (w *watcher) run() {
	w.active.Store(true)
	if w.serve() {
		return // parked
	}
	w.finish()
}

// finish ends a stream whose loop has returned: a cancelled stream's last event, then
// its registrations, its channel and its goroutine's place in the service.
func (w *watcher) finish() {
	if w.heartTimer != nil {
		w.heartTimer.Stop()
	}
	if w.win != nil {
		w.win.timer.Stop()
	}
	w.mu.Lock()
	cancelled := w.cancelled
	w.mu.Unlock()
	if cancelled {
		err := herald.Errorf(herald.CodeWatchNotFound, "the watch was cancelled")
		w.deliverLast(herald.Event{Type: herald.EventError, Error: err, Code: err.Code, Message: err.Message, Seq: w.cursor, Tick: w.tick})
	}
	w.exit()
	w.dropNode()
	close(w.events)
	w.notify() // after the close: the transport reads that the stream ended
	close(w.done)
	w.unctx()
	w.svc.wg.Done()
}

// serve is the stream's loop: it applies what reaches the stream and hands the events
// on, and answers its timers and requests. It returns true when the stream parked, false
// when it ended.
func (w *watcher) serve() bool {
	// The timers were started by startTimers when the stream opened; finish stops them.
	timer, wtimer := w.heartTimer, herald.Timer(nil)
	if w.win != nil {
		wtimer = w.win.timer
	}
	var tc, wc <-chan time.Time
	if timer != nil {
		tc = timer.C()
	}
	if wtimer != nil {
		wc = wtimer.C()
	}
	for {
		if !w.isPaused() && !w.catchUp() {
			return false
		}
		w.idle()
		if w.ackBatch(); w.batchAck.Load() {
			w.flush() // the transport may have emptied the channel before the switch
		}
		out, head := w.out()
		if out == nil && tc == nil && wc == nil && w.park() {
			return true
		}
		select {
		case <-w.stop:
			return false
		case out <- head:
			w.popHead()
			w.notify()
		case <-w.room:
		case <-w.wake:
		case req := <-w.reqs:
			w.received()
			if req.alter != nil {
				if !w.applyAlter(*req.alter) {
					return false
				}
				break
			}
			// A test stepping the clock expects what the clock made due to be done too.
			ok := w.isPaused() || (w.catchUp() && w.windowsDue(wtimer) && w.heartbeatDue(timer))
			close(req.sync)
			if !ok {
				return false
			}
		case <-wc:
			if !w.windowsDue(wtimer) {
				return false
			}
		case <-tc:
			if !w.heartbeatDue(timer) {
				return false
			}
		}
		w.active.Store(true)
	}
}

// startTimers starts the heartbeat and window timers when the stream opens (before
// Open returns), so the first window is measured from the open, whenever the stream's
// goroutine gets to run. The loop owns them; finish stops them.
func (w *watcher) startTimers() {
	w.last = w.svc.clock.Now()
	if w.q.Opts.Heartbeat > 0 {
		w.heartTimer = w.svc.clock.NewTimer(w.q.Opts.Heartbeat)
	}
	if w.q.Opts.WinSize > 0 {
		w.win = &windows{end: w.svc.clock.Now().Add(w.q.Opts.WinSlide), timer: w.svc.clock.NewTimer(w.q.Opts.WinSlide)}
	}
}

func (w *watcher) isPaused() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.paused
}

// windowsDue closes every window that has ended by now and re-arms the window timer.
func (w *watcher) windowsDue(t herald.Timer) bool {
	if t == nil {
		return true
	}
	for {
		// The clock is read afresh each time: it may have moved while a window was
		// sent (a reader that got it may step the clock at once, and commit before it
		// does), and a timer armed from an earlier reading would fire a window late.
		for !w.win.end.After(w.svc.clock.Now()) {
			// Apply every commit durable by now first, so the window holds all it
			// should: a commit made before it ended may not have reached the stream yet.
			w.awaitDispatched()
			if !w.catchUp() {
				return false
			}
			if !w.closeWindow(w.win.end) {
				return false
			}
			w.win.end = w.win.end.Add(w.q.Opts.WinSlide)
		}
		t.Stop()
		t.Reset(w.win.end.Sub(w.svc.clock.Now()))
		if w.win.end.After(w.svc.clock.Now()) {
			return true
		}
	}
}

// heartbeatDue sends a heartbeat when nothing was sent for the heartbeat period.
func (w *watcher) heartbeatDue(t herald.Timer) bool {
	if t == nil {
		return true
	}
	if quiet := w.svc.clock.Now().Sub(w.last); quiet < w.q.Opts.Heartbeat {
		t.Stop()
		t.Reset(w.q.Opts.Heartbeat - quiet)
		return true
	}
	// Every change set up to the durable position has been queued for this watch if it
	// touches it: apply the queue, then the position may move on.
	seq, tick := w.svc.dispatched()
	if !w.catchUp() {
		return false
	}
	if w.cursor < seq {
		w.cursor, w.tick = seq, tick
		w.applied.Store(w.cursor)
	}
	if !w.send(&herald.Event{Type: herald.EventHeartbeat, Seq: w.cursor, Tick: w.tick, Last: true}) {
		return false
	}
	t.Stop()
	t.Reset(w.q.Opts.Heartbeat)
	return true
}

// catchUp applies what reached the stream before the call: from the change log while
// behind, then from its feed or its queue. What is dispatched meanwhile is left for the
// next call, as the dispatcher wakes the stream again for it: a stream slower than the
// commits takes its turn and makes way for the others in the round, instead of reading
// on for as long as commits come. It reports false when the stream ended.
func (w *watcher) catchUp() bool {
	// The session's transaction events come first: a commit is announced before its
	// change set can arrive, and must be known when it does.
	if w.shown != nil && !w.applyTx() {
		return false
	}
	target, _ := w.svc.dispatched()
	var feedEnd uint64
	if w.feed != nil {
		feedEnd = w.feed.tail()
	}
	tookQueue := false
	for {
		w.mu.Lock()
		behind := w.behind
		var queue []*herald.ChangeSet
		if !behind && !tookQueue {
			queue, w.queue, tookQueue = w.queue, nil, true
		}
		w.mu.Unlock()
		if behind {
			more, ok := w.readLog(target)
			if !ok {
				return false
			}
			if !more {
				return true
			}
			continue
		}
		if w.feed != nil && w.fpos < feedEnd {
			if !w.skipFeed(feedEnd) {
				return false
			}
			var lost bool
			if queue, lost = w.readFeed(feedEnd); lost {
				reading, ok := w.skipLost(feedEnd)
				if !ok {
					return false
				}
				if !reading {
					w.setBehind()
				}
				continue
			}
		}
		if len(queue) == 0 {
			return true
		}
		if !w.applySets(queue) {
			return false
		}
	}
}

// readLog applies a page of the change log after the cursor, for a stream that is
// behind. more is false once the stream has applied every commit up to target and
// still has pages to read (the rest is for a later call); when it reaches the log's
// end it switches to its feed or queue, reads the log once more for what became
// durable meanwhile, and reports more, for catchUp to go on with them. ok is false
// when the stream ended.
func (w *watcher) readLog(target uint64) (more, ok bool) {
	if !w.takeSlot() {
		return false, false
	}
	sets, err := w.svc.changes(w.cursor, logPage)
	if err != nil {
		if herald.CodeOf(err) == herald.CodeCompacted {
			return true, w.restart("the requested position is older than the change log keeps; a new snapshot follows")
		}
		return false, w.fail(err)
	}
	if !w.applySets(sets) {
		return false, false
	}
	if len(sets) == logPage {
		return w.cursor < target, true
	}
	// Caught up with the log: switch to the feed or queue, then read the log once more
	// for what became durable while they were off.
	w.mu.Lock()
	w.behind, w.queue = false, nil
	if w.feed != nil {
		w.fpos = w.feed.tail()
	}
	w.mu.Unlock()
	if sets, err = w.svc.changes(w.cursor, logPage); err != nil {
		return false, w.fail(err)
	}
	if !w.applySets(sets) {
		return false, false
	}
	if len(sets) == logPage {
		w.setBehind()
	}
	return true, true
}

// applyShare is how many change sets a stream applies in a row before the next stream
// waiting for an apply slot gets it.
const applyShare = 32

// applySets applies sets in order, holding an apply slot (see Service.applySlots) and
// handing it on every applyShare sets. It reports false when the stream ended.
func (w *watcher) applySets(sets []*herald.ChangeSet) bool {
	for i, cs := range sets {
		if i > 0 && i%applyShare == 0 {
			w.giveSlot()
		}
		if !w.takeSlot() || !w.apply(cs) {
			return false
		}
		if i%yieldEvery == yieldEvery-1 || i == len(sets)-1 {
			if !w.sendGathered() {
				return false
			}
			w.yield()
		}
	}
	return true
}

// yieldEvery is how many change sets a stream applies between yields: a yield costs
// two clock readings and a trip through the scheduler, which, per set, took more of a
// thousand-stream fan-out's time than applying the sets did.
const yieldEvery = 8

// yield lets the goroutines waiting for a CPU run first: a writer's commit path woken
// meanwhile would otherwise wait until the scheduler preempts this stream. The time it
// waits to run again is not counted against the fan-out budget (see giveSlot): the
// budget bounds the CPU the streams use, and counted, the waits took most of it.
func (w *watcher) yield() {
	b := w.svc.budget
	if b == nil || !w.applying {
		w.svc.gosched()
		return
	}
	b.spend(w.svc.clock.Now().Sub(w.slotAt))
	w.svc.gosched()
	w.slotAt = w.svc.clock.Now()
}

// setBehind makes the stream read the change log: the dispatcher may already be
// pushing to it.
func (w *watcher) setBehind() {
	w.mu.Lock()
	w.behind = true
	w.mu.Unlock()
}

// behindLog reports whether the stream is to read the change log (a resume) before its
// queue.
func (w *watcher) behindLog() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.behind
}

// restart tells the client that the stream cannot go on from its position (reset, with
// why), then sends a new snapshot and goes on from there.
func (w *watcher) restart(why string) bool {
	if !w.send(&herald.Event{Type: herald.EventReset, Seq: w.cursor, Tick: w.tick, Code: herald.CodeCompacted, Message: why}) {
		return false
	}
	if err := w.snapshot(true); err != nil {
		return w.fail(err)
	}
	if !w.sendInitial() {
		return false
	}
	// Read on from the snapshot's position in the change log: what became durable
	// while the snapshot went out is there (and not necessarily in the queue).
	w.mu.Lock()
	w.behind, w.queue = true, nil
	w.mu.Unlock()
	return true
}

// apply turns one change set into events.
func (w *watcher) apply(cs *herald.ChangeSet) bool {
	if cs.Seq <= w.cursor {
		return true
	}
	if w.q.Opts.PerTick && len(w.held) > 0 && cs.Tick > w.held[0].Tick {
		// The tick of the held events has ended: they go out together.
		held := w.held
		w.held = nil
		for i := range held {
			held[i].Last = i == len(held)-1 || held[i+1].Seq != held[i].Seq
		}
		for i := range held {
			if !w.send(&held[i]) {
				return false
			}
		}
	}
	var evs []herald.Event
	var nodes []*herald.Node
	var binds []eval.Row
	var err error
	if w.q.Single() {
		evs, nodes, binds, err = w.sharedSingle(cs)
	} else {
		evs, binds, err = w.applyJoin(cs)
	}
	if herald.CodeOf(err) == herald.CodeCompacted {
		return w.restart(herald.AsError(err).Message + "; a new snapshot follows")
	}
	if err != nil {
		return w.fail(err)
	}
	w.cursor, w.tick = cs.Seq, cs.Tick
	w.applied.Store(w.cursor)
	if w.shown != nil && w.commitSeq != 0 && cs.Seq >= w.commitSeq {
		w.shown, w.commitSeq = map[herald.NodeID]*row{}, 0
	}
	if w.q.OnMatch() != nil {
		for i, ev := range evs {
			if ev.Type == herald.EventAdded && !w.trigger(ev, binds[i]) {
				return false
			}
		}
	}
	if w.q.Silent() {
		return true
	}
	if w.q.Opts.WinSize > 0 {
		for i, ev := range evs {
			if w.q.Single() {
				w.recordNode(ev, nodes[i], cs.Time)
			} else {
				w.record(ev, binds[i], cs.Time)
			}
		}
		return true
	}
	if w.q.Opts.PerTick {
		w.held = append(w.held, evs...)
		return true
	}
	// evs may be shared with identical watches (sharedSingle): it is read, never written,
	// and the queue points into it. applySingle and applyJoin mark the last event of a
	// commit (markLast); an event that says otherwise goes as a copy of its own. Under
	// on_full: drop the events are gathered, and applySets queues them together.
	gather := w.gathers()
	for i := range evs {
		ev := &evs[i]
		if last := i == len(evs)-1; ev.Last != last {
			c := *ev
			c.Last = last
			ev = &c
		}
		if gather {
			w.gathered = append(w.gathered, ev)
		} else if !w.send(ev) {
			return false
		}
	}
	return true
}

// markLast marks the last of a commit's events as the last of its position, and the
// others as not: what apply sends of a commit, so that the events can be sent as they
// are (see apply).
func markLast(evs []herald.Event) {
	for i := range evs {
		evs[i].Last = i == len(evs)-1
	}
}

// sharedSingle is applySingle through the cache of identical watches. A watch whose
// events depend on its own state (uncommitted changes shown) evaluates alone.
func (w *watcher) sharedSingle(cs *herald.ChangeSet) ([]herald.Event, []*herald.Node, []eval.Row, error) {
	if w.shareID == 0 || (w.shown != nil && len(w.shown) > 0) {
		return w.applySingle(cs)
	}
	key := cacheKey{share: w.shareID, seq: cs.Seq}
	// The events are shared with the identical watches, not copied for each: callers
	// read them (apply sends copies).
	if v, ok := w.svc.cache.get(key); ok {
		r := v.(*singleResult)
		return r.evs, r.nodes, r.binds, nil
	}
	evs, nodes, binds, err := w.applySingle(cs)
	if err == nil {
		for i := range evs {
			evs[i].Enc = new(herald.Encodings) // the copies serialise once
		}
		w.svc.cache.put(key, &singleResult{evs: evs, nodes: nodes, binds: binds})
	}
	return evs, nodes, binds, err
}

// sendInitial sends the snapshot (running the trigger once per match first); its last
// event carries the snapshot's position.
func (w *watcher) sendInitial() bool {
	if w.q.OnMatch() != nil {
		for _, r := range w.initial {
			if !w.trigger(herald.Event{Type: herald.EventInitial, Match: r.Value, Seq: w.cursor, Tick: w.tick}, r.Bind) {
				return false
			}
		}
	}
	if w.q.Silent() {
		w.initial = nil
		return true
	}
	evs := make([]herald.Event, len(w.initial)) // one allocation; the queue points into it
	for i, r := range w.initial {
		evs[i] = herald.Event{Type: herald.EventInitial, Match: r.Value, Seq: w.cursor, Tick: w.tick, Last: i == len(w.initial)-1}
		if !w.send(&evs[i]) {
			return false
		}
	}
	w.initial = nil
	return true
}

// applySingle decides a single-node pattern on the before and after images.
// It also returns, per event, the node's newest image (for windows) and the match's
// variables (for triggers).
func (w *watcher) applySingle(cs *herald.ChangeSet) ([]herald.Event, []*herald.Node, []eval.Row, error) {
	var evs []herald.Event
	var nodes []*herald.Node
	var binds []eval.Row
	err := w.svc.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		for _, ch := range cs.Changes {
			if ch.Kind != herald.NodeChange {
				continue
			}
			before, err := w.q.One(tx, ch.NodeBefore, cs.Time)
			if err != nil {
				return err
			}
			if w.shown != nil && w.commitSeq != 0 && cs.Seq == w.commitSeq {
				// The session's own commit: report it relative to what was shown.
				id := ch.NodeBefore
				if id == nil {
					id = ch.NodeAfter
				}
				if r, ok := w.shown[id.ID]; ok {
					before = r
				}
			}
			after, err := w.q.One(tx, ch.NodeAfter, cs.Time)
			if err != nil {
				return err
			}
			ev := herald.Event{Seq: cs.Seq, Tick: cs.Tick}
			switch {
			case before == nil && after == nil:
				continue
			case before == nil:
				ev.Type, ev.Match = herald.EventAdded, after.Value
			case after == nil:
				ev.Type, ev.Match = herald.EventRemoved, before.Value
			case herald.Compare(before.Value, after.Value) != 0:
				ev.Type, ev.Match, ev.Prev = herald.EventChanged, after.Value, before.Value
			default:
				continue
			}
			evs = append(evs, ev)
			nodes = append(nodes, ch.NodeAfter)
			if after != nil {
				binds = append(binds, after.Bind)
			} else {
				binds = append(binds, nil)
			}
		}
		return nil
	})
	markLast(evs)
	return evs, nodes, binds, err
}

// sent records a delivered event in the stream's counters. While the stream holds an
// apply slot the slot's time stands for now: one clock reading per slot, not per event.
func (w *watcher) sent(ev *herald.Event) { w.sentN(1, ev.Seq) }

// sentN records n delivered events, the last of them at position seq.
func (w *watcher) sentN(n int, seq uint64) {
	if w.applying {
		w.last = w.slotAt
	} else {
		w.last = w.svc.clock.Now()
	}
	w.stats.Delivered(n, w.last)
	w.statMu.Lock()
	w.delivered += n
	w.lastAt = w.last
	if seq > w.sentSeq {
		w.sentSeq = seq
	}
	w.statMu.Unlock()
}

// fail ends the stream with an error event, after what is waiting.
func (w *watcher) fail(err error) bool {
	he := herald.AsError(err)
	return w.end(herald.Event{Type: herald.EventError, Error: he, Code: he.Code, Message: he.Message, Seq: w.cursor, Tick: w.tick})
}

// trigger runs the watch's ON MATCH DO actions for one match, in a transaction of their
// own. A failure is reported on the stream as a trigger_failed event with the error's
// code (the stream goes on); it reports false only when the stream has ended.
func (w *watcher) trigger(ev herald.Event, bind eval.Row) bool {
	if bind == nil {
		return true
	}
	w.giveSlot() // the actions' commit waits for the disk
	_, err := w.svc.eng.RunActions(herald.WithPrincipal(context.Background(), w.principal), w.q.OnMatch(), w.q.Plan().Scope, bind, w.q.File, w.q.Actor)
	if err == nil {
		return true
	}
	he := herald.AsError(err)
	return w.send(&herald.Event{Type: herald.EventTriggerFailed, Match: ev.Match, Seq: ev.Seq, Tick: ev.Tick, Code: he.Code, Message: he.Message})
}
