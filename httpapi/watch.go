package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// maxEventsPerFlush bounds one write of a stream: the events waiting are written
// together, up to this many, and flushed once.
const maxEventsPerFlush = 256

// DefaultPingInterval is how often a watch stream sends a ": ping" comment line when
// Options.PingInterval is zero; it keeps proxies from closing a quiet connection.
const DefaultPingInterval = 15 * time.Second

// resumeAfter reads the position a client resumes after: the Last-Event-ID header that
// SSE clients send on reconnect, or the after query parameter.
func resumeAfter(r *http.Request) (uint64, error) {
	raw := r.Header.Get("Last-Event-ID")
	if v := r.URL.Query().Get("after"); v != "" {
		raw = v
	}
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(raw), 10, 64)
	if err != nil {
		return 0, herald.Errorf(herald.CodeMalformedRequest, "the resume position must be a seq (a non-negative integer), got %q", raw)
	}
	return n, nil
}

// wireEvent is the JSON form of one stream event:
// {"type":"consumed","match":{...},"delivery_id":"...","attempt":n,"seq":N,"tick":N}.
// Timeout and error events carry code and message instead of (or besides) a match.
type wireEvent struct {
	Type  string        `json:"type"`
	Match *herald.Value `json:"match,omitempty"`
	Prev  *herald.Value `json:"prev,omitempty"`
	Count int           `json:"count,omitempty"`
	// Uncommitted marks a visibility: immediate event from the watcher's own open
	// transaction.
	Uncommitted bool        `json:"uncommitted,omitempty"`
	DeliveryID  string      `json:"delivery_id,omitempty"`
	Attempt     int         `json:"attempt,omitempty"`
	Releases    int         `json:"releases,omitempty"`
	Seq         uint64      `json:"seq"`
	Tick        uint64      `json:"tick"`
	Deadline    *time.Time  `json:"deadline,omitempty"`
	Code        herald.Code `json:"code,omitempty"`
	Message     string      `json:"message,omitempty"`
}

func toWire(ev herald.Event) wireEvent {
	out := wireEvent{
		Type:        ev.Type,
		DeliveryID:  ev.DeliveryID,
		Attempt:     ev.Attempt,
		Releases:    ev.Releases,
		Seq:         ev.Seq,
		Tick:        ev.Tick,
		Code:        ev.Code,
		Message:     ev.Message,
		Count:       ev.Count,
		Uncommitted: ev.Uncommitted,
	}
	if !ev.Prev.IsNull() {
		p := ev.Prev
		out.Prev = &p
	}
	if ev.Type == herald.EventConsumed || !ev.Match.IsNull() {
		m := ev.Match
		out.Match = &m
	}
	if !ev.Deadline.IsZero() {
		d := ev.Deadline.UTC()
		out.Deadline = &d
	}
	if ev.Error != nil {
		if out.Code == "" {
			out.Code = ev.Error.Code
		}
		if out.Message == "" {
			out.Message = ev.Error.Message
		}
	}
	return out
}

// appendSSE appends ev in the server-sent events format: an event line naming the type
// and one data line holding the JSON (which never contains a raw newline).
func appendSSE(buf *bytes.Buffer, ev *herald.Event) error {
	if ev.Enc != nil {
		// Shared by identical watches: encoded once for all of them.
		form := herald.FormSSE
		if ev.Last {
			form = herald.FormSSELast
		}
		b, err := ev.Enc.Get(form, func() ([]byte, error) {
			var one bytes.Buffer
			err := encodeSSE(&one, ev)
			return one.Bytes(), err
		})
		if err != nil {
			return err
		}
		buf.Write(b)
		return nil
	}
	return encodeSSE(buf, ev)
}

// pingComment is the SSE comment a quiet stream sends every ping interval.
var pingComment = []byte(": ping\n\n")

// encodeEvent appends ev to buf in the server-sent events format; false when the
// stream must end after it (an error event, whose code rec, the request's recorder if
// any, then reports, or an event that cannot be encoded).
func (h *Handler) encodeEvent(buf *bytes.Buffer, ev *herald.Event, rec *recorder) bool {
	if err := appendSSE(buf, ev); err != nil {
		h.log.Error("encoding a watch event", "err", err)
		return false
	}
	if ev.Type == herald.EventError {
		if rec != nil {
			rec.code = toWire(*ev).Code
		}
		return false
	}
	return true
}

// encodeSSE writes one event in the server-sent events format.
func encodeSSE(buf *bytes.Buffer, ev *herald.Event) error {
	if ev.Last && ev.Seq > 0 {
		// The last watch-mode event of a position carries it as the SSE id, so a client
		// reconnecting with Last-Event-ID resumes after whole positions only.
		buf.WriteString("id: ")
		buf.WriteString(strconv.FormatUint(ev.Seq, 10))
		buf.WriteString("\n")
	}
	buf.WriteString("event: ")
	buf.WriteString(ev.Type)
	buf.WriteString("\ndata: ")
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(toWire(*ev)); err != nil { // Encode ends the line
		return err
	}
	buf.WriteString("\n")
	return nil
}

// parseParams decodes the params query parameter: a JSON object of parameter values.
func parseParams(raw string) (map[string]herald.Value, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, herald.Errorf(herald.CodeMalformedRequest, "params must be a JSON object: %v", err)
	}
	if dec.More() {
		return nil, herald.Errorf(herald.CodeMalformedRequest, "params: unexpected data after the JSON object")
	}
	params := make(map[string]herald.Value, len(obj))
	for name, x := range obj {
		v, err := herald.FromJSON(x)
		if err != nil {
			return nil, herald.Errorf(herald.CodeMalformedRequest, "parameter $%s: %v", name, err)
		}
		params[name] = v
	}
	return params, nil
}

// CloseStreams ends every open watch stream (each releases its leases) and makes new
// ones end at once. The server calls it when it starts shutting down, so long-lived
// streams do not hold up the drain.
func (h *Handler) CloseStreams() { h.stopStreams() }

// watch serves GET /v1/watch: one consume-mode WATCH statement streamed as server-sent
// events for as long as the connection lives.
func (h *Handler) watch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	query := q.Get("query")
	if !utf8.ValidString(query) || !utf8.ValidString(q.Get("params")) {
		writeError(w, herald.Errorf(herald.CodeMalformedRequest, "the query and params parameters must be valid UTF-8"))
		return
	}
	if strings.TrimSpace(query) == "" {
		writeError(w, herald.Errorf(herald.CodeEmptyQuery, "the query parameter is empty; expected a WATCH … [mode: consume] statement"))
		return
	}
	params, err := parseParams(q.Get("params"))
	if err != nil {
		writeError(w, err)
		return
	}
	after, err := resumeAfter(r)
	if err != nil {
		writeError(w, err)
		return
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stopAfter := context.AfterFunc(h.streams, cancel)
	defer stopAfter()

	st, err := h.b.Open(ctx, broker.StreamRequest{SessionID: q.Get("session"), Query: query, Params: params, After: after})
	if err != nil {
		writeError(w, err)
		return
	}
	consume := st.Mode() == broker.ModeConsume
	// Closing releases the stream's unsettled leases at once.
	defer st.Close()

	// The timer exists before the headers go out, so a client that has the headers
	// knows the ping schedule has started.
	ping := h.clock.NewTimer(h.ping)
	defer ping.Stop()

	out, err := openEventStream(w, r, cancel)
	if err != nil {
		return
	}
	defer out.close()

	rec, _ := w.(*recorder) // an error event's code goes to the request's log and metrics
	if !consume && out.conn != nil {
		if tw, ok := newTryWriter(out.conn); ok {
			hub := h.hubFor()
			h.serveHubbed(ctx, hub, hub.join(st, out, tw, rec), ping)
			return
		}
	}

	var buf bytes.Buffer
	var batch []herald.Event
	var last time.Time // when the last write went out, for the linger
	events := st.Events()
	// send writes ev and whatever else is waiting by then (up to a bound), then flushes
	// once. A busy watch-mode stream gathers during the linger after its last write, so
	// it costs one write per batch of events; the first event after a quiet spell goes
	// out at once. Encoding takes a send slot (and, in watch mode, the fan-out's CPU budget),
	// so that a large fan-out leaves CPU to the writers; the write holds neither.
	send := func(ev herald.Event) bool {
		if !consume && !h.lingered(ctx, last) {
			return false // a consume stream's deliveries never wait: leases are at stake
		}
		release, ok := h.frameSlot(ctx, !consume)
		if !ok {
			return false
		}
		buf.Reset()
		var closed bool
		batch, closed = st.Take(append(batch[:0], ev), maxEventsPerFlush)
		more := !closed
		for i := range batch {
			if !h.encodeEvent(&buf, &batch[i], rec) {
				more = false
				break
			}
		}
		release()
		clear(batch)
		if err := out.write(buf.Bytes()); err != nil {
			return false
		}
		if h.linger > 0 {
			last = h.clock.Now()
		}
		return more
	}

	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok || !send(ev) {
				return
			}
		case <-st.Done():
			// Pass on what the stream buffered before it ended, then end too.
			for {
				select {
				case ev, ok := <-events:
					if !ok || !send(ev) {
						return
					}
				default:
					return
				}
			}
		case <-ping.C():
			ping.Reset(h.ping)
			if out.write(pingComment) != nil {
				return
			}
		}
	}
}
