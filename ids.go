package herald

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"sync/atomic"
	"time"
)

// idAlphabet is base32 with its digits first, so that encodings of equal length sort as
// the bytes they encode: generated ids sort in the order they were made.
const idAlphabet = "234567abcdefghijklmnopqrstuvwxyz"

var idEncoding = base32.NewEncoding(idAlphabet).WithPadding(base32.NoPadding)

// idLen is the length of an id after its prefix: 13 bytes in unpadded base32.
const idLen = (13*8 + 4) / 5

// lastID is the time-ordered part of the last generated id: Unix milliseconds shifted
// left 16 bits, plus a counter for ids made in the same millisecond.
var lastID atomic.Uint64

// NewID returns a new node id: prefix (a lower-case letter or two, so the id can be
// written `#id`), then 64 time-ordered bits and 40 random bits in base32. Ids made by one
// process sort in the order they were made, so the nodes a commit creates keep their
// order, and records of nodes created together sit together in the store.
func NewID(prefix string) NodeID {
	now := uint64(time.Now().UnixMilli()) << 16
	var v uint64
	for {
		last := lastID.Load()
		v = max(last+1, now)
		if lastID.CompareAndSwap(last, v) {
			break
		}
	}
	var b [13]byte
	binary.BigEndian.PutUint64(b[:8], v)
	_, _ = rand.Read(b[8:])
	var out [64]byte // on the stack: the id is one allocation, its string
	if n := len(prefix) + idLen; n <= len(out) {
		copy(out[:], prefix)
		idEncoding.Encode(out[len(prefix):n], b[:])
		return NodeID(out[:n])
	}
	return NodeID(prefix + idEncoding.EncodeToString(b[:]))
}
