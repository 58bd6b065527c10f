package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
)

type codecBase struct {
	Tenant string `json:"tenant"`
	Hidden string `json:"-"`
}

type codecAddress struct {
	City string `json:"city"`
	Zip  int    `json:"zip"`
}

type codecOrder struct {
	codecBase
	ID       string            `json:"id"`
	Total    float64           `json:"total"`
	Count    uint16            `json:"count"`
	Paid     bool              `json:"paid"`
	Body     []byte            `json:"body"`
	Hash     [4]byte           `json:"hash"`
	Due      time.Time         `json:"due"`
	Window   time.Duration     `json:"window"`
	Tags     []string          `json:"tags"`
	Note     *string           `json:"note,omitempty"`
	Empty    string            `json:"empty,omitempty"`
	Ship     codecAddress      `json:"ship"`
	Extra    map[string]int    `json:"extra"`
	Addr     netip.Addr        `json:"addr"` // MarshalText
	Raw      json.RawMessage   `json:"raw"`  // MarshalJSON
	Any      any               `json:"any"`
	Val      herald.Value      `json:"val"`
	Plain    int               // named by its Go name
	Headers  map[string]string `json:"headers,omitempty"`
	internal int
}

// match turns attributes into the plain values a Message's Match holds.
func match(attrs map[string]herald.Value) map[string]any {
	m := make(map[string]any, len(attrs))
	for k, v := range attrs {
		m[k] = v.Interface()
	}
	return m
}

func TestJSONCodecKindsAndRoundTrip(t *testing.T) {
	due := time.Date(2030, 5, 6, 7, 8, 9, 10, time.UTC)
	in := codecOrder{codecBase: codecBase{Tenant: "acme", Hidden: "x"}, ID: "o1", Total: 9.5, Count: 3, Paid: true,
		Body: []byte{0, 1, 0xff}, Hash: [4]byte{1, 2, 3, 4}, Due: due, Window: 90 * time.Second,
		Tags: []string{"a", "b"}, Ship: codecAddress{City: "Oslo", Zip: 150}, Extra: map[string]int{"x": 1},
		Addr: netip.MustParseAddr("10.0.0.1"), Raw: json.RawMessage(`{"k":[1,2.5]}`), Any: int64(4),
		Val: herald.Bytes([]byte("v")), Plain: 7, internal: 9}
	attrs, err := JSON.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]herald.Kind{"tenant": herald.KindString, "id": herald.KindString, "total": herald.KindFloat,
		"count": herald.KindInt, "paid": herald.KindBool, "body": herald.KindBytes, "hash": herald.KindBytes,
		"due": herald.KindTimestamp, "window": herald.KindDuration, "tags": herald.KindList, "ship": herald.KindMap,
		"extra": herald.KindMap, "addr": herald.KindString, "raw": herald.KindMap, "any": herald.KindInt,
		"val": herald.KindBytes, "Plain": herald.KindInt}
	for name, k := range kinds {
		if got := attrs[name].Kind(); got != k {
			t.Errorf("%s: kind %v, want %v", name, got, k)
		}
	}
	for _, absent := range []string{"Hidden", "note", "empty", "internal", "headers"} {
		if _, ok := attrs[absent]; ok {
			t.Errorf("%s is an attribute; it should be left out", absent)
		}
	}
	if len(attrs) != len(kinds) {
		t.Errorf("%d attributes, want %d: %v", len(attrs), len(kinds), attrs)
	}
	if got := attrs["ship"].MapGet("city").AsString(); got != "Oslo" {
		t.Errorf("ship.city = %q", got)
	}

	var out codecOrder
	if err := JSON.Unmarshal(match(attrs), &out); err != nil {
		t.Fatal(err)
	}
	in.Hidden, in.internal = "", 0
	if !reflect.DeepEqual(stripValue(in), stripValue(out)) || !bytes.Equal(out.Val.AsBytes(), []byte("v")) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
}

// stripValue leaves the herald.Value out of a comparison: Values are not comparable
// with reflect.DeepEqual.
func stripValue(o codecOrder) codecOrder {
	o.Val = herald.Null
	o.Raw = json.RawMessage(strings.ReplaceAll(string(o.Raw), " ", ""))
	return o
}

func TestJSONCodecMaps(t *testing.T) {
	attrs, err := JSON.Marshal(map[string]any{"n": 1, "none": nil, "when": time.Unix(5, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(attrs) != 2 || attrs["n"].AsInt() != 1 || attrs["when"].Kind() != herald.KindTimestamp {
		t.Fatalf("attrs = %v", attrs)
	}
	var m map[string]any
	if err := JSON.Unmarshal(map[string]any{"a": int64(1), "b": []any{"x"}}, &m); err != nil || m["a"] != int64(1) {
		t.Fatalf("into a map: %v %v", m, err)
	}
}

func TestJSONCodecRefuses(t *testing.T) {
	big := struct{ N uint64 }{N: 1 << 63}
	cyclic := &struct{ Next any }{}
	cyclic.Next = cyclic
	for name, v := range map[string]any{
		"a number":      42,
		"a nil pointer": (*codecOrder)(nil),
		"a channel":     struct{ C chan int }{C: make(chan int)},
		"an int key":    struct{ M map[int]int }{M: map[int]int{1: 1}},
		"a big uint":    big,
		"a cycle":       cyclic,
	} {
		if _, err := JSON.Marshal(v); !errors.Is(err, herald.CodeInvalidArgument) {
			t.Errorf("%s: %v, want E4019", name, err)
		}
	}
	var o codecOrder
	for name, m := range map[string]map[string]any{
		"a string for an int":    {"count": "three"},
		"a negative for a uint":  {"count": int64(-1)},
		"an overflow":            {"count": int64(1 << 20)},
		"a bad duration":         {"window": "soon"},
		"a bad time":             {"due": "tomorrow"},
		"wrong array length":     {"hash": []byte{1}},
		"a list for a struct":    {"ship": []any{}},
		"a string in a list":     {"tags": []any{int64(1)}},
		"a bool for bytes":       {"body": true},
		"a number for text":      {"addr": int64(1)},
		"a fraction for an int":  {"count": 1.5},
		"a map for a float":      {"total": map[string]any{}},
		"nested field wrong":     {"ship": map[string]any{"zip": "x"}},
		"a string for bool":      {"paid": "yes"},
		"a list for a map":       {"extra": []any{}},
		"a map value wrong type": {"extra": map[string]any{"x": "y"}},
	} {
		err := JSON.Unmarshal(m, &o)
		if !errors.Is(err, herald.CodeInvalidArgument) {
			t.Errorf("%s: %v, want E4019", name, err)
		}
	}
	err := JSON.Unmarshal(map[string]any{"ship": map[string]any{"zip": "x"}}, &o)
	if err == nil || !strings.Contains(err.Error(), "ship.zip") {
		t.Errorf("the error does not name the field: %v", err)
	}
	if err := JSON.Unmarshal(map[string]any{}, o); !errors.Is(err, herald.CodeInvalidArgument) {
		t.Errorf("Unmarshal into a non-pointer: %v", err)
	}
}

func TestJSONCodecDecodeLeniency(t *testing.T) {
	var o codecOrder
	m := map[string]any{"TENANT": "acme", "count": 3.0, "total": int64(2), "window": int64(5), "unknown": 1, "note": nil}
	if err := JSON.Unmarshal(m, &o); err != nil {
		t.Fatal(err)
	}
	if o.Tenant != "acme" || o.Count != 3 || o.Total != 2 || o.Window != 5 || o.Note != nil {
		t.Fatalf("decoded %+v", o)
	}
	var p struct{ N *int }
	if err := JSON.Unmarshal(map[string]any{"N": int64(4)}, &p); err != nil || p.N == nil || *p.N != 4 {
		t.Fatalf("into a pointer: %v %v", p.N, err)
	}
}

func TestProtoCodec(t *testing.T) {
	in := &heraldv1.QueueAckRequest{Queue: "emails", MessageId: "n1"}
	attrs, err := Proto.Marshal(in)
	if err != nil || attrs[ProtoAttr].Kind() != herald.KindBytes {
		t.Fatalf("Marshal: %v %v", attrs, err)
	}
	var out heraldv1.QueueAckRequest
	if err := Proto.Unmarshal(match(attrs), &out); err != nil || out.GetQueue() != "emails" || out.GetMessageId() != "n1" {
		t.Fatalf("Unmarshal: %v %v", &out, err)
	}
	if _, err := Proto.Marshal(struct{}{}); !errors.Is(err, herald.CodeInvalidArgument) {
		t.Errorf("Marshal of a struct: %v", err)
	}
	if err := Proto.Unmarshal(map[string]any{}, &out); !errors.Is(err, herald.CodeInvalidArgument) {
		t.Errorf("Unmarshal without a payload: %v", err)
	}
	if err := Proto.Unmarshal(map[string]any{ProtoAttr: []byte{0xff}}, &out); !errors.Is(err, herald.CodeInvalidArgument) {
		t.Errorf("Unmarshal of bad bytes: %v", err)
	}
	if err := Proto.Unmarshal(match(attrs), &struct{}{}); !errors.Is(err, herald.CodeInvalidArgument) {
		t.Errorf("Unmarshal into a struct: %v", err)
	}
}

// A hand-built message decodes with JSON, and a typed handler rejects a message that
// does not decode.
func TestTypedHandlerOnHandBuiltMessages(t *testing.T) {
	type job struct {
		N int `json:"n"`
	}
	var got int
	h := Typed(WorkFunc[job](func(_ context.Context, j *Job[job]) error {
		got = j.Payload.N
		return nil
	}))
	m := &Message{Match: map[string]any{"n": int64(5)}}
	if err := h(t.Context(), m); err != nil || got != 5 {
		t.Fatalf("handler: %v, payload %d", err, got)
	}
	bad := &Message{Match: map[string]any{"n": "five"}}
	err := h(t.Context(), bad)
	if v, _ := herald.VerdictOf(err); v != herald.VerdictReject || !errors.Is(err, herald.CodeInvalidArgument) {
		t.Fatalf("a message that does not decode: %v, want a reject of E4019", err)
	}
	if err := NackOnError.Settle(t.Context(), bad, err); err != nil || bad.Settlement() != "reject" {
		t.Fatalf("settled %q (%v), want reject", bad.Settlement(), err)
	}
}
