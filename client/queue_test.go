package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func items(p client.Popped) string {
	parts := make([]string, len(p.Items))
	for i, it := range p.Items {
		parts[i] = string(it)
	}
	return strings.Join(parts, " ")
}

// Push, pop in priority order, and the counts of QueueStats.
func TestQueuePushPopStats(t *testing.T) {
	srv := heraldtest.NewServer(t)
	ctx := context.Background()
	c := srv.Client()
	emails := c.Queue("emails")
	pushed, err := emails.Push(ctx, raw(`{"to": "ann"}`), 2)
	if err != nil || pushed.ID == "" || pushed.Priority != 2 {
		t.Fatalf("push: %+v %v", pushed, err)
	}
	for _, it := range []string{`"urgent"`, `[1, 2]`} {
		if _, err := emails.Push(ctx, raw(it), map[string]int64{`"urgent"`: 0, `[1, 2]`: 2}[it]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Queue("reports").Push(ctx, raw(`7`), 1); err != nil {
		t.Fatal(err)
	}
	all, err := c.QueueStats(ctx)
	if err != nil || len(all) != 2 || all[0].Queue != "emails" || all[0].Items != 3 || all[0].Ready != 3 ||
		all[0].Priorities[0] != 1 || all[0].Priorities[2] != 2 || all[1].Queue != "reports" || all[1].LockExpiresAt != nil {
		t.Fatalf("stats: %+v %v", all, err)
	}

	p, err := emails.Pop(ctx, client.PopOptions{Count: 2})
	if err != nil || items(p) != `"urgent" {"to":"ann"}` || p.Locked {
		t.Fatalf("pop: %+v %v", p, err)
	}
	p, err = emails.Pop(ctx, client.PopOptions{Count: 5})
	if err != nil || items(p) != `[1,2]` {
		t.Fatalf("second pop: %+v %v", p, err)
	}
	// Drained, like never pushed to: Stats refuses it rather than report zeros.
	for _, q := range []string{"emails", "nosuch"} {
		if _, err := c.Queue(q).Stats(ctx); !errors.Is(err, herald.CodeNotFound) || !strings.Contains(err.Error(), `no queue "`+q+`"`) {
			t.Errorf("stats of %s: %v, want E4007", q, err)
		}
	}
}

// A locked pop: the lock refuses pops (E4021, with its expiry), a wrong lock id is
// E4001, Acknowledge removes the items, a second one is E4007, an expired lock E4022.
func TestQueueLock(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	srv := heraldtest.NewServer(t, heraldtest.WithManualClock(start))
	ctx := context.Background()
	q := srv.Client().Queue("jobs")
	for i, it := range []string{`{"n":1}`, `{"n":2}`} {
		if _, err := q.Push(ctx, raw(it), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := q.Pop(ctx, client.PopOptions{Count: 2, Lock: true, TTL: time.Minute})
	if err != nil || !p.Locked || p.LockID == "" || !p.LockExpiresAt.Equal(start.Add(time.Minute)) || len(p.Items) != 2 {
		t.Fatalf("locked pop: %+v %v", p, err)
	}
	locked, err := q.Pop(ctx, client.PopOptions{})
	if !errors.Is(err, herald.CodeQueueLocked) || !locked.LockExpiresAt.Equal(start.Add(time.Minute)) {
		t.Fatalf("pop while locked: %+v %v, want E4021 and the lock's expiry", locked, err)
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Locked != 2 || st.Ready != 0 || st.LockExpiresAt == nil || !st.LockExpiresAt.Equal(start.Add(time.Minute)) {
		t.Fatalf("stats while locked: %+v %v", st, err)
	}
	if _, err := q.Acknowledge(ctx, "AAAAAAAAAAAAAAAAAAAAAA"); !errors.Is(err, herald.CodeMalformedRequest) || !strings.Contains(err.Error(), "lock_id does not match") {
		t.Fatalf("wrong lock id: %v, want E4001", err)
	}
	if ack, err := q.Acknowledge(ctx, p.LockID); err != nil || ack.Acknowledged != 2 || ack.Returned != 0 {
		t.Fatalf("acknowledge: %+v %v", ack, err)
	}
	if _, err := q.Acknowledge(ctx, p.LockID); !errors.Is(err, herald.CodeNotFound) {
		t.Fatalf("second acknowledge: %v, want E4007", err)
	}

	if _, err := q.Push(ctx, raw(`"again"`), 0); err != nil {
		t.Fatal(err)
	}
	p, err = q.Pop(ctx, client.PopOptions{Lock: true, TTL: 5 * time.Second})
	if err != nil || !p.Locked {
		t.Fatalf("pop: %+v %v", p, err)
	}
	srv.Advance(6 * time.Second)
	if _, err := q.Acknowledge(ctx, p.LockID); !errors.Is(err, herald.CodeLockExpired) {
		t.Fatalf("late acknowledge: %v, want E4022", err)
	}
	if p, err = q.Pop(ctx, client.PopOptions{}); err != nil || items(p) != `"again"` {
		t.Fatalf("pop after expiry: %+v %v", p, err)
	}
	if p, err = q.Pop(ctx, client.PopOptions{Lock: true}); err != nil || p.Locked || len(p.Items) != 0 {
		t.Fatalf("locked pop of an empty queue: %+v %v", p, err)
	}
}

// Release gives the items back at their place and removes the lock at once.
func TestQueueRelease(t *testing.T) {
	srv := heraldtest.NewServer(t)
	ctx := context.Background()
	q := srv.Client().Queue("work")
	for i, it := range []string{`"a"`, `"b"`, `"c"`} {
		if _, err := q.Push(ctx, raw(it), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := q.Pop(ctx, client.PopOptions{Count: 2, Lock: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := q.Release(ctx, p.LockID); err != nil || n != 2 {
		t.Fatalf("release: %d %v", n, err)
	}
	if p, err := q.Pop(ctx, client.PopOptions{Count: 3}); err != nil || items(p) != `"a" "b" "c"` {
		t.Fatalf("pop after release: %+v %v", p, err)
	}
	if _, err := q.Release(ctx, p.LockID); !errors.Is(err, herald.CodeNotFound) || !strings.Contains(err.Error(), `queue "work" has no active lock`) {
		t.Fatalf("release without a lock: %v", err)
	}
}

// Arguments the queue API cannot take are refused before anything is sent.
func TestQueueArguments(t *testing.T) {
	srv := heraldtest.NewServer(t)
	ctx := context.Background()
	c := srv.Client()
	for name, err := range map[string]error{
		"bad id":       func() error { _, err := c.Queue("bad/queue").Push(ctx, raw(`1`), 0); return err }(),
		"null item":    func() error { _, err := c.Queue("q").Push(ctx, raw(`null`), 0); return err }(),
		"not JSON":     func() error { _, err := c.Queue("q").Push(ctx, raw(`not json`), 0); return err }(),
		"priority":     func() error { _, err := c.Queue("q").Push(ctx, raw(`1`), -1); return err }(),
		"TTL, no lock": func() error { _, err := c.Queue("q").Pop(ctx, client.PopOptions{TTL: time.Second}); return err }(),
		"count":        func() error { _, err := c.Queue("q").Pop(ctx, client.PopOptions{Count: -1}); return err }(),
		"stats id":     func() error { _, err := c.Queue("").Stats(ctx); return err }(),
	} {
		if !errors.Is(err, herald.CodeInvalidArgument) {
			t.Errorf("%s: %v, want E4019", name, err)
		}
	}
	for id, ok := range map[string]bool{"emails": true, "a.b-c_d~e:f": true, "": false, "a/b": false, "é": false, strings.Repeat("x", client.MaxQueueIDLength+1): false} {
		if client.ValidQueueID(id) != ok {
			t.Errorf("ValidQueueID(%q) = %v", id, !ok)
		}
	}
}

// DeadLetters lists the letters of the queue's items only.
func TestQueueDeadLetters(t *testing.T) {
	srv := heraldtest.NewServer(t)
	ctx := context.Background()
	c := srv.Client()
	if _, err := c.Queue("emails").Push(ctx, raw(`{"to":"ann"}`), 4); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Queue("other").Push(ctx, raw(`"x"`), 0); err != nil {
		t.Fatal(err)
	}
	if letters, err := c.Queue("emails").DeadLetters(ctx); err != nil || len(letters) != 0 {
		t.Fatalf("before: %v %v", letters, err)
	}
	// Reject every item through a consume watch of the queues' items.
	got := make(chan *client.Message, 2)
	mustSubscribe(t, c, `WATCH i: QueueItem [mode: consume] RETURN i`,
		func(_ context.Context, m *client.Message) error { got <- m; return nil }, client.WithPolicy(client.Manual), client.WithPrefetch(2))
	for range 2 {
		if err := recvT(t, got).Reject(ctx); err != nil {
			t.Fatal(err)
		}
	}
	letters, err := c.Queue("emails").DeadLetters(ctx)
	if err != nil || len(letters) != 1 {
		t.Fatalf("letters: %+v %v", letters, err)
	}
	l := letters[0]
	if string(l.Item) != `{"to":"ann"}` || l.Priority == nil || *l.Priority != 4 || l.Reason != "no_retry" || l.Attempts != 1 ||
		l.ID == "" || l.SubjectID == "" || l.CreatedAt.IsZero() {
		t.Fatalf("letter: %+v", l)
	}
}

// ExecJSON hands back the JSON API's answer as the server wrote it: a node's keys in
// their order, and the server's errors as *herald.Error.
func TestExecJSON(t *testing.T) {
	srv := heraldtest.NewServer(t)
	ctx := context.Background()
	c := srv.Client()
	got, err := c.ExecJSON(ctx, `SPAWN #t1: Task { title = "a", done = false }; MATCH t: Task WHERE t.title = $title RETURN t`, map[string]any{"title": "a"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"rows":[[{"id":"t1","_type":"Task","done":false,"title":"a"}]]`) || !strings.HasPrefix(string(got), `{"results":[`) || strings.HasSuffix(string(got), "\n") {
		t.Fatalf("answer %s", got)
	}
	sess, err := c.OpenSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	if _, err := sess.ExecJSON(ctx, `BEGIN; SPAWN x: Task { title = "b" }`, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := sess.ExecJSON(ctx, `MATCH t: Task WHERE t.title = "b" RETURN t.title; ROLLBACK`, nil); err != nil || !strings.Contains(string(got), `"rows":[["b"]]`) {
		t.Fatalf("session: %s %v", got, err)
	}
	_, err = c.ExecJSON(ctx, `MATCH t: Task RETURN ]`, nil)
	var he *herald.Error
	if !errors.As(err, &he) || he.Code != herald.CodeSyntax || he.Line != 1 || he.Column == 0 {
		t.Fatalf("syntax error: %v", err)
	}
}

// Principals and tokens: create, list, use, revoke.
func TestTokens(t *testing.T) {
	srv := heraldtest.NewServer(t)
	ctx := context.Background()
	c := srv.Client()
	if err := c.SetPrincipal(ctx, herald.Principal{Name: "ci", Grants: []string{"read:Job"}, StatementTimeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	secret, tok, err := c.CreateToken(ctx, "ci", "nightly")
	if err != nil || !strings.HasPrefix(secret, "hrd_") || tok.ID == "" || tok.Principal != "ci" || tok.Label != "nightly" {
		t.Fatalf("create: %q %+v %v", secret, tok, err)
	}
	list, err := c.Tokens(ctx)
	if err != nil || len(list) != 1 || list[0] != tok {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := c.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.RevokeToken(ctx, tok.ID); !errors.Is(err, herald.CodeNotFound) {
		t.Fatalf("revoke twice: %v, want E4007", err)
	}
	if err := c.SetPrincipal(ctx, herald.Principal{Name: "x", Grants: []string{"fly:Job"}}); !errors.Is(err, herald.CodeMalformedRequest) {
		t.Fatalf("a bad grant: %v, want E4001", err)
	}
	if err := c.SetPrincipal(ctx, herald.Principal{}); !errors.Is(err, herald.CodeInvalidArgument) {
		t.Fatalf("no name: %v, want E4019", err)
	}
}
