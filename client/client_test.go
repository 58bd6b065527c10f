package client

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
)

func TestDial(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(context.Background(), "MATCH j: Job RETURN j", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Exec after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestDialFailures(t *testing.T) {
	ctx := context.Background()
	if _, err := Dial(ctx, "127.0.0.1:7420"); err == nil || !strings.Contains(err.Error(), "http://") {
		t.Fatalf("Dial without a scheme: %v", err)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	defer down.Close()
	_, err := Dial(ctx, down.URL+"/", WithLogger(slog.New(slog.DiscardHandler)))
	var he *herald.Error
	if !errors.As(err, &he) || he.Code != herald.CodeInternal || !strings.Contains(he.Message, "502") {
		t.Fatalf("Dial to a failing server: %v", err)
	}
}

func TestExecDecodesAnswers(t *testing.T) {
	f := newFakeServer(t)
	f.answer = func(q string, params map[string]any) (int, any) {
		return 200, map[string]any{
			"results": []any{map[string]any{
				"columns": []string{"j", "n"},
				"rows":    []any{[]any{map[string]any{"id": "j1", "n": 9007199254740993}, 1.5}},
				"stats":   map[string]any{"rows_scanned": 3, "plan": "scan Job"},
			}},
			"seq": 12, "tick": 7,
		}
	}
	c := f.dial(t)
	resp, err := c.Exec(context.Background(), "MATCH j: Job WHERE j.n > $n RETURN j, j.n", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	want := &Response{Seq: 12, Tick: 7, Results: []Result{{
		Columns: []string{"j", "n"},
		Rows:    [][]any{{map[string]any{"id": "j1", "n": int64(9007199254740993)}, 1.5}},
		Stats:   Stats{RowsScanned: 3, Plan: "scan Job"},
	}}}
	if !reflect.DeepEqual(resp, want) {
		t.Fatalf("Exec = %#v\nwant %#v", resp, want)
	}
	if got := f.nextStmt(t); got != "MATCH j: Job WHERE j.n > $n RETURN j, j.n" {
		t.Fatalf("server got %q", got)
	}
	if (&Response{}).Last().Columns != nil {
		t.Fatal("Last of an empty response is not empty")
	}
}

func TestExecReturnsHeraldErrors(t *testing.T) {
	f := newFakeServer(t)
	f.answer = func(q string, params map[string]any) (int, any) {
		return 0, herald.Errorf(herald.CodeSyntax, "expected identifier, found '['").At(1, 7)
	}
	c := f.dial(t)
	_, err := c.Exec(context.Background(), "MATCH [", nil)
	var he *herald.Error
	if !errors.As(err, &he) {
		t.Fatalf("Exec error %v is not a *herald.Error", err)
	}
	want := herald.Error{Code: herald.CodeSyntax, Message: "expected identifier, found '['", Line: 1, Column: 7}
	if *he != want {
		t.Fatalf("error = %+v, want %+v", *he, want)
	}
	if !errors.Is(err, &herald.Error{Code: herald.CodeSyntax}) {
		t.Fatal("errors.Is by code does not match")
	}
}

func TestPublishSendsValuesAsParameters(t *testing.T) {
	f := newFakeServer(t)
	f.answer = func(q string, params map[string]any) (int, any) {
		return 200, map[string]any{"results": []any{map[string]any{"columns": []string{"m.id"}, "rows": []any{[]any{"n_1"}}}}}
	}
	c := f.dial(t)
	id, err := c.Publish(context.Background(), "Job", map[string]any{"title": `x" } KILL #y`, "priority": 3})
	if err != nil || id != "n_1" {
		t.Fatalf("Publish = %q, %v", id, err)
	}
	if got, want := f.nextStmt(t), "SPAWN m: Job { priority = $p0, title = $p1 } RETURNING m.id"; got != want {
		t.Fatalf("query %q, want %q", got, want)
	}
	f.mu.Lock()
	params := f.requests[len(f.requests)-1].Params
	f.mu.Unlock()
	if params["p1"] != `x" } KILL #y` || params["p0"].(interface{ String() string }).String() != "3" {
		t.Fatalf("params = %v", params)
	}

	if _, err := c.Publish(context.Background(), "Job", nil, WithID("job_7")); err != nil {
		t.Fatal(err)
	}
	if got, want := f.nextStmt(t), "SPAWN #job_7: Job RETURNING #job_7.id"; got != want {
		t.Fatalf("query %q, want %q", got, want)
	}
}

func TestPublishRefusesNonIdentifiers(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	ctx := context.Background()
	for _, tc := range []struct {
		typ   string
		attrs map[string]any
		opts  []PublishOption
	}{
		{typ: "Job; KILL #x"},
		{typ: ""},
		{typ: "Job", attrs: map[string]any{"a b": 1}},
		{typ: "Job", attrs: map[string]any{"1a": 1}},
		{typ: "Job", opts: []PublishOption{WithID("x: Job")}},
	} {
		if _, err := c.Publish(ctx, tc.typ, tc.attrs, tc.opts...); err == nil {
			t.Errorf("Publish(%q, %v) succeeded", tc.typ, tc.attrs)
		}
	}
	if got := f.drainStmts(); len(got) != 0 {
		t.Fatalf("refused publishes reached the server: %q", got)
	}
}

func TestSessions(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	ctx := context.Background()
	s, err := c.OpenSession(ctx)
	if err != nil || s.ID() != "s1" {
		t.Fatalf("OpenSession = %v, %v", s, err)
	}
	if _, err := s.Exec(ctx, "BEGIN", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "Job", nil, InSession(s)); err == nil {
		// The fake answers SPAWN without rows; what matters is the session field.
		t.Fatal("Publish accepted an answer without rows")
	}
	f.mu.Lock()
	sessions := []string{f.requests[0].Session, f.requests[1].Session}
	f.mu.Unlock()
	if sessions[0] != "s1" || sessions[1] != "s1" {
		t.Fatalf("requests carried sessions %q", sessions)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	bad := &Session{c: c, id: "nope"}
	if err := bad.Close(ctx); herald.CodeOf(err) != herald.CodeSession {
		t.Fatalf("closing an unknown session: %v", err)
	}
}
