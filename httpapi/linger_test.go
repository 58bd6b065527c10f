package httpapi

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/clock"
)

// fakeWatcher answers a watch-mode Open with its stream.
type fakeWatcher struct{ stream *fakeStream }

func (f *fakeWatcher) Open(ctx context.Context, sessionID, query string, params map[string]herald.Value, after uint64) (herald.Stream, error) {
	return f.stream, nil
}

// waitPending waits until clk has n timers armed (a bound on a hang, not a timing).
func waitPending(t *testing.T, clk *clock.Manual, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Pending() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers armed, want %d", clk.Pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWatchModeStreamLingers: a watch-mode event stream over HTTP/1.1 takes its
// connection over and writes the events raw (not chunked); the first event goes out at
// once, and the ones that follow within the linger wait for it to pass and go out
// together; the client leaving ends the stream.
func TestWatchModeStreamLingers(t *testing.T) {
	st := newFakeStream()
	clk := clock.NewManual(epoch)
	h := newTestHandler(t, &fakeEngine{}, Options{Clock: clk, WatchLinger: 10 * time.Millisecond, PingInterval: time.Hour}, &fakeWatcher{stream: st})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, r := openWatch(t, ctx, watchURL(srv.URL, `WATCH t: T RETURN t`, "", ""))
	if len(resp.TransferEncoding) != 0 || !resp.Close {
		t.Fatalf("transfer encoding %v, close %v: want a raw stream that ends with its connection", resp.TransferEncoding, resp.Close)
	}
	ev := func(seq uint64) herald.Event {
		return herald.Event{Type: herald.EventAdded, Match: herald.Int(int64(seq)), Seq: seq, Tick: seq}
	}
	st.send(ev(1))
	if got := readEvent(t, r); len(got) != 2 || got[1] != `data: {"type":"added","match":1,"seq":1,"tick":1}` {
		t.Fatalf("the first event: %q", got)
	}
	st.send(ev(2))
	waitPending(t, clk, 2) // the ping, and the linger the second event waits out
	st.send(ev(3))
	clk.Advance(10 * time.Millisecond)
	for _, seq := range []string{"2", "3"} {
		if got := readEvent(t, r); len(got) != 2 || got[1] != `data: {"type":"added","match":`+seq+`,"seq":`+seq+`,"tick":`+seq+`}` {
			t.Fatalf("event %s: %q", seq, got)
		}
	}
	resp.Body.Close()
	select {
	case <-st.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream went on after its client left")
	}
}
