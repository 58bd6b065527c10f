package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
)

// manyServer serves WatchMany only: it answers each open with opened and an initial
// event at seq = the watch's id, and each close with ended.
type manyServer struct {
	heraldv1connect.UnimplementedHeraldHandler
	calls  atomic.Int32
	ended  chan struct{} // one per call that ended
	single atomic.Int32  // Watch calls (there should be none)
	extra  int           // events after the initial one, sent with each open
	grants atomic.Int32  // requests that neither open nor close (credit grants)
}

func (m *manyServer) Watch(context.Context, *connect.Request[heraldv1.WatchRequest], *connect.ServerStream[heraldv1.WatchResponse]) error {
	m.single.Add(1)
	return connect.NewError(connect.CodeUnimplemented, errors.New("no"))
}

func (m *manyServer) WatchMany(ctx context.Context, stream *connect.BidiStream[heraldv1.WatchManyRequest, heraldv1.WatchManyResponse]) error {
	m.calls.Add(1)
	defer func() { m.ended <- struct{}{} }()
	for {
		req, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		b := &heraldv1.WatchBatch{Id: req.GetId()}
		switch {
		case req.GetOpen() != nil:
			b.Opened = true
			b.Events = []*heraldv1.WatchEvent{{Type: "initial", Seq: req.GetId(), Tick: req.GetId(), Last: true}}
			for i := range m.extra {
				b.Events = append(b.Events, &heraldv1.WatchEvent{Type: "added", Seq: uint64(i + 2), Tick: uint64(i + 2)})
			}
		case !req.GetClose():
			m.grants.Add(1) // a server without credit would end the call here
			continue
		default:
			b.Ended = true
		}
		if err := stream.Send(&heraldv1.WatchManyResponse{Batches: []*heraldv1.WatchBatch{b}}); err != nil {
			return err
		}
	}
}

// dialMany serves m over HTTP/2 and dials it; both end with the test.
func dialMany(t *testing.T, m *manyServer) *Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	mux.Handle(heraldv1connect.NewHeraldHandler(m))
	srv := httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := Dial(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestWatchesShareOneCall: a client's watches go on one WatchMany call, each gets its
// own events, the call ends with the last watch, and the next watch opens a new one.
func TestWatchesShareOneCall(t *testing.T) {
	m := &manyServer{ended: make(chan struct{}, 4)}
	c := dialMany(t, m)
	var ws []*Watch
	for range 3 {
		w, err := c.Watch(context.Background(), taskWatch)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	seqs := map[uint64]bool{}
	for _, w := range ws {
		seqs[nextWatchEvent(t, w).Seq] = true
	}
	if len(seqs) != 3 {
		t.Fatalf("the watches got the events of seqs %v, want one each", seqs)
	}
	if n, s := m.calls.Load(), m.single.Load(); n != 1 || s != 0 {
		t.Fatalf("three watches made %d WatchMany calls and %d Watch calls, want 1 and 0", n, s)
	}
	for _, w := range ws {
		_ = w.Close()
	}
	<-m.ended // the last watch's close ended the call
	w, err := c.Watch(context.Background(), taskWatch)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	nextWatchEvent(t, w)
	if n := m.calls.Load(); n != 2 {
		t.Fatalf("a watch after the call ended: %d WatchMany calls in all, want 2", n)
	}
}

// TestNoCreditToAServerWithoutIt: a server that does not say it holds a watch to its
// credit gets no grants (an older one would take a request that neither opens nor
// closes for a malformed one and end the call).
func TestNoCreditToAServerWithoutIt(t *testing.T) {
	defer SetWatchCredit(4)()
	m := &manyServer{ended: make(chan struct{}, 4), extra: 20}
	c := dialMany(t, m)
	w, err := c.Watch(context.Background(), taskWatch)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for range 21 {
		nextWatchEvent(t, w)
	}
	if n := m.grants.Load(); n != 0 {
		t.Fatalf("the client sent %d credit grants to a server that took none", n)
	}
}
