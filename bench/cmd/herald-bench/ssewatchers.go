package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/herald-mq/herald/bench"
	heraldbench "github.com/herald-mq/herald/bench/herald"
)

// The fan-out mode's server-sent-event watchers: what a browser or curl gets, one
// HTTP/1.1 connection per stream, each reading GET /v1/watch. They count the "added"
// events by their event line and read the send time of one event in sseLagSample, so
// that reading a million events a second costs the watcher process little.

// sseLagSample is how often an SSE watcher reads an event's send time for the lag.
const sseLagSample = 16

// openSSEWatchers opens n server-sent-event streams on the benchmark type.
func openSSEWatchers(ctx context.Context, base string, n int) (*fanout, error) {
	fan := &fanout{failed: make(chan error, n)}
	query := "WATCH m: " + heraldbench.Type + " [initial: none] RETURN m.body AS body"
	u := base + "/v1/watch?query=" + url.QueryEscape(query)
	tr := &http.Transport{
		DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: n,
		DisableCompression:  true,
	}
	hc := &http.Client{Transport: tr}
	sctx, cancel := context.WithCancel(ctx)
	fan.stopSSE = func() { cancel(); tr.CloseIdleConnections() }
	for i := range n {
		req, err := http.NewRequestWithContext(sctx, http.MethodGet, u, nil)
		if err != nil {
			fan.close()
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			fan.close()
			return nil, fmt.Errorf("SSE watch %d: %w", i, err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			fan.close()
			return nil, fmt.Errorf("SSE watch %d: %s: %s", i, resp.Status, b)
		}
		fan.wg.Go(func() { fan.readSSE(sctx, resp.Body) })
	}
	return fan, nil
}

var (
	sseAdded = []byte("event: added")
	sseGap   = []byte("event: gap")
	sseBody  = []byte(`"body":"`)
	sseCount = []byte(`"count":`)
)

// readSSE follows one stream until it ends or ctx does.
func (f *fanout) readSSE(ctx context.Context, body io.ReadCloser) {
	defer body.Close()
	var lags []time.Duration
	defer func() {
		f.mu.Lock()
		f.lagList = append(f.lagList, lags...)
		f.mu.Unlock()
	}()
	r := bufio.NewReaderSize(body, 64<<10)
	var seen int
	var kind []byte
	var added int64 // counted here, added to f.delivered before each read of the socket
	defer func() { f.delivered.Add(added) }()
	for {
		if added > 0 && r.Buffered() == 0 {
			f.delivered.Add(added) // one shared add a read, not one an event
			added = 0
		}
		line, err := r.ReadSlice('\n')
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, io.EOF) {
				f.failed <- err
			}
			return
		}
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			kind = kind[:0]
			kind = append(kind, bytes.TrimSpace(line)...)
		case bytes.HasPrefix(line, []byte("data: ")):
			switch {
			case bytes.Equal(kind, sseAdded):
				added++
				if seen++; seen%sseLagSample == 0 {
					if i := bytes.Index(line, sseBody); i >= 0 {
						if _, sent, err := bench.ParsePayload(line[i+len(sseBody):]); err == nil {
							lags = append(lags, time.Since(sent))
						}
					}
				}
			case bytes.Equal(kind, sseGap):
				if i := bytes.Index(line, sseCount); i >= 0 {
					var n int64
					_, _ = fmt.Sscanf(string(line[i+len(sseCount):]), "%d", &n)
					f.gaps.Add(n)
				}
			}
		}
	}
}
