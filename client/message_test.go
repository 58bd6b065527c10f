package client_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// TestHandBuiltMessage: a handler's unit test builds a Message and hands it to the
// handler; settling it records how, calls no server, and settles once.
func TestHandBuiltMessage(t *testing.T) {
	ctx := context.Background()
	handler := func(ctx context.Context, m *client.Message) error {
		if m.Match["n"] == int64(2) {
			return m.Reject(ctx)
		}
		return m.Ack(ctx)
	}
	m := &client.Message{Match: map[string]any{"n": int64(1)}, DeliveryID: "d1", Attempt: 1}
	if err := handler(ctx, m); err != nil {
		t.Fatalf("Ack of a hand-built message: %v", err)
	}
	if m.Settlement() != "ack" || !m.Settled() {
		t.Fatalf("settlement %q", m.Settlement())
	}
	if err := m.Nack(ctx); err == nil {
		t.Fatal("a second settlement of the same message went through")
	}
	r := &client.Message{Match: map[string]any{"n": int64(2)}}
	if err := handler(ctx, r); err != nil || r.Settlement() != "reject" {
		t.Fatalf("Reject: %v, %q", err, r.Settlement())
	}
	if err := (&client.Message{}).Extend(ctx, 0); err != nil {
		t.Fatalf("Extend of a hand-built message: %v", err)
	}
	if f := (&client.Message{}).AckAsync(); f.Err() != nil {
		t.Fatalf("AckAsync of a hand-built message: %v", f.Err())
	}
}

// TestCodeOfNil: no error has no code.
func TestCodeOfNil(t *testing.T) {
	if c := herald.CodeOf(nil); c != "" {
		t.Fatalf("CodeOf(nil) = %q, want none", c)
	}
}

// TestDialRefusesHTTP1: an HTTP client that speaks only HTTP/1.1 is refused at Dial with
// E4017, saying what it needs, rather than failing at the first publish with 505.
func TestDialRefusesHTTP1(t *testing.T) {
	s := heraldtest.NewServer(t)
	_, err := client.Dial(context.Background(), s.URL(), client.WithHTTPClient(&http.Client{}))
	if herald.CodeOf(err) != herald.CodeClientSetup {
		t.Fatalf("Dial with an HTTP/1.1 client: %v, want E4017", err)
	}
}
