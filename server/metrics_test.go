package server

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
)

// TestMetricsOfTheServices: /metrics serves the engine's, the consume engine's and the
// queues' own figures. A lock that expires shows as a lock expiry and as expired leases;
// an acknowledgement as acknowledged items and acked deliveries.
func TestMetricsOfTheServices(t *testing.T) {
	e := newQueueEnv(t)
	e.push("test", "a", 0)
	e.push("test", "b", 1)
	code, body := e.pop("test", "require_ack=true&ttl_seconds=5&count=2")
	wantStatus(t, "pop", code, 200, body)
	e.clk.Advance(6 * time.Second)
	code, body = e.pop("test", "require_ack=true&count=2")
	wantStatus(t, "pop after expiry", code, 200, body)
	code, body = e.ack("test", body["lock_id"])
	wantStatus(t, "acknowledge", code, 200, body)

	resp, err := http.Get(e.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	text := string(raw)
	for _, want := range []string{
		"herald_queue_pushed_total 2",
		"herald_queue_popped_total 4",
		"herald_queue_lock_expiries_total 1",
		"herald_queue_acknowledged_total 2",
		"herald_consume_delivered_total 4",
		"herald_consume_acked_total 2",
		"herald_consume_leases 0",
		"herald_consume_dead_lettered_total 0",
		"herald_watch_streams 0",
		"# TYPE herald_commits_total counter",
		"# TYPE herald_syncs_total counter",
		"# TYPE herald_durable_seq gauge",
		"# TYPE herald_commit_sync_seconds histogram",
		`herald_commit_sync_seconds_bucket{le="0.0001"}`,
		`herald_commit_sync_seconds_bucket{le="+Inf"}`,
	} {
		if !strings.Contains(text, want+"\n") && !strings.Contains(text, want+" ") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}

// records keeps the log records a server writes, for tests that check them.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec.Clone())
	r.mu.Unlock()
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// find returns the attributes of the records with message msg, as strings.
func (r *records) find(msg string) []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, rec := range r.recs {
		if rec.Message != msg {
			continue
		}
		m := map[string]string{"level": rec.Level.String()}
		rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
		out = append(out, m)
	}
	return out
}

// scrape returns the lines of /metrics that start with prefix, sorted.
func scrape(t *testing.T, base, prefix string) []string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, raw)
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	sort.Strings(out)
	return out
}

// openConsume opens a consume stream over /v1/watch and returns its first delivery.
func openConsume(t *testing.T, base, stmt string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/v1/watch?"+url.Values{"query": {stmt}}.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if typ, data := readSSE(t, bufio.NewReader(resp.Body)); typ != "consumed" {
		t.Fatalf("first event %s %s", typ, data)
	}
}

// TestMetricsOfEachGroup builds a known backlog in three groups and checks every
// labelled series of the groups exactly:
//   - workers, a lazy group (the subject alone, in arrival order) whose backlog stays in
//     the type's index: 5 jobs, one leased, 4 ready, which herald_consume_ready counts too;
//   - the queue REST API's group of queue "mail": 3 items, one popped and acknowledged;
//   - strict, whose one message runs out of redeliveries and becomes a dead letter.
//
// The ready messages were created 6 seconds before the reading, on the server's clock.
// The creation of each named group and the dead letter are logged.
func TestMetricsOfEachGroup(t *testing.T) {
	logs := &records{}
	clk := clock.NewManual(queueEpoch)
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Clock: clk, Logger: slog.New(logs)})
	start(t, s)
	e := &queueEnv{t: t, clk: clk, srv: s, base: "http://" + s.Addr()}
	for i := 0; i < 5; i++ {
		if code, body := post(t, s.Addr(), `SPAWN j: Job {}`); code != 200 {
			t.Fatalf("spawn: %d %v", code, body)
		}
	}
	if code, body := post(t, s.Addr(), `SPAWN m: Mail {}`); code != 200 {
		t.Fatalf("spawn: %d %v", code, body)
	}
	for i := 0; i < 3; i++ {
		e.push("mail", i, 0)
	}
	openConsume(t, e.base, `WATCH j: Job [mode: consume, group: "workers", buffer: 1] RETURN j`)
	openConsume(t, e.base, `WATCH m: Mail [mode: consume, group: "strict", buffer: 1, max_redeliveries: 0, ack_timeout: 5s] RETURN m`)
	code, body := e.pop("mail", "require_ack=true&ttl_seconds=30&count=1")
	wantStatus(t, "pop", code, 200, body)
	code, body = e.ack("mail", body["lock_id"])
	wantStatus(t, "acknowledge", code, 200, body)
	clk.Advance(6 * time.Second) // strict's lease runs out: no redelivery is left

	want := []string{
		`herald_consume_group_acked_total{group="queue:mail:30s",queue="mail",type="QueueItem"} 1`,
		`herald_consume_group_acked_total{group="strict",queue="",type="Mail"} 0`,
		`herald_consume_group_acked_total{group="workers",queue="",type="Job"} 0`,
		`herald_consume_group_dead_lettered_total{group="queue:mail:30s",queue="mail",type="QueueItem"} 0`,
		`herald_consume_group_dead_lettered_total{group="strict",queue="",type="Mail"} 1`,
		`herald_consume_group_dead_lettered_total{group="workers",queue="",type="Job"} 0`,
		`herald_consume_group_dead_letters{group="queue:mail:30s",queue="mail",type="QueueItem"} 0`,
		`herald_consume_group_dead_letters{group="strict",queue="",type="Mail"} 1`,
		`herald_consume_group_dead_letters{group="workers",queue="",type="Job"} 0`,
		`herald_consume_group_delayed{group="queue:mail:30s",queue="mail",type="QueueItem"} 0`,
		`herald_consume_group_delayed{group="strict",queue="",type="Mail"} 0`,
		`herald_consume_group_delayed{group="workers",queue="",type="Job"} 0`,
		`herald_consume_group_delivered_total{group="queue:mail:30s",queue="mail",type="QueueItem"} 1`,
		`herald_consume_group_delivered_total{group="strict",queue="",type="Mail"} 1`,
		`herald_consume_group_delivered_total{group="workers",queue="",type="Job"} 1`,
		`herald_consume_group_leased{group="queue:mail:30s",queue="mail",type="QueueItem"} 0`,
		`herald_consume_group_leased{group="strict",queue="",type="Mail"} 0`,
		`herald_consume_group_leased{group="workers",queue="",type="Job"} 1`,
		`herald_consume_group_nacked_total{group="queue:mail:30s",queue="mail",type="QueueItem"} 0`,
		`herald_consume_group_nacked_total{group="strict",queue="",type="Mail"} 0`,
		`herald_consume_group_nacked_total{group="workers",queue="",type="Job"} 0`,
		`herald_consume_group_oldest_ready_seconds{group="queue:mail:30s",queue="mail",type="QueueItem"} 6`,
		`herald_consume_group_oldest_ready_seconds{group="strict",queue="",type="Mail"} 0`,
		`herald_consume_group_oldest_ready_seconds{group="workers",queue="",type="Job"} 6`,
		`herald_consume_group_ready{group="queue:mail:30s",queue="mail",type="QueueItem"} 2`,
		`herald_consume_group_ready{group="strict",queue="",type="Mail"} 0`,
		`herald_consume_group_ready{group="workers",queue="",type="Job"} 4`,
	}
	var got []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		got = scrape(t, e.base, "herald_consume_group_")
		if slices.Equal(got, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Equal(got, want) {
		t.Errorf("labelled series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := scrape(t, e.base, "herald_consume_ready "); !slices.Equal(got, []string{"herald_consume_ready 6"}) {
		t.Errorf("the lazy group's backlog is not in the total: %q", got)
	}

	created := map[string]string{}
	for _, r := range logs.find("consume: group created") {
		created[r["group"]] = r["type"]
	}
	if !maps.Equal(created, map[string]string{"workers": "Job", "strict": "Mail", "queue:mail:30s": "QueueItem"}) {
		t.Errorf("group created records: %v", created)
	}
	letters := logs.find("consume: message dead-lettered")
	if len(letters) != 1 || letters[0]["group"] != "strict" || letters[0]["type"] != "Mail" ||
		letters[0]["reason"] != "max_redeliveries_exceeded" || letters[0]["level"] != "INFO" || letters[0]["message"] == "" {
		t.Errorf("dead letter records: %v", letters)
	}
}
