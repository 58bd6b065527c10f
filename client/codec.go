package client

import (
	"fmt"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
)

// codec is the client's protobuf codec: Connect's own, except that a consume stream's
// frames (SubscribeResponse) are decoded a frame at a time. The generic decoder
// allocates each delivery and settlement result, and copies each delivery id and match,
// five allocations for every message consumed; this one copies the frame once, points
// the ids and matches into the copy, and puts the deliveries and results in one array
// each. Whatever it does not read itself (events, a match as a Value tree, a result's
// deadline or error, fields it does not know) goes through the generic decoder, so the
// messages it returns are the ones that decoder would.
type codec struct{}

func (codec) Name() string { return "proto" }

func (codec) IsBinary() bool { return true }

func (codec) Marshal(m any) ([]byte, error) { return codec{}.MarshalAppend(nil, m) }

// MarshalAppend lets Connect reuse its buffers, as its own codec does.
func (codec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("client: %T is not a protobuf message", m)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (codec) Unmarshal(data []byte, m any) error {
	if r, ok := m.(*heraldv1.SubscribeResponse); ok {
		return unmarshalSubscribeResponse(data, r)
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("client: %T is not a protobuf message", m)
	}
	return proto.Unmarshal(data, pm)
}

// The field numbers of SubscribeResponse, Delivery and SettleResult that the frame
// decoder reads itself.
const (
	respDeliveries = 1
	respSettled    = 2

	delivID          = 1
	delivAttempt     = 2
	delivSeq         = 4
	delivTick        = 5
	delivDeadline    = 6
	delivReleases    = 7
	delivMatchBinary = 8

	resultID = 1
	resultOK = 2
)

// unmarshalSubscribeResponse decodes a consume stream's frame into r. data is Connect's
// buffer, reused once this returns: the frame is copied once, and the strings and bytes
// of the messages point into the copy, which nothing writes again.
func unmarshalSubscribeResponse(data []byte, r *heraldv1.SubscribeResponse) error {
	var nd, ns int
	for b := data; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return proto.Unmarshal(data, r) // the generic decoder reports the error
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return proto.Unmarshal(data, r)
		}
		switch {
		case num == respDeliveries && typ == protowire.BytesType:
			nd++
		case num == respSettled && typ == protowire.BytesType:
			ns++
		}
		b = b[n+m:]
	}
	buf := append([]byte(nil), data...)
	deliveries := make([]heraldv1.Delivery, nd)
	results := make([]heraldv1.SettleResult, ns)
	r.Deliveries = make([]*heraldv1.Delivery, 0, nd)
	r.Settled = make([]*heraldv1.SettleResult, 0, ns)
	var rest []byte // fields for the generic decoder
	for b := buf; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		field := b[:n+m]
		b = b[n+m:]
		switch {
		case num == respDeliveries && typ == protowire.BytesType:
			d := &deliveries[len(r.Deliveries)]
			if err := decodeDelivery(field[n:], d); err != nil {
				return err
			}
			r.Deliveries = append(r.Deliveries, d)
		case num == respSettled && typ == protowire.BytesType:
			s := &results[len(r.Settled)]
			if err := decodeSettleResult(field[n:], s); err != nil {
				return err
			}
			r.Settled = append(r.Settled, s)
		default:
			rest = append(rest, field...)
		}
	}
	if len(rest) > 0 {
		return proto.UnmarshalOptions{Merge: true}.Unmarshal(rest, r)
	}
	return nil
}

// decodeDelivery decodes one Delivery (its length-prefixed value) into d, through the
// generic decoder when it has a field the frame decoder does not read.
func decodeDelivery(v []byte, d *heraldv1.Delivery) error {
	return decodeFields(v, d, func(num protowire.Number, typ protowire.Type, b []byte) ([]byte, bool) {
		switch {
		case num == delivID && typ == protowire.BytesType:
			var ok bool
			d.DeliveryId, b, ok = sharedString(b)
			return b, ok
		case num == delivMatchBinary && typ == protowire.BytesType:
			x, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return b, false
			}
			d.MatchBinary = x[:len(x):len(x)]
			return b[n:], true
		case num == delivDeadline && typ == protowire.Fixed64Type:
			x, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return b, false
			}
			d.Deadline = int64(x)
			return b[n:], true
		case typ != protowire.VarintType:
			return b, false
		}
		x, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return b, false
		}
		switch num {
		case delivAttempt:
			d.Attempt = int32(x)
		case delivSeq:
			d.Seq = x
		case delivTick:
			d.Tick = x
		case delivReleases:
			d.Releases = int32(x)
		default:
			return b, false
		}
		return b[n:], true
	})
}

// decodeSettleResult decodes one SettleResult (its length-prefixed value) into s, as
// decodeDelivery does a Delivery.
func decodeSettleResult(v []byte, s *heraldv1.SettleResult) error {
	return decodeFields(v, s, func(num protowire.Number, typ protowire.Type, b []byte) ([]byte, bool) {
		switch {
		case num == resultID && typ == protowire.BytesType:
			var ok bool
			s.DeliveryId, b, ok = sharedString(b)
			return b, ok
		case num == resultOK && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return b, false
			}
			s.Ok = x != 0
			return b[n:], true
		}
		return b, false
	})
}

// decodeFields decodes the message m from v (its length-prefixed value) field by field
// with field, which reads the value of one field from b and returns what follows it,
// or false for a field it does not read; m is then decoded again, whole, by the
// generic decoder.
func decodeFields(v []byte, m proto.Message, field func(num protowire.Number, typ protowire.Type, b []byte) ([]byte, bool)) error {
	b, n := protowire.ConsumeBytes(v)
	if n < 0 {
		return protowire.ParseError(n)
	}
	for all := b; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		ok := false
		if n > 0 {
			b, ok = field(num, typ, b[n:])
		}
		if !ok {
			proto.Reset(m)
			return proto.Unmarshal(all, m)
		}
	}
	return nil
}

// sharedString reads a length-prefixed string of valid UTF-8 (as proto3 requires) that
// shares b's bytes; ok is false otherwise.
func sharedString(b []byte) (s string, rest []byte, ok bool) {
	x, n := protowire.ConsumeBytes(b)
	if n < 0 || !utf8.Valid(x) {
		return "", b, false
	}
	if len(x) > 0 {
		s = unsafe.String(&x[0], len(x))
	}
	return s, b[n:], true
}
