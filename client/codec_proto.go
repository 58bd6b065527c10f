package client

import (
	"google.golang.org/protobuf/proto"

	"github.com/herald-mq/herald"
)

// ProtoAttr is the attribute in which the Proto codec keeps a message.
const ProtoAttr = "payload"

// Proto is a codec for protocol buffers: Marshal keeps a proto.Message in its binary
// form as one Bytes attribute, ProtoAttr, and Unmarshal reads it back into a
// proto.Message. A WATCH sees the bytes, not the message's fields: where a consumer
// filters or orders by a field, publish that field beside the payload (Publish's map
// form) or use JSON.
var Proto Codec = protoCodec{}

type protoCodec struct{}

func (protoCodec) Marshal(v any) (map[string]herald.Value, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, codecError("marshal", "", "a %T is not a proto.Message", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, codecError("marshal", "", "%v", err)
	}
	return map[string]herald.Value{ProtoAttr: herald.Bytes(b)}, nil
}

func (protoCodec) Unmarshal(match map[string]any, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return codecError("decode", "", "a %T is not a proto.Message", v)
	}
	b, ok := match[ProtoAttr].([]byte)
	if !ok {
		return codecError("decode", ProtoAttr, "want Bytes, found %s", kindOfPlain(match[ProtoAttr]))
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return codecError("decode", ProtoAttr, "%v", err)
	}
	return nil
}
