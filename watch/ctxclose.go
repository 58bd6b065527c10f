package watch

import "context"

// A stream ends with the context it was opened with. A transport that carries many
// streams on one call (WatchMany) opens them all with the call's context; rather than
// a context.AfterFunc per stream (its callback context and its place among the
// parent's children cost about 200 bytes a stream), the service registers one per
// context and keeps each context's streams in a set.

// ctxStreams is the streams opened with one context.
type ctxStreams struct {
	stop func() bool // the context's AfterFunc
	ws   map[*watcher]struct{}
}

// closeWithCtx has w closed when ctx ends; the returned function undoes that (the
// stream ended first).
func (s *Service) closeWithCtx(ctx context.Context, w *watcher) func() {
	done := ctx.Done()
	if done == nil {
		return func() {} // a context that never ends
	}
	s.ctxMu.Lock()
	g := s.byCtx[done]
	if g == nil {
		g = &ctxStreams{ws: map[*watcher]struct{}{}}
		s.byCtx[done] = g
		g.stop = context.AfterFunc(ctx, func() { s.ctxEnded(done) })
	}
	g.ws[w] = struct{}{}
	s.ctxMu.Unlock()
	return func() { s.dropFromCtx(done, w) }
}

// ctxEnded closes the streams of a context that has ended.
func (s *Service) ctxEnded(done <-chan struct{}) {
	s.ctxMu.Lock()
	g := s.byCtx[done]
	delete(s.byCtx, done)
	var ws []*watcher
	if g != nil {
		ws = make([]*watcher, 0, len(g.ws))
		for w := range g.ws {
			ws = append(ws, w)
		}
	}
	s.ctxMu.Unlock()
	for _, w := range ws {
		w.Close()
	}
}

// dropFromCtx forgets a stream that ended before its context; the last one of a
// context stops its AfterFunc.
func (s *Service) dropFromCtx(done <-chan struct{}, w *watcher) {
	s.ctxMu.Lock()
	defer s.ctxMu.Unlock()
	g := s.byCtx[done]
	if g == nil {
		return // the context has ended: ctxEnded closes what it held
	}
	delete(g.ws, w)
	if len(g.ws) == 0 {
		g.stop()
		delete(s.byCtx, done)
	}
}
