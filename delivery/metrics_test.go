package delivery_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
)

// logCapture keeps the log records a service writes.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r.Clone())
	c.mu.Unlock()
	return nil
}
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCapture) WithGroup(string) slog.Handler      { return c }

// find returns the attributes of the records with message msg, and their level.
func (c *logCapture) find(msg string) []map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]string
	for _, r := range c.recs {
		if r.Message == msg {
			m := map[string]string{"level": r.Level.String()}
			r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
			out = append(out, m)
		}
	}
	return out
}

type metricsEnv struct {
	t   *testing.T
	clk *clock.Manual
	eng *engine.Engine
	svc *delivery.Service
	log *logCapture
}

func newMetricsEnv(t *testing.T, maxSeries int) *metricsEnv {
	e := &metricsEnv{t: t, clk: clock.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), log: &logCapture{}}
	var err error
	e.eng, err = engine.Open(context.Background(), engine.Config{Backend: memstore.New(), Clock: e.clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = delivery.New(delivery.Config{Engine: e.eng, Logger: slog.New(e.log), MaxGroupSeries: maxSeries, GroupIdle: time.Minute})
	if err := e.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.svc.Stop(context.Background())
		_ = e.eng.Close(context.Background())
	})
	return e
}

func (e *metricsEnv) exec(q string) {
	e.t.Helper()
	if _, err := e.eng.Exec(context.Background(), "", q, nil); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

// consume opens a stream and waits for its first delivery.
func (e *metricsEnv) consume(stmt string) herald.Stream {
	e.t.Helper()
	st, err := e.svc.Consume(context.Background(), "", stmt, nil)
	if err != nil {
		e.t.Fatalf("%s: %v", stmt, err)
	}
	select {
	case ev := <-st.Events():
		if ev.Type != delivery.EventConsumed {
			e.t.Fatalf("%s: first event %+v", stmt, ev)
		}
	case <-time.After(5 * time.Second):
		e.t.Fatalf("%s: no delivery", stmt)
	}
	return st
}

// series returns the labelled series of name, as `group/type value`, sorted.
func (e *metricsEnv) series(name string) string {
	var out []string
	for _, m := range e.svc.Metrics() {
		if m.Name != name {
			continue
		}
		labels := map[string]string{}
		for _, l := range m.Labels {
			labels[l.Name] = l.Value
		}
		out = append(out, fmt.Sprintf("%s/%s %g", labels["group"], labels["type"], m.Value))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestGroupSeriesCap: with room for two groups' series, the first two named groups get
// them and keep them; the next are summed under _other, which never loses what a group
// added to it, and groups without a name under _unnamed. A group that ends (idle past
// its idle period) gives its room to the next group made; one named like a shared
// series is summed into _other.
func TestGroupSeriesCap(t *testing.T) {
	e := newMetricsEnv(t, 2)
	for i := 0; i < 8; i++ {
		e.exec(`SPAWN j: Job {}`)
	}
	a := e.consume(`WATCH j: Job [mode: consume, group: "a", buffer: 1, ack_timeout: 1h] RETURN j`)
	e.consume(`WATCH j: Job [mode: consume, group: "b", buffer: 1, ack_timeout: 1h] RETURN j`)
	c := e.consume(`WATCH j: Job [mode: consume, group: "c", buffer: 1, ack_timeout: 1h] RETURN j`)
	e.consume(`WATCH j: Job [mode: consume, group: "d", buffer: 1, ack_timeout: 1h] RETURN j`)
	e.consume(`WATCH j: Job [mode: consume, group: "_other", buffer: 1, ack_timeout: 1h] RETURN j`)
	e.consume(`WATCH j: Job [mode: consume, buffer: 1, ack_timeout: 1h] RETURN j`)
	if got, want := e.series("herald_consume_group_delivered_total"), "_other/ 3 _unnamed/ 1 a/Job 1 b/Job 1"; got != want {
		t.Fatalf("delivered: %s, want %s", got, want)
	}
	// The six lazy groups lease one job each, the first six of 8: the last two are ready
	// for every group (a job another group holds leased is not).
	if got, want := e.series("herald_consume_group_ready"), "_other/ 6 _unnamed/ 2 a/Job 2 b/Job 2"; got != want {
		t.Fatalf("ready: %s, want %s", got, want)
	}

	// a and c go idle and then end: a's room goes to e, c's totals stay in _other.
	a.Close()
	c.Close()
	e.clk.Advance(2 * time.Minute)
	e.svc.Flush()
	e.consume(`WATCH j: Job [mode: consume, group: "e", buffer: 1, ack_timeout: 1h] RETURN j`)
	e.consume(`WATCH j: Job [mode: consume, group: "f", buffer: 1, ack_timeout: 1h] RETURN j`)
	for _, m := range e.svc.Metrics() {
		if m.Name == "herald_consume_groups" && m.Value != 6 {
			t.Fatalf("%g groups, want 6: a and c ended", m.Value)
		}
	}
	if got, want := e.series("herald_consume_group_delivered_total"), "_other/ 4 _unnamed/ 1 b/Job 1 e/Job 1"; got != want {
		t.Fatalf("delivered after a and c ended: %s, want %s", got, want)
	}
	if got, want := e.series("herald_consume_group_leased"), "_other/ 3 _unnamed/ 1 b/Job 1 e/Job 1"; got != want {
		t.Fatalf("leased after a and c ended: %s, want %s", got, want)
	}
}

// TestNoGroupSeries: a negative cap gives no group series of its own.
func TestNoGroupSeries(t *testing.T) {
	e := newMetricsEnv(t, -1)
	e.exec(`SPAWN j: Job {}`)
	e.consume(`WATCH j: Job [mode: consume, group: "a", buffer: 1] RETURN j`)
	if got, want := e.series("herald_consume_group_leased"), "_other/ 1"; got != want {
		t.Fatalf("leased: %s, want %s", got, want)
	}
}

// TestGroupLogs: a named group's creation and a takeover of an idle group by a new
// statement are logged at INFO with the group and the subject's type.
func TestGroupLogs(t *testing.T) {
	e := newMetricsEnv(t, 0)
	e.exec(`SPAWN j: Job { n = 1 }`)
	st := e.consume(`WATCH j: Job [mode: consume, group: "g"] RETURN j`)
	st.Close()
	e.consume(`WATCH j: Job WHERE j.n = 1 [mode: consume, group: "g"] RETURN j`)
	created := e.log.find("consume: group created")
	if len(created) != 2 || created[0]["group"] != "g" || created[0]["type"] != "Job" || created[0]["level"] != "INFO" {
		t.Errorf("group created: %v", created)
	}
	took := e.log.find("consume: a new statement takes an idle group over")
	if len(took) != 1 || took[0]["group"] != "g" || took[0]["type"] != "Job" || took[0]["level"] != "INFO" {
		t.Errorf("takeover: %v", took)
	}
}

// TestDeadLetterLogs: each dead letter is logged at INFO with its group, type and
// reason, at most letterLogRate (10) a second; the next record counts those left out.
func TestDeadLetterLogs(t *testing.T) {
	e := newMetricsEnv(t, 0)
	for i := 0; i < 12; i++ {
		e.exec(`SPAWN j: Job {}`)
	}
	st, err := e.svc.Consume(context.Background(), "", `WATCH j: Job [mode: consume, group: "g", buffer: 20] RETURN j`, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for len(ids) < 12 {
		select {
		case ev := <-st.Events():
			ids = append(ids, ev.DeliveryID)
		case <-time.After(5 * time.Second):
			t.Fatalf("%d deliveries", len(ids))
		}
	}
	for _, id := range ids[:11] {
		if err := e.svc.Nack(context.Background(), id, delivery.NackOptions{NoRetry: true}); err != nil {
			t.Fatal(err)
		}
	}
	e.clk.Advance(time.Second)
	if err := e.svc.Nack(context.Background(), ids[11], delivery.NackOptions{NoRetry: true}); err != nil {
		t.Fatal(err)
	}
	recs := e.log.find("consume: message dead-lettered")
	if len(recs) != 11 {
		t.Fatalf("%d records, want 11: %v", len(recs), recs)
	}
	for _, r := range recs {
		if r["group"] != "g" || r["type"] != "Job" || r["reason"] != delivery.ReasonNoRetry || r["level"] != "INFO" || r["message"] == "" {
			t.Fatalf("record %v", r)
		}
	}
	if recs[10]["unlogged"] != "1" {
		t.Fatalf("the record after the left-out one: %v", recs[10])
	}
}
