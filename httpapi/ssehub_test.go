package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
)

// listWatcher opens its streams in turn, one each Open.
type listWatcher struct {
	mu      sync.Mutex
	streams []*fakeStream
}

func (f *listWatcher) Open(ctx context.Context, sessionID, query string, params map[string]herald.Value, after uint64) (herald.Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.streams[0]
	f.streams = f.streams[1:]
	return st, nil
}

func newFakeStreamCap(n int) *fakeStream {
	st := newFakeStream()
	st.events = make(chan herald.Event, n)
	return st
}

// TestSSEHubSlowClientHoldsUpOnlyItself: the hub writes watch-mode streams without
// waiting, so a client that stops reading leaves the hub free for the others; what its
// socket would not take is written by its own goroutine, in order and whole, once the
// client reads again.
func TestSSEHubSlowClientHoldsUpOnlyItself(t *testing.T) {
	const big, small = 400, 20
	slow, fast := newFakeStreamCap(big), newFakeStreamCap(small)
	h := newTestHandler(t, &fakeEngine{}, Options{WatchLinger: -1, PingInterval: time.Hour}, &listWatcher{streams: []*fakeStream{slow, fast}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, slowR := openWatch(t, ctx, watchURL(srv.URL, `WATCH t: T RETURN t`, "", ""))
	_, fastR := openWatch(t, ctx, watchURL(srv.URL, `WATCH t: T RETURN t`, "", ""))

	// 400 events of 32 KiB: more than the sockets buffer, so the hub cannot write it all.
	payload := strings.Repeat("x", 32<<10)
	for i := 1; i <= big; i++ {
		slow.send(herald.Event{Type: herald.EventAdded, Match: herald.String(payload), Seq: uint64(i), Tick: uint64(i), Last: true})
	}
	for i := 1; i <= small; i++ {
		fast.send(herald.Event{Type: herald.EventAdded, Match: herald.Int(int64(i)), Seq: uint64(i), Tick: uint64(i), Last: true})
	}
	got := make(chan error, 1)
	go func() {
		for i := 1; i <= small; i++ {
			if _, _, err := readSeq(fastR); err != nil {
				got <- err
				return
			}
		}
		got <- nil
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stream whose client reads waited for one whose client does not")
	}
	for i := 1; i <= big; i++ {
		seq, match, err := readSeq(slowR)
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i) || match != payload {
			t.Fatalf("event %d: seq %d, a match of %d bytes", i, seq, len(match))
		}
	}
}

// readSeq reads one event of a stream and returns its seq and string match.
func readSeq(r interface{ ReadString(byte) (string, error) }) (uint64, string, error) {
	var data string
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return 0, "", err
		}
		l = strings.TrimSuffix(l, "\n")
		if l == "" && data != "" {
			break
		}
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			data = d
		}
	}
	var ev struct {
		Seq   uint64 `json:"seq"`
		Match any    `json:"match"`
	}
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return 0, "", err
	}
	s, _ := ev.Match.(string)
	return ev.Seq, s, nil
}

// openHubbedWatch serves one fake watch-mode stream over SSE, with no linger, and opens
// it: the hub writes its events to the returned reader.
func openHubbedWatch(t *testing.T) (*fakeStream, *bufio.Reader) {
	t.Helper()
	st := newFakeStream()
	h := newTestHandler(t, &fakeEngine{}, Options{WatchLinger: -1, PingInterval: time.Hour}, &fakeWatcher{stream: st})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	_, r := openWatch(t, context.Background(), watchURL(srv.URL, `WATCH t: T RETURN t`, "", ""))
	return st, r
}

// TestSSEHubEndsOnAnErrorEvent: a watch-mode stream served by the hub ends after an
// error event, and the events after it never go out.
func TestSSEHubEndsOnAnErrorEvent(t *testing.T) {
	st, r := openHubbedWatch(t)
	st.send(herald.Event{Type: herald.EventAdded, Match: herald.Int(1), Seq: 1, Tick: 1})
	st.send(herald.Event{Type: herald.EventError, Seq: 2, Tick: 2, Error: herald.Errorf(herald.CodeShuttingDown, "stopping")})
	st.send(herald.Event{Type: herald.EventAdded, Match: herald.Int(3), Seq: 3, Tick: 3})
	if got := readEvent(t, r); len(got) != 2 || got[0] != "event: added" {
		t.Fatalf("first event %q", got)
	}
	if got := readEvent(t, r); len(got) != 2 || got[0] != "event: error" {
		t.Fatalf("second event %q", got)
	}
	if l, err := r.ReadString('\n'); err == nil {
		t.Fatalf("the stream went on after its error event: %q", l)
	}
	<-st.closed
}

// TestSSEHubWritesWhatAClosedStreamHeld: when a stream ends, the hub writes the events
// it still held, then ends the response.
func TestSSEHubWritesWhatAClosedStreamHeld(t *testing.T) {
	st, r := openHubbedWatch(t)
	st.send(herald.Event{Type: herald.EventAdded, Match: herald.Int(1), Seq: 1, Tick: 1})
	if got := readEvent(t, r); len(got) != 2 {
		t.Fatalf("first event %q", got)
	}
	st.events <- herald.Event{Type: herald.EventAdded, Match: herald.Int(2), Seq: 2, Tick: 2}
	close(st.events)
	if fn := st.notify.Load(); fn != nil {
		(*fn)()
	}
	done := make(chan []string, 1)
	go func() { done <- readEvent(t, r) }()
	select {
	case got := <-done:
		if len(got) != 2 || !strings.Contains(got[1], `"seq":2`) {
			t.Fatalf("the held event: %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the event an ended stream held never went out")
	}
	if l, err := r.ReadString('\n'); err == nil {
		t.Fatalf("the response went on after its stream ended: %q", l)
	}
}
