package rpcapi

import (
	"bytes"
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// gzipBomb is the gzip of n zero bytes: a few hundred kilobytes for hundreds of
// megabytes.
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zero := make([]byte, 1<<20)
	for written := 0; written < n; written += len(zero) {
		if _, err := zw.Write(zero); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGzipBombIsRefusedEarly: a gzip request body within the body limit that inflates
// far past it is refused (resource_exhausted), and the server stops inflating it at the
// limit instead of running through the whole of it to count its size.
func TestGzipBombIsRefusedEarly(t *testing.T) {
	const limit = 64 << 10
	svc := New(fakeNode(&fakeEngine{}, nil, nil), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxBodyBytes: limit})
	mux := http.NewServeMux()
	mux.Handle(svc.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	bomb := gzipBomb(t, 256<<20)
	if len(bomb) > 1<<20 {
		t.Fatalf("the bomb is %d bytes compressed", len(bomb))
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/herald.v1.Herald/Query", bytes.NewReader(bomb))
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "resource_exhausted") {
		t.Fatalf("a gzip bomb: %d %s, want resource_exhausted", resp.StatusCode, body)
	}

	// What the decompressor hands out stops just past the limit.
	d := &boundedGunzip{limit: limit}
	if err := d.Reset(bytes.NewReader(bomb)); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, d)
	if err == nil || n > limit+64<<10 {
		t.Fatalf("inflated %d bytes (%v); want an error shortly past %d", n, err, limit)
	}
}
