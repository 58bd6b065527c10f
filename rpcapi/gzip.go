package rpcapi

import (
	"compress/gzip"
	"errors"
	"io"

	"connectrpc.com/connect"
)

// boundedGunzip is the services' gzip decompressor: it stops with an error once a
// message inflates past limit bytes. Connect's own would inflate a message past its
// limit to the end to report its size — a gzip body within --max-body can inflate to
// gigabytes, and every byte would cost the server CPU before the refusal.
type boundedGunzip struct {
	zr    *gzip.Reader
	limit int64
	n     int64
}

// errInflated is what a message that inflates past the limit reads as.
var errInflated = errors.New("the compressed message inflates past the largest accepted request body")

func (b *boundedGunzip) Read(p []byte) (int, error) {
	if b.zr == nil {
		return 0, io.EOF
	}
	if b.n > b.limit {
		return 0, errInflated
	}
	n, err := b.zr.Read(p)
	b.n += int64(n)
	return n, err
}

func (b *boundedGunzip) Reset(r io.Reader) error {
	b.n = 0
	if b.zr == nil {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		b.zr = zr
		return nil
	}
	return b.zr.Reset(r)
}

func (b *boundedGunzip) Close() error {
	if b.zr == nil {
		return nil
	}
	return b.zr.Close()
}

// withBoundedGzip replaces the handlers' gzip with boundedGunzip, bounded at limit (a
// limit of 0 or less keeps Connect's).
func withBoundedGzip(limit int64) connect.HandlerOption {
	if limit <= 0 {
		return connect.WithOptions()
	}
	return connect.WithCompression("gzip",
		func() connect.Decompressor { return &boundedGunzip{limit: limit} },
		func() connect.Compressor { return gzip.NewWriter(io.Discard) })
}
