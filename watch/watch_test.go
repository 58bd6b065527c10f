package watch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/pebblestore"
	"github.com/herald-mq/herald/watch"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type harness struct {
	t        *testing.T
	fs       vfs.FS
	clk      *clock.Manual
	eng      *engine.Engine
	svc      *watch.Service
	ret      uint64
	mode     engine.TickMode
	streams  map[string]herald.Stream
	sessions map[string]string
	last     map[string]uint64 // seq of the last event each stream received
}

// openIdle opens a watch-mode stream on every Task that sends no snapshot, failing t
// on an error.
func openIdle(t *testing.T, h *harness, ctx context.Context) herald.Stream {
	t.Helper()
	st, err := h.svc.Open(ctx, "", `WATCH t: Task [initial: none] RETURN t.n`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, fs: vfs.NewMem(), clk: clock.NewManual(time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)), last: map[string]uint64{}}
	h.open()
	t.Cleanup(h.close)
	return h
}

func (h *harness) open() {
	st, err := pebblestore.Open("db", pebblestore.Options{FS: h.fs, Logger: quiet})
	if err != nil {
		h.t.Fatal(err)
	}
	if h.eng, err = engine.Open(context.Background(), engine.Config{Backend: st, Clock: h.clk, Logger: quiet, Retention: h.ret, TickMode: h.mode, Layer0Interval: layer0Interval}); err != nil {
		h.t.Fatal(err)
	}
	h.svc = watch.New(watch.Config{Engine: h.eng, Logger: quiet})
	if err := h.svc.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.streams = map[string]herald.Stream{}
	h.sessions = map[string]string{}
}

// session returns the engine session named by a script's session=name argument.
func (h *harness) session(d *datadriven.TestData) string {
	for _, a := range d.CmdArgs {
		if a.Key == "session" {
			if _, ok := h.sessions[a.Vals[0]]; !ok {
				id, err := h.eng.OpenSession(context.Background())
				if err != nil {
					h.t.Fatal(err)
				}
				h.sessions[a.Vals[0]] = id
			}
			return h.sessions[a.Vals[0]]
		}
	}
	return ""
}

func (h *harness) close() {
	if h.svc != nil {
		_ = h.svc.Stop(context.Background())
		_ = h.eng.Close(context.Background())
		h.svc = nil
	}
}

// params are an exec's arguments other than session, each a JSON value: `c={"id":7}`.
func params(t *testing.T, d *datadriven.TestData) map[string]herald.Value {
	out := map[string]herald.Value{}
	for _, a := range d.CmdArgs {
		if a.Key == "session" {
			continue
		}
		var x any
		if err := json.Unmarshal([]byte(a.Vals[0]), &x); err != nil {
			d.Fatalf(t, "param %s: %v", a.Key, err)
		}
		v, err := herald.FromJSON(x)
		if err != nil {
			d.Fatalf(t, "param %s: %v", a.Key, err)
		}
		out[a.Key] = v
	}
	return out
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	switch d.Cmd {
	case "exec":
		resp, err := h.eng.Exec(ctx, h.session(d), d.Input, params(t, d))
		h.svc.Flush()
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var b strings.Builder
		for _, r := range resp.Results {
			for _, row := range r.Rows {
				vals := make([]string, len(row))
				for i, v := range row {
					vals[i] = v.String()
				}
				fmt.Fprintf(&b, "%s\n", strings.Join(vals, " | "))
			}
		}
		if b.Len() == 0 {
			return "ok\n"
		}
		return b.String()
	case "open":
		name := d.CmdArgs[0].Key
		var after uint64
		for _, a := range d.CmdArgs[1:] {
			if a.Key == "after" {
				if a.Vals[0] == "last" {
					after = h.last[name]
				} else {
					after, _ = strconv.ParseUint(a.Vals[0], 10, 64)
				}
			}
		}
		st, err := h.svc.Open(ctx, h.session(d), d.Input, nil, after)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		h.streams[name] = st
		h.svc.Flush()
		return "ok\n"
	case "recv":
		name := d.CmdArgs[0].Key
		st := h.streams[name]
		if st == nil {
			return "no such stream\n"
		}
		h.svc.Flush()
		var b strings.Builder
		evs, closed := watch.Drain(st)
		for _, ev := range evs {
			h.last[name] = ev.Seq
			b.WriteString(format(ev))
		}
		if closed {
			b.WriteString("closed\n")
			return b.String()
		}
		if b.Len() == 0 {
			return "nothing\n"
		}
		return b.String()
	case "close":
		h.streams[d.CmdArgs[0].Key].Close()
		h.svc.Flush()
		return "ok\n"
	case "advance":
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		h.clk.Advance(dur)
		h.svc.Flush()
		return "ok\n"
	case "flush-layer0":
		if err := h.eng.FlushLayer0(ctx); err != nil {
			return "error: " + err.Error() + "\n"
		}
		h.svc.Flush()
		return "ok\n"
	case "restart":
		for _, a := range d.CmdArgs {
			if a.Key == "retention" {
				h.ret, _ = strconv.ParseUint(a.Vals[0], 10, 64)
			}
			if a.Key == "tick" && a.Vals[0] == "manual" {
				h.mode = engine.TickManual
			}
		}
		h.close()
		h.open()
		return "ok\n"
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

func format(ev herald.Event) string {
	s := fmt.Sprintf("%s seq=%d", ev.Type, ev.Seq)
	if !ev.Match.IsNull() {
		s += " " + ev.Match.String()
	}
	if !ev.Prev.IsNull() {
		s += " prev=" + ev.Prev.String()
	}
	if ev.Count > 0 {
		s += fmt.Sprintf(" count=%d", ev.Count)
	}
	if ev.Code != "" {
		s += " " + string(ev.Code)
	}
	if ev.Uncommitted {
		s += " (uncommitted)"
	}
	return s + "\n"
}

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness(t)
		datadriven.RunTest(t, path, h.run)
	})
}

// layer0Interval keeps the periodic _Watch counter flush out of the scripts, whose
// positions it would move; "flush-layer0" runs it where a script wants it.
const layer0Interval = 1000 * time.Hour
