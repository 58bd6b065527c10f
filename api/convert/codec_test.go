package convert

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"pgregory.net/rapid"

	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
)

// genFrame draws a consume stream's frame: deliveries and settlement results, some of
// them with fields the frame decoder leaves to the generic one, and timeout events.
func genFrame(t *rapid.T) *heraldv1.SubscribeResponse {
	r := &heraldv1.SubscribeResponse{}
	for range rapid.IntRange(0, 6).Draw(t, "deliveries") {
		d := &heraldv1.Delivery{
			DeliveryId:  rapid.StringMatching(`[a-z0-9]{0,12}`).Draw(t, "id"),
			Attempt:     rapid.Int32().Draw(t, "attempt"),
			Seq:         rapid.Uint64().Draw(t, "seq"),
			Tick:        rapid.Uint64().Draw(t, "tick"),
			Deadline:    rapid.Int64().Draw(t, "deadline"),
			Releases:    rapid.Int32Range(-3, 3).Draw(t, "releases"),
			MatchBinary: rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "match"),
		}
		if rapid.IntRange(0, 4).Draw(t, "tree") == 0 {
			d.Match = &heraldv1.Value{Kind: &heraldv1.Value_StringValue{StringValue: rapid.String().Draw(t, "value")}}
		}
		r.Deliveries = append(r.Deliveries, d)
	}
	for range rapid.IntRange(0, 6).Draw(t, "results") {
		s := &heraldv1.SettleResult{DeliveryId: rapid.StringMatching(`[a-z0-9]{0,12}`).Draw(t, "id"), Ok: rapid.Bool().Draw(t, "ok")}
		switch rapid.IntRange(0, 5).Draw(t, "extra") {
		case 0:
			s.Deadline = timestamppb.New(timestamppb.Now().AsTime())
		case 1:
			s.Error = &heraldv1.ErrorDetail{Code: "E8004", Message: "gone"}
		}
		r.Settled = append(r.Settled, s)
	}
	for range rapid.IntRange(0, 2).Draw(t, "events") {
		r.Events = append(r.Events, &heraldv1.WatchEvent{Type: "timeout", DeliveryId: rapid.StringMatching(`[a-z]{1,8}`).Draw(t, "id")})
	}
	return r
}

// The frame decoders read what the generic decoder reads, whatever the frame holds, and
// keep nothing of the buffer they were given (Connect reuses it).
func TestCodecDecodesFramesAsProtobufDoes(t *testing.T) {
	check := func(t *rapid.T, frame proto.Message) {
		data, err := proto.Marshal(frame)
		if err != nil {
			t.Fatal(err)
		}
		want := frame.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(data, want); err != nil {
			t.Fatal(err)
		}
		got := frame.ProtoReflect().New().Interface()
		if err := (Codec{}).Unmarshal(data, got); err != nil {
			t.Fatal(err)
		}
		for i := range data {
			data[i] = 0xff
		}
		if !proto.Equal(got, want) {
			t.Fatalf("decoded %v\nwant %v", got, want)
		}
	}
	t.Run("SubscribeResponse", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) { check(t, genFrame(t)) })
	})
}

// A frame the generic decoder refuses is refused, not half read.
func TestCodecRefusesWhatProtobufRefuses(t *testing.T) {
	data, err := proto.Marshal(&heraldv1.SubscribeResponse{Deliveries: []*heraldv1.Delivery{{DeliveryId: "d1"}}})
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), data...)
	bad[len(bad)-1] = 0xff // the id is no longer UTF-8
	for name, b := range map[string][]byte{"cut": data[:len(data)-1], "not utf-8": bad} {
		want := proto.Unmarshal(b, &heraldv1.SubscribeResponse{})
		got := (Codec{}).Unmarshal(b, &heraldv1.SubscribeResponse{})
		if (want == nil) != (got == nil) || want == nil {
			t.Errorf("%s: the codec says %v, protobuf %v", name, got, want)
		}
	}
}

// A frame of plain deliveries and results costs a handful of allocations, not five for
// each message.
func TestCodecDecodesAFrameInFewAllocations(t *testing.T) {
	frame := &heraldv1.SubscribeResponse{}
	for i := range 100 {
		id := string(rune('a'+i%26)) + "delivery"
		frame.Deliveries = append(frame.Deliveries, &heraldv1.Delivery{DeliveryId: id, Attempt: 1, Seq: uint64(i), Tick: 1, Deadline: 1e18, MatchBinary: []byte("\x07\x01\x04body\x05hello")})
		frame.Settled = append(frame.Settled, &heraldv1.SettleResult{DeliveryId: id, Ok: true})
	}
	data, err := proto.Marshal(frame)
	if err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(20, func() {
		if err := (Codec{}).Unmarshal(data, &heraldv1.SubscribeResponse{}); err != nil {
			t.Fatal(err)
		}
	})
	if n > 8 {
		t.Fatalf("a frame of 100 deliveries and 100 results: %.0f allocations", n)
	}
}
