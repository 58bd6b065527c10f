package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// queueRun runs "herald queue ARGS --addr URL" and returns stdout, stderr and the exit code.
func queueRun(t *testing.T, srv *heraldtest.Server, args ...string) (string, string, int) {
	t.Helper()
	out, errOut, err := run(t, "", append(append([]string{"queue"}, args...), "--addr", srv.URL())...)
	return out, errOut, ExitCode(err)
}

func mustQueue(t *testing.T, srv *heraldtest.Server, args ...string) string {
	t.Helper()
	out, errOut, code := queueRun(t, srv, args...)
	if code != 0 {
		t.Fatalf("herald queue %v: exit %d\nstdout %s\nstderr %s", args, code, out, errOut)
	}
	return out
}

var lockIDLine = regexp.MustCompile(`(?m)^lock id:    (l[A-Za-z0-9_-]{22})$`)

func TestQueuePushPopStats(t *testing.T) {
	srv := heraldtest.NewServer(t)
	out := mustQueue(t, srv, "push", "emails", `{"task_id": 1, "action": "send"}`, "--priority", "2")
	if !regexp.MustCompile(`^pushed \S+ to emails \(priority 2\)\n$`).MatchString(out) {
		t.Fatalf("push: %q", out)
	}
	mustQueue(t, srv, "push", "emails", `"urgent"`)
	mustQueue(t, srv, "push", "emails", `[1, 2]`, "--priority", "2")
	out = mustQueue(t, srv, "push", "reports", `7`, "--priority", "1", "--json")
	var pushed struct {
		Success  bool
		ID       string
		Priority int
	}
	if err := json.Unmarshal([]byte(out), &pushed); err != nil || !pushed.Success || pushed.ID == "" || pushed.Priority != 1 {
		t.Fatalf("push --json: %q (%v)", out, err)
	}

	out = mustQueue(t, srv, "stats")
	want := ` queue   | items | ready | locked | lock expires | priorities
---------+-------+-------+--------+--------------+------------
 emails  |     3 |     3 |      0 | -            | 0:1 2:2
 reports |     1 |     1 |      0 | -            | 1:1
(2 queues)
`
	if out != want {
		t.Fatalf("stats:\n%s\nwant:\n%s", out, want)
	}

	// Priority order, then push order within a priority; without --ack items are gone.
	out = mustQueue(t, srv, "pop", "emails", "--count", "2")
	want = ` item
-------------------------------
 "urgent"
 {"task_id":1,"action":"send"}
(2 items)
`
	if out != want {
		t.Fatalf("pop:\n%s\nwant:\n%s", out, want)
	}
	out = mustQueue(t, srv, "pop", "emails", "--json", "--count", "5")
	if out != `{"items":[[1,2]],"count":1}`+"\n" {
		t.Fatalf("pop --json: %q", out)
	}
	out = mustQueue(t, srv, "pop", "emails")
	if out != " item\n------\n(0 items)\n" {
		t.Fatalf("empty pop: %q", out)
	}

	// A drained queue, like one never pushed to, holds nothing: stats refuses it.
	for _, q := range []string{"emails", "nosuch"} {
		out, errOut, err := run(t, "", "queue", "stats", q, "--addr", srv.URL())
		if ExitCode(err) != 1 || out != "" || !strings.Contains(errOut, `no queue "`+q+`"`) {
			t.Fatalf("stats %s: exit %d, out %q, err %q", q, ExitCode(err), out, errOut)
		}
		out, _, err = run(t, "", "queue", "stats", q, "--json", "--addr", srv.URL())
		if ExitCode(err) != 1 || !strings.Contains(out, `"error_code":"E4007"`) {
			t.Fatalf("stats %s --json: exit %d, out %q", q, ExitCode(err), out)
		}
	}
}

func TestQueueAckAndLock(t *testing.T) {
	srv := heraldtest.NewServer(t, heraldtest.WithManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))
	mustQueue(t, srv, "push", "jobs", `{"n":1}`, "--priority", "1")
	mustQueue(t, srv, "push", "jobs", `{"n":2}`, "--priority", "3")

	out := mustQueue(t, srv, "pop", "jobs", "--ack", "--ttl", "60", "--count", "2")
	m := lockIDLine.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "expires at: 2026-03-01T12:01:00.000Z\n") ||
		!strings.HasPrefix(out, " item\n---------\n {\"n\":1}\n {\"n\":2}\n(2 items)\n") {
		t.Fatalf("pop --ack:\n%s", out)
	}
	lockID := m[1]

	// While the lock is active a pop is refused with the server's status and message.
	out, errOut, code := queueRun(t, srv, "pop", "jobs")
	if code != 1 || out != "" || !strings.Contains(errOut, "423 Locked: ") || !strings.Contains(errOut, "lock expires at 2026-03-01T12:01:00.000Z") {
		t.Fatalf("pop while locked: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, code = queueRun(t, srv, "pop", "jobs", "--json")
	if code != 1 || !strings.HasPrefix(out, `{"message":`) || !strings.Contains(out, `"lock_expires_at":1772366460`) {
		t.Fatalf("pop --json while locked: exit %d, %q", code, out)
	}

	out = mustQueue(t, srv, "stats", "jobs")
	if !strings.Contains(out, " jobs  |     2 |     0 |      2 | 2026-03-01T12:01:00.000Z | 1:1 3:1\n") {
		t.Fatalf("stats while locked:\n%s", out)
	}

	// A wrong lock id: 400, the lock stays.
	_, errOut, code = queueRun(t, srv, "ack", "jobs", "AAAAAAAAAAAAAAAAAAAAAA")
	if code != 1 || !strings.Contains(errOut, "400 Bad Request E4001: lock_id does not match") {
		t.Fatalf("wrong lock id: exit %d, %q", code, errOut)
	}
	out = mustQueue(t, srv, "ack", "jobs", lockID)
	if out != "acknowledged 2 items of jobs; removed from the queue\n" {
		t.Fatalf("ack: %q", out)
	}
	out, errOut, code = queueRun(t, srv, "ack", "jobs", lockID, "--json")
	if code != 1 || !strings.Contains(errOut, "404 Not Found E4007: ") || !strings.HasPrefix(out, `{"success":false,"message":`) {
		t.Fatalf("second ack: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, errOut, code = queueRun(t, srv, "stats", "jobs"); code != 1 || !strings.Contains(errOut, `no queue "jobs"`) {
		t.Fatalf("stats after ack: exit %d, %q", code, errOut)
	}

	// An expired lock: 410 LOCK_EXPIRED, and the item comes back.
	mustQueue(t, srv, "push", "jobs", `"again"`)
	out = mustQueue(t, srv, "pop", "jobs", "--ack", "--ttl", "5", "--json")
	var pop struct {
		Locked bool
		LockID string `json:"lock_id"`
	}
	if err := json.Unmarshal([]byte(out), &pop); err != nil || !pop.Locked || pop.LockID == "" {
		t.Fatalf("pop --ack --json: %q", out)
	}
	srv.Advance(6 * time.Second)
	_, errOut, code = queueRun(t, srv, "ack", "jobs", pop.LockID)
	if code != 1 || !strings.Contains(errOut, "410 Gone LOCK_EXPIRED: ") {
		t.Fatalf("late ack: exit %d, %q", code, errOut)
	}
	if out = mustQueue(t, srv, "pop", "jobs", "--json"); out != `{"items":["again"],"count":1}`+"\n" {
		t.Fatalf("pop after expiry: %q", out)
	}
	out = mustQueue(t, srv, "pop", "jobs", "--ack")
	if !strings.HasSuffix(out, "(0 items)\nno lock taken: the queue is empty\n") {
		t.Fatalf("pop --ack of an empty queue: %q", out)
	}
}

func TestQueueNack(t *testing.T) {
	srv := heraldtest.NewServer(t)
	for i, item := range []string{`"a"`, `"b"`, `"c"`} {
		mustQueue(t, srv, "push", "work", item, "--priority", string(rune('0'+i)))
	}
	out := mustQueue(t, srv, "pop", "work", "--ack", "--count", "2", "--ttl", "300")
	lockID := lockIDLine.FindStringSubmatch(out)[1]

	_, errOut, code := queueRun(t, srv, "nack", "work", "AAAAAAAAAAAAAAAAAAAAAA")
	if code != 1 || !strings.Contains(errOut, "400 Bad Request E4001: lock_id does not match") {
		t.Fatalf("nack with a wrong lock id: exit %d, %q", code, errOut)
	}
	out = mustQueue(t, srv, "nack", "work", lockID)
	if out != "released 2 items of work; back in the queue at their place, and the lock is removed\n" {
		t.Fatalf("nack: %q", out)
	}
	// No 423: the lock is gone, and the items are back at their place, in priority order.
	if out = mustQueue(t, srv, "pop", "work", "--count", "3", "--json"); out != `{"items":["a","b","c"],"count":3}`+"\n" {
		t.Fatalf("pop after nack: %q", out)
	}
	out, errOut, code = queueRun(t, srv, "nack", "work", lockID, "--json")
	if code != 1 || !strings.Contains(errOut, "404 Not Found E4007: ") || !strings.Contains(out, `"message":"queue \"work\" has no active lock"`) {
		t.Fatalf("nack without a lock: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	mustQueue(t, srv, "push", "work", `{"d":4}`)
	out = mustQueue(t, srv, "pop", "work", "--ack", "--json")
	var pop struct {
		LockID string `json:"lock_id"`
	}
	json.Unmarshal([]byte(out), &pop)
	if out = mustQueue(t, srv, "nack", "work", pop.LockID, "--json"); out != `{"items_released":1,"lock_was_active":true,"queue":"work","success":true}`+"\n" {
		t.Fatalf("nack --json: %q", out)
	}
	if out = mustQueue(t, srv, "pop", "work", "--json"); out != `{"items":[{"d":4}],"count":1}`+"\n" {
		t.Fatalf("pop after nack --json: %q", out)
	}
}

// rejectOne dead-letters one item of a queue: it takes the item's lease the way any
// consumer can, with a consume watch of the queue's items, and rejects it.
func rejectOne(t *testing.T, srv *heraldtest.Server, queue string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan *client.Message, 1)
	sub, err := srv.Client().Subscribe(ctx, `WATCH i: QueueItem WHERE i.queue = $q [mode: consume] RETURN i`,
		func(_ context.Context, m *client.Message) error {
			select {
			case got <- m:
			default:
			}
			return nil
		}, client.WithPolicy(client.Manual), client.WithParams(map[string]any{"q": queue}))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close(ctx)
	select {
	case m := <-got:
		if err := m.Reject(ctx); err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatalf("no item of %s was delivered", queue)
	}
}

func TestQueueDLQ(t *testing.T) {
	srv := heraldtest.NewServer(t)
	mustQueue(t, srv, "push", "emails", `{"to":"ann"}`, "--priority", "4")
	mustQueue(t, srv, "push", "emails2", `"other queue"`)
	out := mustQueue(t, srv, "dlq", "emails")
	if out != " letter | item | reason | attempts | created at\n--------+------+--------+----------+------------\n(0 dead letters)\n" {
		t.Fatalf("empty dlq: %q", out)
	}
	// Dead-letter one item of each queue with NACK [no_retry] on its lease.
	for _, q := range []string{"emails", "emails2"} {
		rejectOne(t, srv, q)
	}
	out = mustQueue(t, srv, "dlq", "emails")
	lines := strings.Split(out, "\n")
	if len(lines) != 5 || !regexp.MustCompile(`^ letter +\| item         \| reason   \| attempts \| created at$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^ \S+ \| \{"to":"ann"\} \| no_retry \|        1 \| \d{4}-`).MatchString(lines[2]) || lines[3] != "(1 dead letter)" {
		t.Fatalf("dlq:\n%s", out)
	}
	out = mustQueue(t, srv, "dlq", "emails2", "--json")
	var got struct {
		Queue       string
		Count       int
		DeadLetters []struct {
			ID       string
			Item     json.RawMessage
			Priority json.RawMessage
			Reason   string `json:"failure_reason"`
			Attempts int    `json:"delivery_attempts"`
		} `json:"dead_letters"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Queue != "emails2" || got.Count != 1 || len(got.DeadLetters) != 1 {
		t.Fatalf("dlq --json: %q (%v)", out, err)
	}
	if l := got.DeadLetters[0]; string(l.Item) != `"other queue"` || string(l.Priority) != "0" || l.Reason != "no_retry" || l.Attempts != 1 || l.ID == "" {
		t.Fatalf("dlq --json letter: %+v", l)
	}
	if out = mustQueue(t, srv, "dlq", "nothing", "--json"); out != `{"count":0,"dead_letters":[],"queue":"nothing"}`+"\n" {
		t.Fatalf("dlq of another queue: %q", out)
	}
}

func TestQueueUsage(t *testing.T) {
	srv := heraldtest.NewServer(t)
	for _, args := range [][]string{
		{"push", "emails"},
		{"push", "emails", "not json"},
		{"push", "emails", "null"},
		{"push", "emails", "1", "--priority", "-1"},
		{"push", "emails", "1", "--priority", "x"},
		{"push", "bad/queue", "1"},
		{"pop"},
		{"pop", "emails", "--ttl", "10"},
		{"pop", "emails", "--ack", "--ttl", "0"},
		{"pop", "emails", "--count", "101"},
		{"ack", "emails"},
		{"nack", "emails", "a", "b"},
		{"stats", "a", "b"},
		{"dlq"},
		{"frobnicate"},
	} {
		if out, errOut, code := queueRun(t, srv, args...); code != 2 || out != "" || errOut == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	// A server that does not answer: exit 1.
	if _, errOut, err := run(t, "", "queue", "stats", "--addr", "http://127.0.0.1:1"); ExitCode(err) != 1 || errOut == "" {
		t.Errorf("unreachable server: exit %d, %q", ExitCode(err), errOut)
	}
	for cmd, example := range map[string]string{
		"push":  "herald queue push emails",
		"pop":   "herald queue pop emails --ack --ttl 60",
		"ack":   "herald queue ack emails",
		"nack":  "herald queue nack emails",
		"stats": "herald queue stats",
		"dlq":   "herald queue dlq emails",
	} {
		out, _, err := run(t, "", "queue", cmd, "--help")
		if err != nil || !strings.Contains(out, "Examples:\n  herald queue "+cmd) || !strings.Contains(out, example) || !strings.Contains(out, "--json") || !strings.Contains(out, "--addr") {
			t.Errorf("%s --help: %v\n%s", cmd, err, out)
		}
	}
	if out, _, err := run(t, "", "queue"); err != nil || !strings.Contains(out, "Available Commands:") {
		t.Errorf("queue without a command: %v\n%s", err, out)
	}
}
