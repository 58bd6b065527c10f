package rpcapi

import (
	"context"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/api/convert"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
)

// A Subscribe stream opened with binary_match carries each match in its binary
// encoding and leaves the Value tree unset; one opened without it (a client that
// predates the field, or one reading JSON) gets the tree. Both read back to the match.
func TestSubscribeMatchForms(t *testing.T) {
	for _, binary := range []bool{false, true} {
		st := newFakeStream()
		svc := New(fakeNode(&fakeEngine{}, &fakeDelivery{stream: st}, nil), Options{})
		srv := h2Server(t, svc)
		c := heraldv1connect.NewHeraldClient(srv.Client(), srv.URL)
		ctx, cancel := context.WithCancel(context.Background())
		call := c.Subscribe(ctx)
		if err := call.Send(&heraldv1.SubscribeRequest{Open: &heraldv1.SubscribeOpen{Query: "WATCH j: Job [mode: consume] RETURN j", Credit: 10, BinaryMatch: binary}}); err != nil {
			t.Fatal(err)
		}
		if _, err := call.Receive(); err != nil { // the empty frame that accepts the statement
			t.Fatal(err)
		}
		want := []herald.Value{task("j1", "first"), herald.String("second"), herald.Null}
		for i, m := range want {
			st.events <- herald.Event{Type: herald.EventConsumed, Match: m, DeliveryID: "d" + string(rune('1'+i)), Attempt: 1}
		}
		var got []*heraldv1.Delivery
		for len(got) < len(want) {
			resp, err := call.Receive()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, resp.GetDeliveries()...)
		}
		for i, d := range got {
			if binary != (len(d.GetMatchBinary()) > 0) || binary == (d.GetMatch() != nil) {
				t.Errorf("binary_match %v: delivery %d has match_binary %q and match %v", binary, i, d.GetMatchBinary(), d.GetMatch())
			}
			m, err := convert.EventValue(d.GetMatchBinary(), d.GetMatch())
			if err != nil || !m.Equal(want[i]) {
				t.Errorf("binary_match %v: delivery %d reads back as %v, %v; want %v", binary, i, m, err, want[i])
			}
		}
		_ = call.CloseRequest() // the server then ends the stream and closes the consumer
		<-st.closed
		_ = call.CloseResponse()
		cancel()
	}
}
