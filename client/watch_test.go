package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

func nextEvent(t *testing.T, w *client.Watch) client.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ev
}

const taskWatch = `WATCH t: Task WHERE t.status = $s [delivery: reliable] RETURN t`

// The real server: initial, added, changed (with prev) and removed, then a resume from
// a position.
func TestWatchAgainstServer(t *testing.T) {
	srv := heraldtest.NewServer(t)
	srv.Exec(`SPAWN #t1: Task { status = "done", title = "a" }; SPAWN #t2: Task { status = "todo", title = "b" }`, nil)
	c := srv.Client()
	ctx := context.Background()
	w, err := c.Watch(ctx, taskWatch, client.WithParams(map[string]any{"s": "done"}))
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Close()
	if ev := nextEvent(t, w); ev.Type != herald.EventInitial || ev.Match["id"] != "t1" {
		t.Fatalf("initial: %+v", ev)
	}
	srv.Exec(`MATCH t: Task WHERE t.id = "t2" SET t.status = "done"`, nil)
	if ev := nextEvent(t, w); ev.Type != herald.EventAdded || ev.Match["id"] != "t2" {
		t.Fatalf("added: %+v", ev)
	}
	srv.Exec(`MATCH t: Task WHERE t.id = "t1" SET t.title = "z"`, nil)
	ev := nextEvent(t, w)
	if ev.Type != herald.EventChanged || ev.Match["title"] != "z" || ev.Prev["title"] != "a" {
		t.Fatalf("changed: %+v", ev)
	}
	if w.Position() != ev.Seq {
		t.Fatalf("position %d, want %d", w.Position(), ev.Seq)
	}
	srv.Exec(`KILL #t2`, nil)
	if ev := nextEvent(t, w); ev.Type != herald.EventRemoved || ev.Match["id"] != "t2" {
		t.Fatalf("removed: %+v", ev)
	}
	pos := w.Position()
	w.Close()

	// What happens while nobody watches arrives on resume, and nothing before it.
	srv.Exec(`MATCH t: Task WHERE t.id = "t1" SET t.status = "todo"`, nil)
	srv.Exec(`SPAWN #t3: Task { status = "done", title = "c" }`, nil)
	w2, err := c.Watch(ctx, taskWatch, client.WithParams(map[string]any{"s": "done"}), client.ResumeAfter(pos))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if ev := nextEvent(t, w2); ev.Type != herald.EventRemoved || ev.Match["id"] != "t1" || ev.Seq <= pos {
		t.Fatalf("resumed: %+v", ev)
	}
	if ev := nextEvent(t, w2); ev.Type != herald.EventAdded || ev.Match["id"] != "t3" {
		t.Fatalf("resumed: %+v", ev)
	}

	// Statements Watch does not serve are refused by the server.
	if _, err := c.Watch(ctx, `WATCH j: Job [mode: consume] RETURN j`); herald.CodeOf(err) != herald.CodeInvalidQuery {
		t.Fatalf("a consume statement: %v, want E1004 (consume statements go to Subscribe)", err)
	}
	if _, err := c.Watch(ctx, `MATCH j: Job RETURN j`); herald.CodeOf(err) != herald.CodeInvalidQuery {
		t.Fatalf("a MATCH statement: %v, want E1004", err)
	}
	if _, err := c.Subscribe(ctx, `WATCH t: Task RETURN t`, func(context.Context, *client.Message) error { return nil }); herald.CodeOf(err) != herald.CodeInvalidQuery {
		t.Fatalf("a watch-mode statement to Subscribe: %v, want E1004", err)
	}
}

// TestAnUnreadWatchHoldsUpNoOther: two watches share the client's call; one is never
// read. The other still gets every event, because the server sends a watch no more
// than its credit; and the unread one, reliable, loses nothing: it reads on from the
// change log once it is read again.
func TestAnUnreadWatchHoldsUpNoOther(t *testing.T) {
	defer client.SetWatchCredit(8)()
	srv := heraldtest.NewServer(t)
	c := srv.Client()
	ctx := context.Background()
	const w = `WATCH t: Task [delivery: reliable] RETURN t.title AS title`
	unread, err := c.Watch(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	defer unread.Close()
	read, err := c.Watch(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	defer read.Close()
	const n = 60
	for i := range n {
		srv.Exec(fmt.Sprintf(`SPAWN t: Task { status = "todo", title = "%d" }`, i), nil)
	}
	for _, watch := range []*client.Watch{read, unread} {
		for i := range n {
			ev := nextEvent(t, watch)
			if ev.Type != herald.EventAdded || ev.Match["title"] != fmt.Sprint(i) {
				t.Fatalf("event %d: %+v, want task %d added", i, ev, i)
			}
		}
	}
}
