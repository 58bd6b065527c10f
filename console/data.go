package console

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/herald-mq/herald"
)

// What the pages show is read with statements over the system types, as the request's
// principal: a principal that may not read _Watch or _DeadLetter sees that section's
// refusal, not its figures.

// Statements the pages run.
const (
	stmtGroups = `MATCH w: _Watch WHERE w.mode = "consume" RETURN w.id, w.group, w.pattern, w.status,
 w.events_delivered, w.events_pending, w.ack_timeout, w.max_redeliveries, w.dead_letter, w.last_event_at`
	stmtGroupLetters = `MATCH w: _Watch, _watch_dead_letter(w, d), d: _DeadLetter RETURN w.id, COUNT(d)`
	stmtStreams      = `MATCH w: _Watch WHERE w.mode = "watch" RETURN w.id, w.pattern, w.status, w.position,
 w.events_delivered, w.events_pending, w.handle, w.delivery, w.last_event_at`
	stmtCounts  = `MATCH w: _Watch RETURN COUNT(w WHERE w.mode = "consume"), COUNT(w WHERE w.mode = "watch")`
	stmtLetters = `MATCH d: _DeadLetter RETURN COUNT(d)`
)

// group is a consume group as the queues page shows it.
type group struct {
	ID          string `json:"id"`
	Group       string `json:"group"`
	Pattern     string `json:"pattern"`
	Status      string `json:"status"`
	Subject     string `json:"subject"`  // the type of the statement's subject
	Messages    int64  `json:"messages"` // nodes of that type: ready, in flight and delayed (-1: not readable)
	Ready       int64  `json:"ready"`    // Messages less InFlight (-1: not readable)
	InFlight    int64  `json:"in_flight"`
	Delivered   int64  `json:"delivered"`
	DeadLetters int64  `json:"dead_letters"`
	AckTimeout  string `json:"ack_timeout"`
	MaxRedeliv  int64  `json:"max_redeliveries"`
	DeadLetter  string `json:"dead_letter,omitempty"`
	LastEvent   string `json:"last_event_at,omitempty"`
	// From the node's herald_consume_group_* metrics, for a group whose subject type the
	// principal may read (-1: not readable, or no series for the group).
	Leased       int64 `json:"leased"`
	Delayed      int64 `json:"delayed"`
	OldestReady  int64 `json:"oldest_ready_seconds"`
	Acked        int64 `json:"acked"`
	Nacked       int64 `json:"nacked"`
	DeadLettered int64 `json:"dead_lettered"`
}

// stream is a watch-mode stream as the streams page shows it.
type stream struct {
	ID        string `json:"id"`
	Pattern   string `json:"pattern"`
	Status    string `json:"status"`
	Handle    string `json:"handle,omitempty"`
	Delivery  string `json:"delivery"`
	Position  int64  `json:"position"`
	Lag       int64  `json:"lag"` // while events wait for the client, commits from its position to the head
	Delivered int64  `json:"delivered"`
	Pending   int64  `json:"pending"`
	LastEvent string `json:"last_event_at,omitempty"`
}

// subjectRE reads the subject's type from a WATCH statement's text ("WATCH j: Job …",
// with or without a handle).
var subjectRE = regexp.MustCompile(`(?is)^\s*(?:[A-Za-z_]\w*\s*=\s*)?WATCH\s+[A-Za-z_]\w*\s*:\s*([A-Za-z_]\w*)`)

// exec runs one statement as the request's principal and returns its result and the
// head position the answer was read at.
func (h *Handler) exec(ctx context.Context, q string, params map[string]herald.Value) (herald.Result, uint64, error) {
	resp, err := h.b.Exec(ctx, "", q, params)
	if err != nil {
		return herald.Result{}, 0, err
	}
	if len(resp.Results) == 0 {
		return herald.Result{}, resp.Seq, nil
	}
	return resp.Results[len(resp.Results)-1], resp.Seq, nil
}

// groups reads the consume groups with their figures.
func (h *Handler) groups(ctx context.Context) ([]group, error) {
	res, _, err := h.exec(ctx, stmtGroups, nil)
	if err != nil {
		return nil, err
	}
	letters := map[string]int64{}
	if lres, _, err := h.exec(ctx, stmtGroupLetters, nil); err == nil {
		for _, row := range lres.Rows {
			if len(row) < 2 {
				continue
			}
			letters[row[0].AsString()] = row[1].AsInt()
		}
	}
	counts := map[string]int64{}
	series := h.groupSeries()
	out := make([]group, 0, len(res.Rows))
	for _, row := range res.Rows {
		if len(row) < 10 {
			continue
		}
		g := group{ID: row[0].AsString(), Group: row[1].AsString(), Pattern: row[2].AsString(), Status: row[3].AsString(),
			Delivered: row[4].AsInt(), InFlight: row[5].AsInt(), MaxRedeliv: row[7].AsInt(), DeadLetter: row[8].AsString()}
		if !row[6].IsNull() {
			g.AckTimeout = row[6].AsDuration().String()
		}
		if !row[9].IsNull() {
			g.LastEvent = row[9].AsTime().Format(time.RFC3339)
		}
		g.DeadLetters = letters[g.ID]
		if m := subjectRE.FindStringSubmatch(g.Pattern); m != nil {
			g.Subject = m[1]
			n, seen := counts[g.Subject]
			if !seen {
				n = h.count(ctx, g.Subject)
				counts[g.Subject] = n
			}
			g.Messages, g.Ready = n, max(n-g.InFlight, 0)
			if n < 0 { // the principal may not read the subject's type
				g.Ready = -1
			}
		}
		g.Leased, g.Delayed, g.OldestReady, g.Acked, g.Nacked, g.DeadLettered = -1, -1, -1, -1, -1, -1
		if s, ok := series[groupKey{g.Group, g.Subject}]; ok && g.Subject != "" && g.Messages >= 0 {
			g.Leased, g.Delayed, g.OldestReady, g.Acked, g.Nacked, g.DeadLettered = s.leased, s.delayed, s.oldest, s.acked, s.nacked, s.deadLettered
		}
		out = append(out, g)
	}
	return out, nil
}

// groupKey names a consume group's series: its group and subject type labels.
type groupKey struct{ group, typ string }

// groupFigures are a group's figures from its metric series.
type groupFigures struct {
	leased, delayed, oldest, acked, nacked, deadLettered int64
}

// groupSeries reads the herald_consume_group_* series of the node's metrics by group and
// type (summed over the queue label; the oldest age is the largest). Series that sum
// groups (type "") are left out. Nothing without a metrics source.
func (h *Handler) groupSeries() map[groupKey]*groupFigures {
	if h.metrics == nil {
		return nil
	}
	out := map[groupKey]*groupFigures{}
	for _, m := range h.metrics() {
		if !strings.HasPrefix(m.Name, "herald_consume_group_") || m.Histogram != nil {
			continue
		}
		var k groupKey
		for _, l := range m.Labels {
			switch l.Name {
			case "group":
				k.group = l.Value
			case "type":
				k.typ = l.Value
			}
		}
		if k.group == "" || k.typ == "" {
			continue
		}
		f := out[k]
		if f == nil {
			f = &groupFigures{}
			out[k] = f
		}
		v := int64(m.Value)
		switch strings.TrimPrefix(m.Name, "herald_consume_group_") {
		case "leased":
			f.leased += v
		case "delayed":
			f.delayed += v
		case "oldest_ready_seconds":
			f.oldest = max(f.oldest, v)
		case "acked_total":
			f.acked += v
		case "nacked_total":
			f.nacked += v
		case "dead_lettered_total":
			f.deadLettered += v
		}
	}
	return out
}

// count is the number of nodes of typ (-1 when the principal may not read them).
func (h *Handler) count(ctx context.Context, typ string) int64 {
	res, _, err := h.exec(ctx, "MATCH m: "+typ+" RETURN COUNT(m)", nil)
	if err != nil || len(res.Rows) == 0 {
		return -1
	}
	return res.Rows[0][0].AsInt()
}

// streamsOf reads the watch-mode streams and their distance from the head.
func (h *Handler) streamsOf(ctx context.Context) ([]stream, uint64, error) {
	res, head, err := h.exec(ctx, stmtStreams, nil)
	if err != nil {
		return nil, 0, err
	}
	out := make([]stream, 0, len(res.Rows))
	for _, row := range res.Rows {
		if len(row) < 9 {
			continue
		}
		s := stream{ID: row[0].AsString(), Pattern: row[1].AsString(), Status: row[2].AsString(), Position: row[3].AsInt(),
			Delivered: row[4].AsInt(), Pending: row[5].AsInt(), Handle: row[6].AsString(), Delivery: row[7].AsString()}
		if s.Pending > 0 { // events wait for the client: it is as far behind as the oldest
			s.Lag = max(int64(head)-s.Position, 0)
		}
		if !row[8].IsNull() {
			s.LastEvent = row[8].AsTime().Format(time.RFC3339)
		}
		out = append(out, s)
	}
	return out, head, nil
}

// figures is the console's JSON endpoint, which the pages poll for their live figures
// and sparklines.
type figures struct {
	Seq         uint64   `json:"seq"`
	Time        string   `json:"time"`
	Groups      []group  `json:"groups"`
	Streams     []stream `json:"streams"`
	DeadLetters int64    `json:"dead_letters"`
	Errors      []string `json:"errors,omitempty"`
}

func (h *Handler) figures(ctx context.Context) figures {
	f := figures{Time: time.Now().UTC().Format(time.RFC3339)}
	f.Seq, _ = h.b.Position()
	var err error
	if f.Groups, err = h.groups(ctx); err != nil {
		f.Errors = append(f.Errors, err.Error())
	}
	if f.Streams, _, err = h.streamsOf(ctx); err != nil {
		f.Errors = append(f.Errors, err.Error())
	}
	if res, _, err := h.exec(ctx, stmtLetters, nil); err == nil && len(res.Rows) > 0 {
		f.DeadLetters = res.Rows[0][0].AsInt()
	} else if err != nil {
		f.Errors = append(f.Errors, err.Error())
	}
	return f
}

// showValue prints a value for a table cell: strings bare, everything else as JSON.
func showValue(v herald.Value) string {
	switch v.Kind() {
	case herald.KindNull:
		return ""
	case herald.KindString:
		return v.AsString()
	case herald.KindTimestamp:
		return v.AsTime().Format(time.RFC3339Nano)
	case herald.KindDuration:
		return v.AsDuration().String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v.String()
	}
	return string(b)
}

// showFig prints a figure, or a dash for one the principal may not read (-1).
func showFig(n int64) string {
	if n < 0 {
		return "—"
	}
	return strconv.FormatInt(n, 10)
}

// showAge prints how long ago an RFC 3339 time was, to the second.
func showAge(at string) string {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return ""
	}
	return time.Since(t).Round(time.Second).String()
}
