package rpcapi

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
)

// Copies of one event shared by identical watches are encoded once per form, and a
// frame built from the encodings reads back as the events themselves.
func TestEncodedEventShared(t *testing.T) {
	enc := new(herald.Encodings)
	ev := herald.Event{Type: herald.EventAdded, Match: task("t1", "a"), Seq: 7, Tick: 7, Enc: enc}
	last := ev
	last.Last = true

	a, err := encodedEvent(ev, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodedEvent(ev, false)
	if err != nil {
		t.Fatal(err)
	}
	if &a[0] != &b[0] {
		t.Fatal("the second copy was encoded again")
	}
	c, err := encodedEvent(last, false)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) == string(c) {
		t.Fatal("an event marked last shares the encoding of one that is not")
	}
	d, err := encodedEvent(ev, true)
	if err != nil {
		t.Fatal(err)
	}
	if d2, _ := encodedEvent(ev, true); &d[0] != &d2[0] || string(d) == string(a) {
		t.Fatal("the binary form is not encoded once, apart from the Value form")
	}

	var raw []byte
	for _, b := range [][]byte{a, c, d} {
		raw = appendEncodedEvent(raw, b)
	}
	frame := &heraldv1.WatchResponse{}
	frame.ProtoReflect().SetUnknown(raw)
	wire, err := proto.Marshal(frame)
	if err != nil {
		t.Fatal(err)
	}
	var got heraldv1.WatchResponse
	if err := proto.Unmarshal(wire, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != 3 || got.Events[0].GetLast() || !got.Events[1].GetLast() || got.Events[1].GetSeq() != 7 ||
		got.Events[0].GetMatch().GetMapValue().GetValues()[1].GetStringValue() != "a" {
		t.Fatalf("frame read back as %v", got.Events)
	}
	bin := got.Events[2]
	m, _, err := herald.DecodeValue(bin.GetMatchBinary())
	if bin.GetMatch() != nil || err != nil || !m.Equal(ev.Match) {
		t.Fatalf("binary event read back as %v (match %v, %v)", bin, m, err)
	}
}
