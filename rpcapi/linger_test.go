package rpcapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/api/convert"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
	"github.com/herald-mq/herald/internal/clock"
)

// TestWatchLingerGathersABusyStream: the first event after a quiet spell goes out at
// once; what comes within the linger after a frame waits for it and goes out together.
func TestWatchLingerGathersABusyStream(t *testing.T) {
	clk := clock.NewManual(time.Unix(1700000000, 0))
	st := newFakeStream()
	svc := New(fakeNode(&fakeEngine{}, nil, &fakeWatcher{stream: st}), Options{Clock: clk, WatchLinger: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	mux := http.NewServeMux()
	mux.Handle(svc.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := heraldv1connect.NewHeraldClient(srv.Client(), srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.Watch(ctx, connect.NewRequest(&heraldv1.WatchRequest{Query: "WATCH t: Task RETURN t"}))
	if err != nil {
		t.Fatal(err)
	}
	frame := func() []string {
		t.Helper()
		if !stream.Receive() {
			t.Fatalf("no frame: %v", stream.Err())
		}
		var ids []string
		for _, ev := range stream.Msg().GetEvents() {
			m, err := convert.FromWire(ev.GetMatch())
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.MapGet("id").AsString())
		}
		return ids
	}
	if got := frame(); len(got) != 0 {
		t.Fatalf("the first frame says the watch is registered; it carried %v", got)
	}
	st.events <- herald.Event{Type: herald.EventAdded, Match: task("t1", "a"), Seq: 1}
	if got := frame(); len(got) != 1 || got[0] != "t1" {
		t.Fatalf("the first event: frame %v, want [t1] at once", got)
	}
	st.events <- herald.Event{Type: herald.EventAdded, Match: task("t2", "b"), Seq: 2}
	for deadline := time.Now().Add(10 * time.Second); clk.Pending() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stream did not wait for the linger after its last frame")
		}
	}
	st.events <- herald.Event{Type: herald.EventAdded, Match: task("t3", "c"), Seq: 3}
	clk.Advance(10 * time.Millisecond)
	if got := frame(); len(got) != 2 || got[0] != "t2" || got[1] != "t3" {
		t.Fatalf("after the linger: frame %v, want [t2 t3]", got)
	}
}

// TestWatchManyAnswersSkipTheLinger: the linger gathers a busy watch's events; the
// answer to an open on the same call goes out without it, both when the open comes
// just after a frame and when the writer is already lingering.
func TestWatchManyAnswersSkipTheLinger(t *testing.T) {
	clk := clock.NewManual(time.Unix(1700000000, 0))
	wat := &manyWatcher{streams: map[string]*notifyStream{}, opened: make(chan string, 4)}
	call, open, await := manyCall(t, wat, func(o *Options) { o.Clock, o.WatchLinger = clk, 10*time.Millisecond })
	open(1, qA)
	await(map[uint64][]string{1: {"opened"}})
	<-wat.opened
	wat.stream(qA).push(herald.Event{Type: herald.EventAdded, Seq: 1})
	await(map[uint64][]string{1: {"opened", "added:"}})
	// A frame just went out: an event now waits for the linger, an answer does not.
	open(2, qB)
	await(map[uint64][]string{2: {"opened"}})
	<-wat.opened
	wat.stream(qA).push(herald.Event{Type: herald.EventAdded, Seq: 2})
	for deadline := time.Now().Add(10 * time.Second); clk.Pending() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer did not linger after its last frame")
		}
	}
	open(3, qBad) // answered (refused) while the writer lingers: the answer cuts it short
	await(map[uint64][]string{3: {"error:E1004", "ended"}, 1: {"opened", "added:", "added:"}})
	_ = call.CloseRequest()
	_ = call.CloseResponse()
}
