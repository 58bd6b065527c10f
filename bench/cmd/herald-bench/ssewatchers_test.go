package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald/bench"
)

// readSSE counts added events and gap counts, whatever else the stream carries (ids,
// pings, other events, lines split across reads), and reads the lag of every
// lagSample-th added event.
func TestReadSSECountsAddedAndGaps(t *testing.T) {
	var b strings.Builder
	sent := time.Now().Add(-time.Second)
	for i := range 2 * lagSample {
		fmt.Fprintf(&b, "id: %d\nevent: added\ndata: {\"type\":\"added\",\"match\":{\"body\":\"%s\"},\"seq\":%d}\n\n", i+1, bench.NewPayload(uint64(i), sent, 64), i+1)
		if i == 3 {
			b.WriteString(": ping\n\nevent: gap\ndata: {\"type\":\"gap\",\"count\":7,\"seq\":4}\n\n")
			b.WriteString("event: heartbeat\ndata: {\"type\":\"heartbeat\",\"seq\":4}\n\n")
			b.WriteString("event: removed\ndata: {\"type\":\"removed\",\"match\":{\"body\":\"x\"},\"seq\":4}\n\n")
		}
	}
	f := &fanout{failed: make(chan error, 1)}
	f.readSSE(context.Background(), io.NopCloser(&slowReader{s: b.String()}))
	if got := f.delivered.Load(); got != 2*lagSample {
		t.Errorf("counted %d added events, want %d", got, 2*lagSample)
	}
	if got := f.gaps.Load(); got != 7 {
		t.Errorf("counted a gap of %d, want 7", got)
	}
	lags := f.lags()
	if len(lags) != 2 {
		t.Fatalf("read %d lags, want 2", len(lags))
	}
	for _, l := range lags {
		if l < time.Second {
			t.Errorf("a lag of %v, want at least the second since the payload's send time", l)
		}
	}
}

// slowReader hands out its text 7 bytes at a time, so that lines span reads.
type slowReader struct{ s string }

func (r *slowReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 7)], r.s)
	r.s = r.s[n:]
	return n, nil
}
