package delivery_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/pebblestore"
	"github.com/herald-mq/herald/watch"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// harness drives the consume engine from a script: an engine on pebble over an
// in-memory filesystem, a manual clock, named consumers, and delivery ids named d1, d2,
// … in the order they are first seen.
type harness struct {
	t         *testing.T
	fs        vfs.FS
	clk       *clock.Manual
	eng       *engine.Engine
	wat       *watch.Service
	svc       *delivery.Service
	consumers map[string]delivery.Stream
	ids       map[string]string // d1 → real id
	names     map[string]string // real id → d1
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, fs: vfs.NewMem(), clk: clock.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), ids: map[string]string{}, names: map[string]string{}}
	h.open()
	t.Cleanup(h.close)
	return h
}

func (h *harness) open() {
	st, err := pebblestore.Open("db", pebblestore.Options{FS: h.fs, Logger: quiet})
	if err != nil {
		h.t.Fatal(err)
	}
	// The _Watch counters are flushed where a script says so (flush-layer0).
	h.eng, err = engine.Open(context.Background(), engine.Config{Backend: st, Clock: h.clk, Logger: quiet, Layer0Interval: 1000 * time.Hour})
	if err != nil {
		h.t.Fatal(err)
	}
	h.svc = delivery.New(delivery.Config{Engine: h.eng, Logger: quiet})
	if err := h.svc.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	// Watch management (PAUSE, RESUME, CANCEL, ALTER WATCH) runs through the watch
	// service, which hands consume watches to the delivery service.
	h.wat = watch.New(watch.Config{Engine: h.eng, Logger: quiet})
	if err := h.wat.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.consumers = map[string]delivery.Stream{}
}

func (h *harness) close() {
	if h.svc != nil {
		_ = h.wat.Stop(context.Background())
		_ = h.svc.Stop(context.Background())
		_ = h.eng.Close(context.Background())
		h.svc = nil
	}
}

func (h *harness) name(id string) string {
	if n, ok := h.names[id]; ok {
		return n
	}
	n := fmt.Sprintf("d%d", len(h.ids)+1)
	h.ids[n], h.names[id] = id, n
	return n
}

// subst replaces d1, d2, … in statement text by the real delivery ids.
func (h *harness) subst(s string) string {
	keys := make([]string, 0, len(h.ids))
	for k := range h.ids {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		s = strings.ReplaceAll(s, `"`+k+`"`, `"`+h.ids[k]+`"`)
		s = regexp.MustCompile(`#`+k+`\b`).ReplaceAllString(s, `#`+h.ids[k])
	}
	return s
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	switch d.Cmd {
	case "exec", "exec-stats":
		// Arguments are parameters; a value naming a delivery (d1, …) is its real id.
		// exec-stats also prints what each statement created and deleted.
		params := map[string]herald.Value{}
		for _, a := range d.CmdArgs {
			v := a.Vals[0]
			if real, ok := h.ids[v]; ok {
				v = real
			}
			params[a.Key] = herald.String(v)
		}
		resp, err := h.eng.Exec(ctx, "", h.subst(d.Input), params)
		if err != nil {
			msg := err.Error()
			for id, n := range h.names {
				msg = strings.ReplaceAll(msg, id, n)
			}
			h.svc.Flush()
			return "error: " + msg + "\n"
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
			if d.Cmd == "exec-stats" {
				fmt.Fprintf(&b, "stats: nodes_created=%d nodes_deleted=%d edges_deleted=%d\n", r.Stats.NodesCreated, r.Stats.NodesDeleted, r.Stats.EdgesDeleted)
			}
		}
		h.svc.Flush()
		if b.Len() == 0 {
			return "ok\n"
		}
		return b.String()
	case "consume":
		name := d.CmdArgs[0].Key
		st, err := h.svc.Consume(ctx, "", d.Input, nil)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		h.consumers[name] = st
		h.svc.Flush()
		return "ok\n"
	case "recv":
		st := h.consumers[d.CmdArgs[0].Key]
		if st == nil {
			return "no such consumer\n"
		}
		h.svc.Flush()
		var b strings.Builder
		for {
			select {
			case ev, ok := <-st.Events():
				if !ok {
					b.WriteString("closed\n")
					return b.String()
				}
				b.WriteString(h.event(ev))
				continue
			default:
			}
			break
		}
		if b.Len() == 0 {
			return "nothing\n"
		}
		return b.String()
	case "close":
		h.consumers[d.CmdArgs[0].Key].Close()
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
	case "redrive":
		// REDRIVE every dead letter, oldest first, through the query language.
		resp, err := h.eng.Exec(ctx, "", `MATCH d: _DeadLetter RETURN d.id ORDER BY d.created_at, d.id`, nil)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var b strings.Builder
		for _, row := range resp.Results[0].Rows {
			r, err := h.eng.Exec(ctx, "", `REDRIVE $id`, map[string]herald.Value{"id": row[0]})
			if err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
				continue
			}
			fmt.Fprintf(&b, "redriven as %s\n", r.Results[0].Rows[0][0])
		}
		h.svc.Flush()
		return b.String()
	case "kill-letter":
		// KILL #<letter> of the dead letter of the node named by the argument.
		resp, err := h.eng.Exec(ctx, "", `MATCH d: _DeadLetter WHERE d.subject_id = $s RETURN d.id`, map[string]herald.Value{"s": herald.String(d.CmdArgs[0].Key)})
		if err != nil || len(resp.Results[0].Rows) != 1 {
			return fmt.Sprintf("error: no single letter of %s (%v)\n", d.CmdArgs[0].Key, err)
		}
		if _, err := h.eng.Exec(ctx, "", "KILL #"+resp.Results[0].Rows[0][0].AsString(), nil); err != nil {
			return "error: " + err.Error() + "\n"
		}
		h.svc.Flush()
		return "ok\n"
	case "flush-layer0":
		if err := h.eng.FlushLayer0(ctx); err != nil {
			return "error: " + err.Error() + "\n"
		}
		h.svc.Flush()
		return "ok\n"
	case "restart":
		h.close()
		h.open()
		h.svc.Flush()
		return "ok\n"
	case "records":
		// The durable delivery records: attempts, the lease (named by the delivery whose
		// handle it holds) and its deadline, and when the subject may come back.
		h.svc.Flush()
		recs, err := delivery.Records(h.eng)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		if len(recs) == 0 {
			return "none\n"
		}
		var b strings.Builder
		for _, r := range recs {
			fmt.Fprintf(&b, "%s attempts=%d", r.Subject, r.Attempts)
			if r.Leased {
				name := "?"
				for n, id := range h.ids {
					if delivery.HandleOf(id) == r.Handle {
						name = n
					}
				}
				fmt.Fprintf(&b, " lease=%s deadline=%s", name, r.Deadline.Format(time.RFC3339))
			}
			if !r.NotBefore.IsZero() {
				fmt.Fprintf(&b, " not_before=%s", r.NotBefore.Format(time.RFC3339))
			}
			b.WriteByte('\n')
		}
		return b.String()
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

func (h *harness) event(ev delivery.Event) string {
	switch ev.Type {
	case delivery.EventConsumed:
		rel := ""
		if ev.Releases > 0 {
			rel = fmt.Sprintf(" releases=%d", ev.Releases)
		}
		return fmt.Sprintf("consumed %s attempt=%d%s match=%s\n", h.name(ev.DeliveryID), ev.Attempt, rel, scrub(ev.Match))
	case delivery.EventTimeout:
		return fmt.Sprintf("timeout %s attempt=%d %s\n", h.name(ev.DeliveryID), ev.Attempt, ev.Code)
	}
	return fmt.Sprintf("%s %s %s\n", ev.Type, ev.Code, ev.Message)
}

// scrub hides generated node ids.
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

// letterID matches generated dead-letter ids, which change from run to run.
var letterID = regexp.MustCompile(`\bdl[2-7a-z]{21}\b`)

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return letterID.ReplaceAllString(h.run(t, d), "<letter>")
		})
	})
}
