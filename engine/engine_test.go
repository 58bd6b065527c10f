package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// harness runs one data-driven script: an engine on pebble over an in-memory
// filesystem, a manual clock, and named sessions.
type harness struct {
	t        *testing.T
	fs       vfs.FS
	clk      *clock.Manual
	eng      *engine.Engine
	mode     engine.TickMode
	ret      uint64
	sessions map[string]string
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, fs: vfs.NewMem(), clk: clock.NewManual(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), sessions: map[string]string{}}
	h.open()
	t.Cleanup(func() {
		if h.eng != nil {
			_ = h.eng.Close(context.Background())
		}
	})
	return h
}

func (h *harness) open() {
	h.t.Helper()
	eng, err := engine.Open(context.Background(), engine.Config{Backend: pebbleOn(h.t, h.fs), Clock: h.clk, Logger: quiet, TickMode: h.mode, Retention: h.ret})
	if err != nil {
		h.t.Fatal(err)
	}
	h.eng = eng
	h.sessions = map[string]string{}
}

func (h *harness) restart() {
	if err := h.eng.Close(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.open()
}

func (h *harness) run(d *datadriven.TestData) string {
	ctx := context.Background()
	switch d.Cmd {
	case "exec":
		sid := ""
		params := map[string]herald.Value{}
		for _, a := range d.CmdArgs {
			switch a.Key {
			case "session":
				name := a.Vals[0]
				if _, ok := h.sessions[name]; !ok {
					id, err := h.eng.OpenSession(context.Background())
					if err != nil {
						return "error: " + err.Error()
					}
					h.sessions[name] = id
				}
				sid = h.sessions[name]
			default:
				v, err := parseParam(a.Vals[0])
				if err != nil {
					d.Fatalf(h.t, "bad param %s: %v", a.Key, err)
				}
				params[a.Key] = v
			}
		}
		resp, err := h.eng.Exec(ctx, sid, d.Input, params)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return format(resp)
	case "restart":
		h.restart()
		seq, tick := h.eng.Position()
		return fmt.Sprintf("seq=%d tick=%d\n", seq, tick)
	case "reopen":
		// Close and reopen with options: tick=manual|commit, retention=N.
		for _, a := range d.CmdArgs {
			switch a.Key {
			case "tick":
				h.mode = map[string]engine.TickMode{"commit": engine.TickCommit, "manual": engine.TickManual}[a.Vals[0]]
			case "retention":
				fmt.Sscan(a.Vals[0], &h.ret)
			}
		}
		h.restart()
		return "ok\n"
	case "advance":
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			d.Fatalf(h.t, "advance: %v", err)
		}
		h.clk.Advance(dur)
		return "ok\n"
	case "position":
		seq, tick := h.eng.Position()
		return fmt.Sprintf("seq=%d tick=%d\n", seq, tick)
	case "changes":
		var after uint64
		if len(d.CmdArgs) > 0 {
			fmt.Sscan(d.CmdArgs[0].Vals[0], &after)
		}
		cs, err := h.eng.Changes(ctx, after, 100)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var b strings.Builder
		for _, c := range cs {
			fmt.Fprintf(&b, "seq=%d tick=%d changes=%d\n", c.Seq, c.Tick, len(c.Changes))
			for _, ch := range c.Changes {
				fmt.Fprintf(&b, "  %s\n", describeChange(ch))
			}
		}
		return b.String()
	}
	d.Fatalf(h.t, "unknown command %s", d.Cmd)
	return ""
}

func parseParam(s string) (herald.Value, error) {
	if strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[") {
		var x any
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		if err := d.Decode(&x); err != nil {
			return herald.Null, err
		}
		return herald.FromJSON(x)
	}
	var i int64
	if _, err := fmt.Sscan(s, &i); err == nil && fmt.Sprint(i) == s {
		return herald.Int(i), nil
	}
	return herald.String(s), nil
}

func describeChange(c herald.Change) string {
	op := func(before, after bool) string {
		switch {
		case !before:
			return "create"
		case !after:
			return "delete"
		}
		return "update"
	}
	switch c.Kind {
	case herald.NodeChange:
		n := c.NodeAfter
		if n == nil {
			n = c.NodeBefore
		}
		return fmt.Sprintf("%s node %s %s", op(c.NodeBefore != nil, c.NodeAfter != nil), n.Type, attrsString(n))
	case herald.EdgeChange:
		e := c.EdgeAfter
		if e == nil {
			e = c.EdgeBefore
		}
		return fmt.Sprintf("%s edge %s/%d", op(c.EdgeBefore != nil, c.EdgeAfter != nil), e.Type, len(e.Endpoints))
	}
	t := c.TypeAfter
	if t == nil {
		t = c.TypeBefore
	}
	return fmt.Sprintf("%s type %s", op(c.TypeBefore != nil, c.TypeAfter != nil), t.Name)
}

func attrsString(n *herald.Node) string {
	parts := []string{}
	for _, k := range n.Attrs.Keys() {
		parts = append(parts, k+"="+n.Attrs.Get(k).String())
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// format renders a response deterministically: generated ids are not printed.
func format(r *engine.Response) string {
	var b strings.Builder
	for i, res := range r.Results {
		if len(res.Columns) > 0 {
			fmt.Fprintf(&b, "[%d] %s\n", i, strings.Join(res.Columns, " | "))
			for _, row := range res.Rows {
				vals := make([]string, len(row))
				for j, v := range row {
					vals[j] = scrub(v)
				}
				fmt.Fprintf(&b, "    %s\n", strings.Join(vals, " | "))
			}
		}
		if s := statsString(res.Stats); s != "" {
			fmt.Fprintf(&b, "[%d] %s\n", i, s)
		}
	}
	fmt.Fprintf(&b, "seq=%d tick=%d\n", r.Seq, r.Tick)
	return b.String()
}

// scrub hides generated node ids (they start with "n" and are 22 characters).
func scrub(v herald.Value) string {
	if v.Kind() == herald.KindMap {
		keys := v.MapKeys()
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + scrub(v.MapGet(k))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	if v.Kind() == herald.KindString && len(v.AsString()) == 22 && v.AsString()[0] == 'n' {
		return "<id>"
	}
	return v.String()
}

func statsString(s engine.Stats) string {
	var parts []string
	add := func(name string, n int) {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", name, n))
		}
	}
	add("types", s.TypesDeclared)
	add("constraints+", s.ConstraintsDeclared)
	add("constraints-", s.ConstraintsDropped)
	add("nodes+", s.NodesCreated)
	add("nodes-", s.NodesDeleted)
	add("edges+", s.EdgesCreated)
	add("edges-", s.EdgesDeleted)
	add("attrs", s.AttrsSet)
	if s.Plan != "" {
		parts = append(parts, fmt.Sprintf("scanned=%d plan=%q", s.RowsScanned, s.Plan))
	}
	return strings.Join(parts, " ")
}

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string { return h.run(d) })
	})
}
