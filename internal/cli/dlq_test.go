package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker/brokertest"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
	"github.com/herald-mq/herald/rpcapi"
)

// dlqRun runs "herald dlq ARGS --addr URL" and returns stdout, stderr and the exit code.
func dlqRun(t *testing.T, addr string, args ...string) (string, string, int) {
	t.Helper()
	out, errOut, err := run(t, "", append(append([]string{"dlq"}, args...), "--addr", addr)...)
	return out, errOut, ExitCode(err)
}

func mustDLQ(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, errOut, code := dlqRun(t, addr, args...)
	if code != 0 {
		t.Fatalf("herald dlq %v: exit %d\nstdout %s\nstderr %s", args, code, out, errOut)
	}
	return out
}

// herald dlq against a real server: a consume group's letter and a REST queue item's,
// listed and filtered, redriven (and delivered again), purged behind its guard.
func TestDLQListRedrivePurge(t *testing.T) {
	srv := heraldtest.NewServer(t)
	ctx := context.Background()
	c := srv.Client()
	if _, err := c.Queue("jobs").Push(ctx, json.RawMessage(`{"n":1}`), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `SPAWN t: Task { n = 1 }`, nil); err != nil {
		t.Fatal(err)
	}
	got := make(chan *client.Message, 4)
	for _, stmt := range []string{
		`WATCH i: QueueItem [mode: consume, group: "inspect"] RETURN i`,
		`WATCH t: Task [mode: consume, group: "workers"] RETURN t.n`,
	} {
		sub, err := c.Subscribe(ctx, stmt, func(_ context.Context, m *client.Message) error { got <- m; return nil }, client.WithPolicy(client.Manual))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Close(context.Background()) })
	}
	for range 2 {
		if err := (<-got).Reject(ctx); err != nil {
			t.Fatal(err)
		}
	}

	out := mustDLQ(t, srv.URL(), "ls")
	if !strings.Contains(out, " jobs ") || !strings.Contains(out, " workers ") || !strings.HasSuffix(out, "(2 dead letters)\n") {
		t.Fatalf("ls:\n%s", out)
	}
	out = mustDLQ(t, srv.URL(), "ls", "--queue", "jobs", "--json")
	var list struct {
		Count   int             `json:"count"`
		Letters []client.Letter `json:"dead_letters"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || list.Count != 1 || list.Letters[0].Type != "QueueItem" || list.Letters[0].Group != "inspect" {
		t.Fatalf("ls --queue jobs --json: %s (%v)", out, err)
	}
	if out = mustDLQ(t, srv.URL(), "ls", "--older-than", "1h"); !strings.HasSuffix(out, "(0 dead letters)\n") {
		t.Fatalf("ls --older-than 1h:\n%s", out)
	}

	// The guard: purge without a filter is a usage error and deletes nothing.
	if _, errOut, code := dlqRun(t, srv.URL(), "purge"); code != 2 || !strings.Contains(errOut, "--all") {
		t.Fatalf("purge without a filter: exit %d, %q", code, errOut)
	}
	if _, _, code := dlqRun(t, srv.URL(), "ls", "--limit", "-1"); code != 2 {
		t.Fatalf("ls --limit -1: exit %d", code)
	}

	if out = mustDLQ(t, srv.URL(), "redrive", "--group", "workers", "--reason", "no_retry"); out != "redriven 1 dead letter\n" {
		t.Fatalf("redrive: %q", out)
	}
	select {
	case m := <-got:
		if m.Attempt != 1 {
			t.Fatalf("redelivered at attempt %d", m.Attempt)
		}
	case <-ctx.Done():
	}
	if out = mustDLQ(t, srv.URL(), "redrive", "--group", "workers", "--json"); out != `{"redriven":0}`+"\n" {
		t.Fatalf("redrive of none: %q", out)
	}
	if out = mustDLQ(t, srv.URL(), "purge", "--queue", "jobs", "--json"); out != `{"purged":1}`+"\n" {
		t.Fatalf("purge --queue jobs: %q", out)
	}
	if out = mustDLQ(t, srv.URL(), "purge", "--all"); out != "purged 0 dead letters\n" {
		t.Fatalf("purge --all: %q", out)
	}
}

// A refusal from the server is printed with its code and exits 1; --json prints it too.
func TestDLQRefused(t *testing.T) {
	denied := herald.Errorf(herald.CodePermissionDenied, "ann may not do this: it needs the admin grant")
	var queries []string
	b := &brokertest.Broker{ExecFunc: func(_ context.Context, _, query string, _ map[string]herald.Value) (*herald.Response, error) {
		queries = append(queries, query)
		return nil, denied
	}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, `{"status":"ok"}`) })
	mux.Handle(rpcapi.New(b, rpcapi.Options{}).Handler())
	srv := httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)

	out, errOut, code := dlqRun(t, srv.URL, "redrive", "--queue", "emails", "--json")
	if code != 1 || !strings.Contains(errOut, "E4013") || !strings.Contains(out, `"E4013"`) {
		t.Fatalf("refused redrive: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if len(queries) != 1 || queries[0] != `MATCH d: _DeadLetter WHERE d.queue = $queue REDRIVE d` {
		t.Fatalf("statements sent: %q", queries)
	}
	_, errOut, code = dlqRun(t, srv.URL, "purge", "--older-than", "24h")
	if code != 1 || !regexp.MustCompile(`E4013`).MatchString(errOut) || queries[1] != `MATCH d: _DeadLetter WHERE d.created_at <= now() - 24h KILL d` {
		t.Fatalf("refused purge: exit %d, %q, %q", code, errOut, queries)
	}
}
