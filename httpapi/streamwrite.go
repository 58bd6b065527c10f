package httpapi

import (
	"context"
	"time"

	"github.com/herald-mq/herald"
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
	if b, is := h.wat.(frameBudgeter); is && budgeted {
		if finish, ok = b.FrameBudget(ctx.Done()); !ok {
			<-h.slots
			return nil, false
		}
	}
	return func() {
		finish()
		<-h.slots
	}, true
}

// taker is a stream that hands its transport what waits for it in batches (watch-mode
// streams): its channel holds little, and Take reaches the queue behind it.
type taker interface {
	Take(dst []herald.Event, max int) (events []herald.Event, closed bool)
}

// take appends to dst, up to max events in all, what st has ready without waiting, and
// reports closed when st's channel was closed.
func take(st herald.Stream, dst []herald.Event, max int) ([]herald.Event, bool) {
	if t, ok := st.(taker); ok {
		return t.Take(dst, max)
	}
	for len(dst) < max {
		select {
		case ev, ok := <-st.Events():
			if !ok {
				return dst, true
			}
			dst = append(dst, ev)
		default:
			return dst, false
		}
	}
	return dst, false
}
