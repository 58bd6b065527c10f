package httpapi

import (
	"context"
	"time"
)

// The pace of a watch stream's writes: how a busy stream gathers its events into few
// writes, and how many streams encode at once.

// lingered waits until the linger has passed since the stream's last write (at last);
// false when ctx ended meanwhile.
func (h *Handler) lingered(ctx context.Context, last time.Time) bool {
	if h.linger <= 0 || last.IsZero() {
		return true
	}
	wait := h.linger - h.clock.Now().Sub(last)
	if wait <= 0 {
		return true
	}
	t := h.clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// frameBudgeter is a watch service that puts the encoding of its streams' events under
// its fan-out CPU budget (watch.Service.FrameBudget).
type frameBudgeter interface {
	FrameBudget(done <-chan struct{}) (finish func(), ok bool)
}

// frameSlot is what encoding one batch of a stream's events takes: one of the send
// slots, then room in the watch service's fan-out budget for a watch-mode stream
// (budgeted). release gives the slot back and counts the time since the budget let it
// work against the budget; ok is false when ctx ended first. The slot comes first: the
// wait for one is not work, and counted, it spent the budget of the very streams that
// waited.
func (h *Handler) frameSlot(ctx context.Context, budgeted bool) (release func(), ok bool) {
	select {
	case h.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, false
	}
	finish := func() {}
	if budgeted {
		if finish, ok = h.b.FrameBudget(ctx.Done()); !ok {
			<-h.slots
			return nil, false
		}
	}
	return func() {
		finish()
		<-h.slots
	}, true
}
