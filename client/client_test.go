package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/api/convert"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
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
	down := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	down.Config.Protocols = &p
	down.Start()
	defer down.Close()
	_, err := Dial(ctx, down.URL+"/", WithLogger(slog.New(slog.DiscardHandler)))
	var he *herald.Error
	if !errors.As(err, &he) || he.Code != herald.CodeInternal || !strings.Contains(he.Message, "502") {
		t.Fatalf("Dial to a failing server: %v", err)
	}
}

func TestExecDecodesAnswers(t *testing.T) {
	f := newFakeServer(t)
	f.answer = func(q string, params map[string]any) (*heraldv1.ExecResponse, error) {
		node := herald.Map([]string{"id", "n"}, []herald.Value{herald.String("j1"), herald.Int(9007199254740993)})
		return &heraldv1.ExecResponse{Seq: 12, Tick: 7, Results: []*heraldv1.TypedResult{{
			Columns: []string{"j", "n"},
			Rows:    []*heraldv1.ValueList{{Values: []*heraldv1.Value{convert.ToWire(node), convert.ToWire(herald.Float(1.5))}}},
			Stats:   &heraldv1.Stats{RowsScanned: 3, Plan: "scan Job"},
		}}}, nil
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
	f.answer = func(q string, params map[string]any) (*heraldv1.ExecResponse, error) {
		return nil, herald.Errorf(herald.CodeSyntax, "expected identifier, found '['").At(1, 7)
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

// Publish sends a type and typed values on the publish stream, never query text.
func TestPublishSendsTypedValues(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	id, err := c.Publish(context.Background(), "Job", map[string]any{"title": `x" } KILL #y`, "priority": 3, "at": at, "tags": []string{"a"}})
	if err != nil || id != "n_1" {
		t.Fatalf("Publish = %q, %v", id, err)
	}
	m := recv(t, f.published)
	want := map[string]any{"title": `x" } KILL #y`, "priority": int64(3), "at": "2026-01-02T03:04:05Z", "tags": []any{"a"}}
	if m.GetType() != "Job" || !reflect.DeepEqual(plainParams(m.GetAttrs()), want) {
		t.Fatalf("published %v %v", m.GetType(), plainParams(m.GetAttrs()))
	}
	if id, err := c.Publish(context.Background(), "Job", nil, WithID("job_7")); err != nil || id != "job_7" {
		t.Fatalf("Publish WithID = %q, %v", id, err)
	}
	if m := recv(t, f.published); m.GetId() != "job_7" {
		t.Fatalf("published id %q", m.GetId())
	}
	// Asynchronous publishes are answered in order, each with its own id.
	futs := make([]*PublishFuture, 10)
	for i := range futs {
		futs[i] = c.PublishAsync("Job", map[string]any{"i": i})
	}
	for i, fut := range futs {
		id, seq, err := fut.Result()
		if err != nil || id != fmt.Sprintf("n_%d", i+3) || seq != 7 {
			t.Fatalf("future %d: %q %d %v", i, id, seq, err)
		}
	}
	if _, err := c.PublishAsync("Job", map[string]any{"m": map[string]any{}}).Wait(context.Background()); err == nil {
		t.Fatal("a map attribute was accepted")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(context.Background(), "Job", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
}

// The first frame of a publish stream carries attributes as a map of wire values; once
// the server's headers have said that it reads attrs_binary, later frames carry them as
// bytes, which decode to the same values. A server that never says so (one that predates
// the field and would drop the attributes) only ever gets the map.
func TestPublishSwitchesToBinaryAttrs(t *testing.T) {
	attrs := map[string]any{"title": "ünïcode", "priority": 3, "tags": []string{"a", "b"}}
	for _, binary := range []bool{false, true} {
		f := newFakeServer(t)
		f.binaryAttrs = binary
		c := f.dial(t)
		for i := range 3 {
			if _, err := c.Publish(context.Background(), "Job", attrs); err != nil {
				t.Fatal(err)
			}
			m := recv(t, f.published)
			wantBinary := binary && i > 0
			if (len(m.GetAttrsBinary()) > 0) != wantBinary || (m.GetAttrs() != nil) == wantBinary {
				t.Fatalf("server reads binary %v, publish %d: attrs %v, attrs_binary %q", binary, i, m.GetAttrs(), m.GetAttrsBinary())
			}
			got := plainParams(m.GetAttrs())
			if wantBinary {
				if i == 2 {
					// A null attribute keeps the map form: the binary one leaves nulls out.
					if _, err := c.Publish(context.Background(), "Job", map[string]any{"none": nil}); err != nil {
						t.Fatal(err)
					}
					if m := recv(t, f.published); m.GetAttrsBinary() != nil || m.GetAttrs()["none"] == nil {
						t.Fatalf("a null attribute went as attrs %v, attrs_binary %q", m.GetAttrs(), m.GetAttrsBinary())
					}
				}
				vals, err := convert.AttrsFromBinary(m.GetAttrsBinary(), "attribute")
				if err != nil {
					t.Fatal(err)
				}
				got = map[string]any{}
				for name, v := range vals {
					got[name] = v.Interface()
				}
			}
			want := map[string]any{"title": "ünïcode", "priority": int64(3), "tags": []any{"a", "b"}}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("server reads binary %v, publish %d: got %v, want %v", binary, i, got, want)
			}
		}
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
	select {
	case m := <-f.published:
		t.Fatalf("a refused publish reached the server: %v", m)
	default:
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
		// In a session it is a SPAWN statement in the session's transaction. The fake
		// answers it without rows; what matters is the session field.
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
	if err := bad.Close(ctx); herald.CodeOf(err) != herald.CodeNoSession {
		t.Fatalf("closing an unknown session: %v", err)
	}
}
