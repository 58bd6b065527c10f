package delivery_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/pebblestore"
)

// Helpers of the model-based test (model_test.go): a small world (engine on pebble over
// an in-memory filesystem, a manual clock, the delivery service), consume specs rendered
// as WATCH statements, and queries of the graph.

var modelLog = slog.New(slog.NewTextHandler(io.Discard, nil))

var modelEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// tb is what the helpers need from *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// world is an engine and a delivery service over one in-memory filesystem, so it can be
// restarted.
type world struct {
	t   tb
	fs  vfs.FS
	clk *clock.Manual
	eng *engine.Engine
	svc *delivery.Service
}

func newWorld(t tb) *world {
	w := &world{t: t, fs: vfs.NewMem(), clk: clock.NewManual(modelEpoch)}
	w.open()
	return w
}

func (w *world) open() {
	w.t.Helper()
	st, err := pebblestore.Open("db", pebblestore.Options{FS: w.fs, Logger: modelLog})
	if err != nil {
		w.t.Fatalf("open store: %v", err)
	}
	// No periodic _Watch counter commits: the model checks what each step delivered,
	// and an unrelated commit landing during that check would start a round of its own.
	w.eng, err = engine.Open(context.Background(), engine.Config{Backend: st, Clock: w.clk, Logger: modelLog, Layer0Interval: 1000 * time.Hour})
	if err != nil {
		w.t.Fatalf("open engine: %v", err)
	}
	w.svc = delivery.New(delivery.Config{Engine: w.eng, Logger: modelLog})
	if err := w.svc.Start(context.Background()); err != nil {
		w.t.Fatalf("start delivery: %v", err)
	}
}

func (w *world) close() {
	if w.svc == nil {
		return
	}
	_ = w.svc.Stop(context.Background())
	_ = w.eng.Close(context.Background())
	w.svc, w.eng = nil, nil
}

// restart closes the engine and the service, moves the clock by down while the server is
// down, and opens both again on the same filesystem.
func (w *world) restart(down time.Duration) {
	w.close()
	w.clk.Advance(down)
	w.open()
}

func (w *world) now() time.Time { return w.clk.Now() }

// exec runs a query and fails the test on error.
func (w *world) exec(q string, params map[string]herald.Value) *engine.Response {
	w.t.Helper()
	resp, err := w.eng.Exec(context.Background(), "", q, params)
	if err != nil {
		w.t.Fatalf("%s: %v", q, err)
	}
	return resp
}

// rows runs a one-statement query and returns its rows as strings.
func (w *world) rows(q string) [][]herald.Value {
	w.t.Helper()
	resp := w.exec(q, nil)
	if len(resp.Results) != 1 {
		w.t.Fatalf("%s: %d results", q, len(resp.Results))
	}
	return resp.Results[0].Rows
}

func (w *world) consume(query string) delivery.Stream {
	w.t.Helper()
	st, err := w.svc.Consume(context.Background(), "", query, nil)
	if err != nil {
		w.t.Fatalf("consume %s: %v", query, err)
	}
	return st
}

// drain returns the events waiting on a stream without blocking, and whether the stream
// has ended.
func drain(st delivery.Stream) (evs []delivery.Event, closed bool) {
	for {
		select {
		case ev, ok := <-st.Events():
			if !ok {
				return evs, true
			}
			evs = append(evs, ev)
		default:
			return evs, false
		}
	}
}

// matchID is the node id in a consumed event's match (the watches return the node).
func matchID(ev delivery.Event) string {
	if ev.Match.Kind() != herald.KindMap {
		return ""
	}
	return ev.Match.MapGet("id").AsString()
}

// codeOf is the Herald error code of err ("" for nil).
func codeOf(err error) herald.Code {
	if err == nil {
		return ""
	}
	return herald.CodeOf(err)
}

// mbackoff is a watch's backoff as the model sees it.
type mbackoff struct {
	kind    string // "", "fixed", "exponential"
	initial time.Duration
	max     time.Duration // exponential only; factor is 2
}

func (b mbackoff) String() string {
	switch b.kind {
	case "fixed":
		return fmt.Sprintf("fixed(%s)", dur(b.initial))
	case "exponential":
		return fmt.Sprintf("exponential(%s, 2.0, %s)", dur(b.initial), dur(b.max))
	}
	return "none"
}

// delay is the wait after failed attempt n: initial·2^(n-1) capped at max, or initial.
func (b mbackoff) delay(n int) time.Duration {
	switch b.kind {
	case "fixed":
		return b.initial
	case "exponential":
		d := b.initial
		for i := 1; i < n && d < b.max; i++ {
			d *= 2
		}
		return min(d, b.max)
	}
	return 0
}

// dur writes a whole number of seconds as the query language does.
func dur(d time.Duration) string { return fmt.Sprintf("%ds", int(d/time.Second)) }

// mspec is a consume watch's options; a named group's members all use it, and each solo
// consumer is a group of one.
type mspec struct {
	name        string
	group       string // "" for solo consumers
	ackTimeout  time.Duration
	maxRedeliv  int
	backoff     mbackoff
	priority    bool   // ordering: attribute(m.priority DESC)
	fairness    bool   // fairness: m.tenant, weight: m.w
	availableAt bool   // available_at: m.due
	deadLetter  string // "", "dlq" (exists), "nowhere" (missing)
	buffer      int
}

func (s *mspec) statement() string {
	opts := []string{"mode: consume"}
	if s.group != "" {
		opts = append(opts, fmt.Sprintf("group: %q", s.group))
	}
	opts = append(opts, "ack_timeout: "+dur(s.ackTimeout), fmt.Sprintf("max_redeliveries: %d", s.maxRedeliv))
	if s.backoff.kind != "" {
		opts = append(opts, "backoff: "+s.backoff.String())
	}
	if s.priority {
		opts = append(opts, "ordering: attribute(m.priority DESC)")
	}
	if s.fairness {
		opts = append(opts, "fairness: m.tenant", "weight: m.w")
	}
	if s.availableAt {
		opts = append(opts, "available_at: m.due")
	}
	if s.deadLetter != "" {
		opts = append(opts, "dead_letter: #"+s.deadLetter)
	}
	opts = append(opts, fmt.Sprintf("buffer: %d", s.buffer))
	return "WATCH m: Msg [" + strings.Join(opts, ", ") + "] RETURN m"
}

// letterRow is one _DeadLetter node.
type letterRow struct {
	subject  string
	reason   string
	attempts int
	dest     string
}

func (l letterRow) String() string {
	return fmt.Sprintf("%s/%s/%d/%s", l.subject, l.reason, l.attempts, l.dest)
}

func sortedStrings[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	sort.Strings(out)
	return out
}

// letters reads the dead letters in the graph.
func (w *world) letters() []letterRow {
	w.t.Helper()
	var out []letterRow
	for _, r := range w.rows(`MATCH d: _DeadLetter RETURN d.subject_id, d.failure_reason, d.delivery_attempts, d.dead_letter`) {
		l := letterRow{subject: r[0].AsString(), reason: r[1].AsString(), attempts: int(r[2].AsInt())}
		if r[3].Kind() == herald.KindString {
			l.dest = r[3].AsString()
		}
		out = append(out, l)
	}
	return out
}

// deliveryRow is one delivery record: a message's durable delivery state.
type deliveryRow struct {
	subject   string
	attempts  int
	releases  int
	leased    bool
	handle    delivery.Handle // the lease's handle (the hash of its delivery id)
	deadline  time.Time
	notBefore time.Time
}

func (w *world) deliveries() map[string]deliveryRow {
	w.t.Helper()
	recs, err := delivery.Records(w.eng)
	if err != nil {
		w.t.Fatalf("delivery records: %v", err)
	}
	out := map[string]deliveryRow{}
	for _, r := range recs {
		out[string(r.Subject)] = deliveryRow{subject: string(r.Subject), attempts: r.Attempts, releases: r.Releases, leased: r.Leased,
			handle: r.Handle, deadline: r.Deadline, notBefore: r.NotBefore}
	}
	return out
}

// messageIDs reads the ids of the Msg nodes in the graph.
func (w *world) messageIDs() []string {
	w.t.Helper()
	var out []string
	for _, r := range w.rows(`MATCH m: Msg RETURN m.id`) {
		out = append(out, r[0].AsString())
	}
	sort.Strings(out)
	return out
}

type engineResponse = engine.Response

// recvOne flushes the dispatcher and returns the one event waiting on st, failing
// unless there is exactly one.
func (w *world) recvOne(st delivery.Stream) delivery.Event {
	w.t.Helper()
	w.svc.Flush()
	evs, _ := drain(st)
	if len(evs) != 1 {
		w.t.Fatalf("want one event, got %d: %+v", len(evs), evs)
	}
	return evs[0]
}

// recvNone flushes the dispatcher and fails if an event is waiting on st.
func (w *world) recvNone(st delivery.Stream) {
	w.t.Helper()
	w.svc.Flush()
	if evs, _ := drain(st); len(evs) != 0 {
		w.t.Fatalf("want no event, got %+v", evs)
	}
}

// noFailFiles keeps rapid from writing fail files under testdata/, where the data-driven
// test would take them for scripts; a failure prints the -rapid.seed that reproduces it.
// An explicit -rapid.nofailfile=false (or RAPID_NOFAILFILE) is respected.
func noFailFiles() {
	set := os.Getenv("RAPID_NOFAILFILE") != ""
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "rapid.nofailfile" {
			set = true
		}
	})
	if !set {
		_ = flag.Set("rapid.nofailfile", "true")
	}
}
