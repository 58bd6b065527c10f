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
// events by their event line and read the send time of one event in lagSample, so
// that reading a million events a second costs the watcher process little.

// lagSample is how often a watcher (SSE or WatchMany) reads an event's send time for
// the lag.
const lagSample = 16

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
	sseEvent = []byte("event: ")
	sseData  = []byte("data: ")
	sseBody  = []byte(`"body":"`)
	sseCount = []byte(`"count":`)
)

// The kinds of event readSSE tells apart.
const (
	sseOther = iota
	sseAddedKind
	sseGapKind
)

// sseKind returns the kind an "event: " line names, by the first letters of its name,
// so that reading a million lines a second costs the watcher process no comparison of
// whole names: the server sends no other event whose name starts with "ad" or "ga".
func sseKind(line []byte) int {
	name := line[len(sseEvent):]
	switch {
	case len(name) >= 2 && name[0] == 'a' && name[1] == 'd':
		return sseAddedKind
	case len(name) >= 2 && name[0] == 'g' && name[1] == 'a':
		return sseGapKind
	}
	return sseOther
}

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
	kind := sseOther
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
		// Lines are told apart by their first byte: "id: ", "event: ", "data: ", ": "
		// (a ping) or the empty line ending an event.
		switch {
		case line[0] == '\n':
			kind = sseOther
		case line[0] == 'e' && bytes.HasPrefix(line, sseEvent):
			kind = sseKind(line)
		case line[0] == 'd' && kind != sseOther && bytes.HasPrefix(line, sseData):
			f.countSSE(line, kind, &added, &seen, &lags)
		}
	}
}

// countSSE counts the data line of an added event (reading its send time for the lag
// every lagSample events) or of a gap (its count).
func (f *fanout) countSSE(line []byte, kind int, added *int64, seen *int, lags *[]time.Duration) {
	if kind == sseGapKind {
		if i := bytes.Index(line, sseCount); i >= 0 {
			var n int64
			_, _ = fmt.Sscanf(string(line[i+len(sseCount):]), "%d", &n)
			f.gaps.Add(n)
		}
		return
	}
	*added++
	if *seen++; *seen%lagSample == 0 {
		if i := bytes.Index(line, sseBody); i >= 0 {
			if _, sent, err := bench.ParsePayload(line[i+len(sseBody):]); err == nil {
				*lags = append(*lags, time.Since(sent))
			}
		}
	}
}
