package rpcapi

import (
	"context"

	"connectrpc.com/connect"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/api/convert"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
)

// notifyStream is a watch-mode stream that tells its transport when it has events, as
// the watch service's streams do.
type notifyStream struct {
	events chan herald.Event
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	notify func()
}

func newNotifyStream() *notifyStream {
	return &notifyStream{events: make(chan herald.Event, 16), done: make(chan struct{})}
}

func (s *notifyStream) ID() string                  { return "n" }
func (s *notifyStream) Events() <-chan herald.Event { return s.events }
func (s *notifyStream) Done() <-chan struct{}       { return s.done }
func (s *notifyStream) SetNotify(fn func())         { s.mu.Lock(); s.notify = fn; s.mu.Unlock() }
func (s *notifyStream) poke() {
	s.mu.Lock()
	fn := s.notify
	s.mu.Unlock()
	if fn != nil {
		fn()
	}
}
func (s *notifyStream) push(ev herald.Event) { s.events <- ev; s.poke() }
func (s *notifyStream) Close() {
	s.once.Do(func() { close(s.events); close(s.done); s.poke() })
}

const qA, qB, qBad = "WATCH a: A RETURN a", "WATCH b: B RETURN b", "WATCH x: Bad RETURN x"

// manyWatcher opens a notifyStream per statement; qBad is refused.
type manyWatcher struct {
	gate    chan struct{} // when set, opening qA waits for it
	mu      sync.Mutex
	streams map[string]*notifyStream
	opened  chan string
}

func (f *manyWatcher) Open(ctx context.Context, sessionID, query string, params map[string]herald.Value, after uint64) (herald.Stream, error) {
	if query == qBad {
		return nil, herald.Errorf(herald.CodeInvalidQuery, "no such statement")
	}
	if query == qA && f.gate != nil {
		<-f.gate
	}
	st := newNotifyStream()
	f.mu.Lock()
	f.streams[query] = st
	f.mu.Unlock()
	f.opened <- query
	return st, nil
}

func (f *manyWatcher) stream(q string) *notifyStream {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.streams[q]
}

// TestWatchMany carries three watches on one call: a refused open is answered without
// ending the call, each watch's events arrive under its id, closing one ends it alone,
// and closing the request side ends the call and every watch still on it.
func TestWatchMany(t *testing.T) {
	wat := &manyWatcher{streams: map[string]*notifyStream{}, opened: make(chan string, 4)}
	call, open, await := manyCall(t, wat)
	open(1, qA)
	open(2, qB)
	open(3, qBad)
	await(map[uint64][]string{1: {"opened"}, 2: {"opened"}, 3: {"error:E1004", "ended"}})
	<-wat.opened
	<-wat.opened
	a, b := wat.stream(qA), wat.stream(qB)
	a.push(herald.Event{Type: herald.EventAdded, Seq: 5, Tick: 5})
	b.push(herald.Event{Type: herald.EventRemoved, Seq: 5, Tick: 5})
	a.push(herald.Event{Type: herald.EventChanged, Seq: 6, Tick: 6})
	await(map[uint64][]string{1: {"opened", "added:", "changed:"}, 2: {"opened", "removed:"}})

	if err := call.Send(&heraldv1.WatchManyRequest{Id: 1, Op: &heraldv1.WatchManyRequest_Close{Close: true}}); err != nil {
		t.Fatal(err)
	}
	await(map[uint64][]string{1: {"opened", "added:", "changed:", "ended"}})
	<-a.done
	b.push(herald.Event{Type: herald.EventAdded, Seq: 7, Tick: 7})
	await(map[uint64][]string{2: {"opened", "removed:", "added:"}})

	if err := call.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	<-b.done // the call's end closes the watches still on it
	for {
		if _, err := call.Receive(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the call ended with %v, want a clean end", err)
			}
			break
		}
	}
	if err := call.CloseResponse(); err != nil {
		t.Fatal(err)
	}
}

type manyCallT = *connect.BidiStreamForClient[heraldv1.WatchManyRequest, heraldv1.WatchManyResponse]

// manyCall serves wat over HTTP/2 and opens a WatchMany call, with helpers that open a
// watch and collect batches until want holds, by id: "opened", "type:code" per event,
// "ended".
func manyCall(t *testing.T, wat *manyWatcher, tune ...func(*Options)) (manyCallT, func(uint64, string), func(map[uint64][]string) map[uint64][]string) {
	opts := Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range tune {
		f(&opts)
	}
	svc := New(fakeNode(&fakeEngine{}, nil, wat), opts)
	srv := h2Server(t, svc)
	c := heraldv1connect.NewHeraldClient(srv.Client(), srv.URL)
	// A bound on the whole call: a frame that never comes fails the test, not the suite.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	call := c.WatchMany(ctx)
	open := func(id uint64, q string) {
		t.Helper()
		if err := call.Send(&heraldv1.WatchManyRequest{Id: id, Op: &heraldv1.WatchManyRequest_Open{Open: &heraldv1.WatchRequest{Query: q}}}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint64][]string{}
	await := func(want map[uint64][]string) map[uint64][]string {
		t.Helper()
		for !contains(seen, want) {
			resp, err := call.Receive()
			if err != nil {
				t.Fatalf("waiting for %v, have %v: %v", want, seen, err)
			}
			for _, b := range resp.GetBatches() {
				if b.GetOpened() && b.GetCredit() {
					seen[b.GetId()] = append(seen[b.GetId()], "opened+credit")
				} else if b.GetOpened() {
					seen[b.GetId()] = append(seen[b.GetId()], "opened")
				}
				for _, ev := range b.GetEvents() {
					seen[b.GetId()] = append(seen[b.GetId()], ev.GetType()+":"+ev.GetCode())
				}
				if b.GetEnded() {
					seen[b.GetId()] = append(seen[b.GetId()], "ended")
				}
			}
		}
		return seen
	}
	return call, open, await
}

// TestWatchManyOpensSideBySide: an open that takes long (its commit, its snapshot)
// does not hold up the opens after it on the same call.
func TestWatchManyOpensSideBySide(t *testing.T) {
	wat := &manyWatcher{streams: map[string]*notifyStream{}, opened: make(chan string, 4), gate: make(chan struct{})}
	call, open, await := manyCall(t, wat)
	open(1, qA) // waits at the gate
	open(2, qB)
	await(map[uint64][]string{2: {"opened"}})
	close(wat.gate)
	await(map[uint64][]string{1: {"opened"}, 2: {"opened"}})
	_ = call.CloseRequest()
	_ = call.CloseResponse()
}

// contains reports whether have holds every want[id] exactly.
func contains(have, want map[uint64][]string) bool {
	for id, w := range want {
		h := have[id]
		if len(h) != len(w) {
			return false
		}
		for i := range w {
			if h[i] != w[i] {
				return false
			}
		}
	}
	return true
}

// drainStream is a stream that hands out batches (taker): Take reaches the queue behind
// its channel without calling back, as a watch stream does.
type drainStream struct {
	*notifyStream
	mu    sync.Mutex
	queue []herald.Event
}

func (s *drainStream) Take(dst []herald.Event, max int) ([]herald.Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(dst) < max {
		select {
		case ev := <-s.events:
			dst = append(dst, ev)
			continue
		default:
		}
		if len(s.queue) == 0 {
			break
		}
		dst = append(dst, s.queue[0])
		s.queue = s.queue[1:]
	}
	return dst, false
}

type drainWatcher struct{ st *drainStream }

func (f *drainWatcher) Open(context.Context, string, string, map[string]herald.Value, uint64) (herald.Stream, error) {
	return f.st, nil
}

// TestWatchManyFullFrames: a watch with more waiting than a frame carries gets the rest
// in the next frames, without waiting for anything new to happen.
func TestWatchManyFullFrames(t *testing.T) {
	const n = 4 * maxEventsPerFrame
	st := &drainStream{notifyStream: newNotifyStream()}
	for i := range n {
		st.queue = append(st.queue, herald.Event{Type: herald.EventAdded, Seq: uint64(i + 1), Tick: uint64(i + 1)})
	}
	svc := New(fakeNode(&fakeEngine{}, nil, &drainWatcher{st}), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := h2Server(t, svc)
	call := heraldv1connect.NewHeraldClient(srv.Client(), srv.URL).WatchMany(context.Background())
	if err := call.Send(&heraldv1.WatchManyRequest{Id: 1, Op: &heraldv1.WatchManyRequest_Open{Open: &heraldv1.WatchRequest{Query: qA}}}); err != nil {
		t.Fatal(err)
	}
	st.poke()
	got := 0
	for got < n {
		resp, err := call.Receive()
		if err != nil {
			t.Fatalf("after %d of %d events: %v", got, n, err)
		}
		for _, b := range resp.GetBatches() {
			for _, ev := range b.GetEvents() {
				if got++; ev.GetSeq() != uint64(got) {
					t.Fatalf("event %d has seq %d", got, ev.GetSeq())
				}
			}
		}
	}
	_ = call.CloseRequest()
	_ = call.CloseResponse()
}

// Watches opened with binary_match get match and prev as bytes, the others as Value
// trees, on the same WatchMany call and on a Watch call alike; both read back as the
// event's values.
func TestWatchMatchForms(t *testing.T) {
	match, prev := task("t1", "new"), task("t1", "old")
	check := func(t *testing.T, binary bool, ev *heraldv1.WatchEvent) {
		t.Helper()
		if (len(ev.GetMatchBinary()) > 0) != binary || (ev.GetMatch() != nil) == binary || (len(ev.GetPrevBinary()) > 0) != binary {
			t.Fatalf("binary_match %v: event %v", binary, ev)
		}
		m, err := convert.EventValue(ev.GetMatchBinary(), ev.GetMatch())
		p, perr := convert.EventValue(ev.GetPrevBinary(), ev.GetPrev())
		if err != nil || perr != nil || !m.Equal(match) || !p.Equal(prev) {
			t.Fatalf("binary_match %v: match %v prev %v (%v, %v)", binary, m, p, err, perr)
		}
	}
	changed := herald.Event{Type: herald.EventChanged, Match: match, Prev: prev, Seq: 5, Tick: 5}

	t.Run("WatchMany", func(t *testing.T) {
		wat := &manyWatcher{streams: map[string]*notifyStream{}, opened: make(chan string, 4)}
		call, _, _ := manyCall(t, wat)
		for id, q := range map[uint64]string{1: qA, 2: qB} {
			if err := call.Send(&heraldv1.WatchManyRequest{Id: id, Op: &heraldv1.WatchManyRequest_Open{Open: &heraldv1.WatchRequest{Query: q, BinaryMatch: id == 2}}}); err != nil {
				t.Fatal(err)
			}
		}
		<-wat.opened
		<-wat.opened
		wat.stream(qA).push(changed)
		wat.stream(qB).push(changed)
		got := map[uint64]*heraldv1.WatchEvent{}
		for len(got) < 2 {
			resp, err := call.Receive()
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range resp.GetBatches() {
				for _, ev := range b.GetEvents() {
					got[b.GetId()] = ev
				}
			}
		}
		check(t, false, got[1])
		check(t, true, got[2])
		_ = call.CloseRequest()
	})
	t.Run("Watch", func(t *testing.T) {
		for _, binary := range []bool{false, true} {
			st := newFakeStream()
			c, _ := serveBoth(t, nil, &fakeWatcher{stream: st})
			ctx, cancel := context.WithCancel(context.Background())
			stream, err := c.Watch(ctx, connect.NewRequest(&heraldv1.WatchRequest{Query: "WATCH t: Task RETURN t", BinaryMatch: binary}))
			if err != nil {
				t.Fatal(err)
			}
			if !stream.Receive() { // the empty frame that says the watch is registered
				t.Fatal(stream.Err())
			}
			st.events <- changed
			if !stream.Receive() || len(stream.Msg().GetEvents()) != 1 {
				t.Fatalf("no event: %v", stream.Err())
			}
			check(t, binary, stream.Msg().GetEvents()[0])
			cancel()
			_ = stream.Close()
		}
	})
}

// TestWatchManyCredit: a watch opened with credit is answered as held to it, and gets
// that many events until the client grants more, while a watch opened without goes on; closing it sends what it
// still holds and its end. A request that opens, closes and grants nothing ends the
// call as malformed.
func TestWatchManyCredit(t *testing.T) {
	wat := &manyWatcher{streams: map[string]*notifyStream{}, opened: make(chan string, 4)}
	call, open, await := manyCall(t, wat)
	if err := call.Send(&heraldv1.WatchManyRequest{Id: 1, Op: &heraldv1.WatchManyRequest_Open{Open: &heraldv1.WatchRequest{Query: qA}}, Credit: 2}); err != nil {
		t.Fatal(err)
	}
	open(2, qB)
	await(map[uint64][]string{1: {"opened+credit"}, 2: {"opened"}})
	<-wat.opened
	<-wat.opened
	a, b := wat.stream(qA), wat.stream(qB)
	for i := range 4 {
		a.push(herald.Event{Type: herald.EventAdded, Seq: uint64(i + 1), Tick: uint64(i + 1)})
	}
	b.push(herald.Event{Type: herald.EventAdded, Seq: 1, Tick: 1})
	b.push(herald.Event{Type: herald.EventRemoved, Seq: 2, Tick: 2})
	// b's events were pushed after all of a's: by the frame that carries them, a's
	// have gone out, as far as its credit lets them.
	seen := await(map[uint64][]string{2: {"opened", "added:", "removed:"}})
	if !contains(seen, map[uint64][]string{1: {"opened+credit", "added:", "added:"}}) {
		t.Fatalf("watch 1, with a credit of 2, got %v", seen[1])
	}
	if err := call.Send(&heraldv1.WatchManyRequest{Id: 1, Credit: 1}); err != nil {
		t.Fatal(err)
	}
	await(map[uint64][]string{1: {"opened+credit", "added:", "added:", "added:"}})
	if err := call.Send(&heraldv1.WatchManyRequest{Id: 1, Op: &heraldv1.WatchManyRequest_Close{Close: true}}); err != nil {
		t.Fatal(err)
	}
	await(map[uint64][]string{1: {"opened+credit", "added:", "added:", "added:", "added:", "ended"}})

	if err := call.Send(&heraldv1.WatchManyRequest{Id: 2}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := call.Receive(); err != nil {
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("an empty request ended the call with %v, want invalid argument", err)
			}
			break
		}
	}
}
