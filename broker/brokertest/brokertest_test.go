package brokertest

import (
	"context"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// What a test does not set answers NOT_IMPLEMENTED, as a node without that part would.
func TestUnsetAnswersNotImplemented(t *testing.T) {
	var b Broker
	ctx := context.Background()
	if _, err := b.Exec(ctx, "", "MATCH n: N RETURN n", nil); herald.CodeOf(err) != herald.CodeNotImplemented {
		t.Fatalf("Exec: %v", err)
	}
	if _, err := b.Open(ctx, broker.StreamRequest{Query: "WATCH"}); herald.CodeOf(err) != herald.CodeNotImplemented {
		t.Fatalf("Open: %v", err)
	}
	res, _, _ := b.Settle(ctx, []broker.Settle{{DeliveryID: "d", Action: broker.ActAck}})
	if herald.CodeOf(res[0].Err) != herald.CodeNotImplemented {
		t.Fatalf("Settle: %v", res[0].Err)
	}
	if _, err := b.Pop(ctx, "q", broker.PopOptions{}); herald.CodeOf(err) != herald.CodeNotImplemented {
		t.Fatalf("Pop: %v", err)
	}
	called := false
	b.ExecFunc = func(context.Context, string, string, map[string]herald.Value) (*herald.Response, error) {
		called = true
		return &herald.Response{}, nil
	}
	if _, err := b.Exec(ctx, "", "TICK", nil); err != nil || !called {
		t.Fatalf("Exec with a func: %v %v", err, called)
	}
}

// A fake stream hands out what was sent, calls back on each event, and ends.
func TestStream(t *testing.T) {
	st := NewStream(broker.ModeWatch, 4)
	pokes := 0
	st.SetNotify(func() { pokes++ })
	st.Send(herald.Event{Type: herald.EventAdded, Seq: 1})
	st.Send(herald.Event{Type: herald.EventAdded, Seq: 2})
	got, closed := st.Take(nil, 10)
	if len(got) != 2 || closed || pokes != 2 {
		t.Fatalf("take %v closed=%v pokes=%d", got, closed, pokes)
	}
	st.Close()
	select {
	case <-st.Closed():
	default:
		t.Fatal("Close not recorded")
	}
	if _, closed := st.Take(nil, 10); !closed {
		t.Fatal("stream not ended by Close")
	}
	if err := st.SetCredit(3); err != nil || len(st.Credits()) != 1 {
		t.Fatalf("credit: %v %v", err, st.Credits())
	}
}
