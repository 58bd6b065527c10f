package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
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
