package rpcapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
)

// serveH2 serves the service over HTTP/2 (TLS), which bidirectional streams need.
func serveH2(t *testing.T, eng *fakeEngine) (heraldv1connect.HeraldClient, *Service) {
	t.Helper()
	svc := New(fakeNode(eng, nil, nil), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := h2Server(t, svc)
	return heraldv1connect.NewHeraldClient(srv.Client(), srv.URL), svc
}

// h2Server serves svc over HTTP/2 (TLS) until the test ends.
func h2Server(t *testing.T, svc *Service) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(svc.Handler())
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// countingPublisher publishes by numbering: message n gets id "m<n>" and seq n.
func countingPublisher() func([]herald.Publication) ([]herald.Published, func(context.Context) error, error) {
	var n atomic.Uint64
	return func(msgs []herald.Publication) ([]herald.Published, func(context.Context) error, error) {
		out := make([]herald.Published, len(msgs))
		for i, m := range msgs {
			if m.Type == "Bad" {
				out[i].Err = herald.Errorf(herald.CodeSealedType, "type Bad is sealed")
				continue
			}
			seq := n.Add(1)
			out[i] = herald.Published{ID: herald.NodeID(fmt.Sprintf("m%d", seq)), Seq: seq, Tick: seq}
		}
		return out, func(context.Context) error { return nil }, nil
	}
}

func msg(ref uint64, typ string) *heraldv1.PublishMessage {
	return &heraldv1.PublishMessage{Ref: ref, Type: typ, Attrs: map[string]*heraldv1.Value{}}
}

// TestPublishStream answers each frame with one acknowledgement per message, in order,
// refused messages carrying their error and the others their id and position.
func TestPublishStream(t *testing.T) {
	c, _ := serveH2(t, &fakeEngine{publish: countingPublisher()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := c.Publish(ctx)
	if err := st.Send(&heraldv1.PublishRequest{Messages: []*heraldv1.PublishMessage{msg(1, "Job"), msg(2, "Bad"), msg(3, "")}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&heraldv1.PublishRequest{Messages: []*heraldv1.PublishMessage{msg(4, "Job")}}); err != nil {
		t.Fatal(err)
	}
	var acks []*heraldv1.PublishAck
	for len(acks) < 4 {
		resp, err := st.Receive()
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, resp.GetAcks()...)
	}
	want := []struct {
		ref  uint64
		id   string
		code string
	}{{1, "m1", ""}, {2, "", string(herald.CodeSealedType)}, {3, "", string(herald.CodeMalformedRequest)}, {4, "m2", ""}}
	for i, w := range want {
		a := acks[i]
		if a.GetRef() != w.ref || a.GetId() != w.id || a.GetError().GetCode() != w.code {
			t.Errorf("ack %d = %v, want ref %d id %q code %q", i, a, w.ref, w.id, w.code)
		}
	}
	if err := st.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Receive(); !errors.Is(err, io.EOF) {
		t.Errorf("after CloseRequest: %v, want EOF", err)
	}
	_ = st.CloseResponse()
}

func TestPublishFrameTooLarge(t *testing.T) {
	c, _ := serveH2(t, &fakeEngine{publish: countingPublisher()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := c.Publish(ctx)
	frame := &heraldv1.PublishRequest{}
	for i := range MaxPublishFrame + 1 {
		frame.Messages = append(frame.Messages, msg(uint64(i), "Job"))
	}
	_ = st.Send(frame)
	_, err := st.Receive()
	if e := heraldError(t, err); e.Code != herald.CodeMalformedRequest {
		t.Errorf("error %v, want %s", e, herald.CodeMalformedRequest)
	}
	_ = st.CloseResponse()
}

// TestPublishCloseStreams ends a publish stream that its client keeps open when the
// server starts shutting down, after answering what it received.
func TestPublishCloseStreams(t *testing.T) {
	c, svc := serveH2(t, &fakeEngine{publish: countingPublisher()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := c.Publish(ctx)
	if err := st.Send(&heraldv1.PublishRequest{Messages: []*heraldv1.PublishMessage{msg(1, "Job")}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := st.Receive(); err != nil || resp.GetAcks()[0].GetId() != "m1" {
		t.Fatalf("first ack: %v %v", resp, err)
	}
	svc.CloseStreams()
	_, err := st.Receive()
	if ctx.Err() != nil {
		t.Fatal("the stream outlived CloseStreams")
	}
	if e := heraldError(t, err); e.Code != herald.CodeShuttingDown {
		t.Errorf("error %v, want %s", e, herald.CodeShuttingDown)
	}
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("connect code %v, want unavailable", connect.CodeOf(err))
	}
	_ = st.CloseResponse()
}

// TestPublishInflightPerPrincipal: an authenticated principal's messages not yet durable
// are capped across its streams; a frame past the cap is answered with E4015 and the
// stream goes on; once earlier ones are durable, frames are taken again.
func TestPublishInflightPerPrincipal(t *testing.T) {
	release := make(chan struct{})
	eng := &fakeEngine{publish: func(msgs []herald.Publication) ([]herald.Published, func(context.Context) error, error) {
		out := make([]herald.Published, len(msgs))
		for i := range out {
			out[i] = herald.Published{ID: herald.NodeID(fmt.Sprint("m", i)), Seq: 1}
		}
		return out, func(context.Context) error { <-release; return nil }, nil
	}}
	svc := New(fakeNode(eng, nil, nil), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxInflightPublishes: 3})
	mux := http.NewServeMux()
	mux.Handle(svc.Handler())
	ann := &herald.Principal{Name: "ann", Grants: []string{"admin"}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(herald.WithPrincipal(r.Context(), ann)))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := heraldv1connect.NewHeraldClient(srv.Client(), srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	two := func(ref uint64) *heraldv1.PublishRequest {
		return &heraldv1.PublishRequest{Messages: []*heraldv1.PublishMessage{msg(ref, "Job"), msg(ref+1, "Job")}}
	}
	a, b := c.Publish(ctx), c.Publish(ctx)
	if err := a.Send(two(1)); err != nil { // 2 in flight on one stream, waiting for its sync
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second) // a bound on a hang
	for {
		svc.pubs.mu.Lock()
		held := svc.pubs.n["ann"]
		svc.pubs.mu.Unlock()
		if held == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first frame was never taken")
		}
		time.Sleep(time.Millisecond)
	}
	if err := b.Send(two(3)); err != nil { // 4 > 3 across the principal's streams: refused
		t.Fatal(err)
	}
	resp, err := b.Receive()
	if err != nil {
		t.Fatal(err)
	}
	for _, ack := range resp.GetAcks() {
		if ack.GetError().GetCode() != string(herald.CodeRateLimited) {
			t.Fatalf("past the cap: %v, want E4015", ack)
		}
	}
	close(release)
	if resp, err := a.Receive(); err != nil || resp.GetAcks()[0].GetError() != nil {
		t.Fatalf("the first frame: %v %v", resp, err)
	}
	if err := b.Send(two(5)); err != nil { // the first frame is durable: room again
		t.Fatal(err)
	}
	if resp, err := b.Receive(); err != nil || resp.GetAcks()[0].GetError() != nil {
		t.Fatalf("after the first frame was durable: %v %v", resp, err)
	}
	for _, st := range []*connect.BidiStreamForClient[heraldv1.PublishRequest, heraldv1.PublishResponse]{a, b} {
		_ = st.CloseRequest()
		_ = st.CloseResponse()
	}
	for {
		svc.pubs.mu.Lock()
		left := svc.pubs.n["ann"]
		svc.pubs.mu.Unlock()
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still counted after the stream ended", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A Publish call's headers say that the server reads attrs_binary, and a message sent in
// that form publishes what the map form would. Binary attributes that the map form could
// not carry (bad UTF-8, nesting past the wire's bound, undecodable bytes), or a message
// with both forms, are refused with E4001 and the rest of the frame goes on. A map value
// (a nested attribute) is carried like any other.
func TestPublishBinaryAttrs(t *testing.T) {
	var got []herald.Publication
	count := countingPublisher()
	c, _ := serveH2(t, &fakeEngine{publish: func(msgs []herald.Publication) ([]herald.Published, func(context.Context) error, error) {
		got = append(got, msgs...)
		return count(msgs)
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := c.Publish(ctx)
	attrs := herald.Attrs{{Name: "body", Value: herald.String("héllo")}, {Name: "n", Value: herald.List(herald.Int(1), herald.Null)}}
	bin := func(a herald.Attrs) *heraldv1.PublishMessage {
		return &heraldv1.PublishMessage{Type: "Job", AttrsBinary: a.AppendBinary(nil)}
	}
	deep := herald.Int(1)
	for range 70 {
		deep = herald.List(deep)
	}
	frame := []*heraldv1.PublishMessage{
		bin(attrs),
		bin(herald.Attrs{{Name: "m", Value: herald.Map([]string{"k"}, []herald.Value{herald.Int(1)})}}),
		bin(herald.Attrs{{Name: "s", Value: herald.String("\xff")}}),
		bin(herald.Attrs{{Name: "d", Value: deep}}),
		{Type: "Job", AttrsBinary: []byte{0x05}},
		{Type: "Job", AttrsBinary: attrs.AppendBinary(nil), Attrs: map[string]*heraldv1.Value{"x": {}}},
	}
	for i, m := range frame {
		m.Ref = uint64(i + 1)
	}
	if err := st.Send(&heraldv1.PublishRequest{Messages: frame}); err != nil {
		t.Fatal(err)
	}
	var acks []*heraldv1.PublishAck
	for len(acks) < len(frame) {
		resp, err := st.Receive()
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, resp.GetAcks()...)
	}
	if h := st.ResponseHeader().Get("Herald-Binary-Attrs"); h != "1" {
		t.Errorf("Herald-Binary-Attrs = %q, want 1", h)
	}
	if acks[0].GetError() != nil || len(got) != 2 || !got[0].Attrs["body"].Equal(attrs[0].Value) || !got[0].Attrs["n"].Equal(attrs[1].Value) {
		t.Errorf("binary message: ack %v, published %+v", acks[0], got)
	}
	if acks[1].GetError() != nil || len(got) != 2 || !got[1].Attrs["m"].Equal(herald.Map([]string{"k"}, []herald.Value{herald.Int(1)})) {
		t.Errorf("a map attribute: ack %v, published %+v", acks[1], got)
	}
	for _, a := range acks[2:] {
		if a.GetError().GetCode() != string(herald.CodeMalformedRequest) {
			t.Errorf("ack %d = %v, want %s", a.GetRef(), a, herald.CodeMalformedRequest)
		}
	}
	_ = st.CloseRequest()
	_ = st.CloseResponse()
}
