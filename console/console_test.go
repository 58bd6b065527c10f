package console

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/broker/brokertest"
	"github.com/herald-mq/herald/internal/clock"
)

// fake is a node whose statements the test records and answers from a table.
func fake(t *testing.T) (*brokertest.Broker, *[]string) {
	var mu sync.Mutex
	var ran []string
	b := &brokertest.Broker{
		StatusFunc: func(context.Context) (broker.Status, error) {
			return broker.Status{Name: "n1", Role: broker.RoleLeader, Store: "memory", Seq: 7}, nil
		},
		ExecFunc: func(ctx context.Context, _, q string, params map[string]herald.Value) (*herald.Response, error) {
			mu.Lock()
			ran = append(ran, q)
			mu.Unlock()
			if p := herald.PrincipalFrom(ctx); p != nil && !p.Can(herald.ActRead, "_Watch") {
				return nil, herald.Errorf(herald.CodePermissionDenied, "%s may not read _Watch", p.Name)
			}
			res := herald.Result{Columns: []string{"n"}, Rows: [][]herald.Value{{herald.Int(3), herald.Int(1)}}}
			switch q {
			case stmtGroups:
				s := herald.String
				res.Rows = [][]herald.Value{{s("w1"), s("workers"), s(`WATCH j: Job [mode: consume, group: "workers"] RETURN j`), s("active"),
					herald.Int(9), herald.Int(2), herald.Duration(30e9), herald.Int(3), herald.Value{}, herald.Value{}}}
			case "MATCH m: Job RETURN COUNT(m)":
				if p := herald.PrincipalFrom(ctx); p != nil && !p.Can(herald.ActRead, "Job") {
					return nil, herald.Errorf(herald.CodePermissionDenied, "%s may not read Job", p.Name)
				}
				res.Rows = [][]herald.Value{{herald.Int(5)}}
			case "MATCH d: _DeadLetter WHERE d.id IN $ids KILL d":
				res = herald.Result{Stats: herald.Stats{NodesDeleted: len(params["ids"].AsList())}}
			case "MATCH d: _DeadLetter WHERE d.id IN $ids REDRIVE d":
				res = herald.Result{Columns: []string{"redriven"}, Rows: [][]herald.Value{{herald.Int(int64(len(params["ids"].AsList())))}}}
			}
			return &herald.Response{Results: []herald.Result{res}, Seq: 9}, nil
		},
	}
	return b, &ran
}

func get(t *testing.T, h http.Handler, p *herald.Principal, method, path string, form url.Values) (int, string, http.Header) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, "http://herald.test"+path, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://herald.test")
	}
	if p != nil {
		r = r.WithContext(herald.WithPrincipal(r.Context(), p))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String(), w.Header()
}

// The overview shows the node's role from Status and the counts its statements read.
func TestOverview(t *testing.T) {
	b, _ := fake(t)
	code, body, _ := get(t, New(b, Options{}), nil, "GET", "/ui/", nil)
	if code != 200 || !strings.Contains(body, `id="role">leader<`) || !strings.Contains(body, `id="groups">3<`) {
		t.Fatalf("%d %s", code, body)
	}
}

// A principal without grants gets the 403 page with E4013 and runs no statement; one
// with a grant that does not cover _Watch sees its pages, with the refusal in place of
// the figures it may not read.
func TestGrants(t *testing.T) {
	b, ran := fake(t)
	h := New(b, Options{Auth: true})
	code, body, _ := get(t, h, &herald.Principal{Name: "nobody"}, "GET", "/ui/queues", nil)
	if code != 403 || !strings.Contains(body, "E4013") || len(*ran) != 0 {
		t.Fatalf("no grants: %d %s (ran %v)", code, body, *ran)
	}
	code, body, _ = get(t, h, &herald.Principal{Name: "writer", Grants: []string{"write:Job"}}, "GET", "/ui/queues", nil)
	if code != 200 || !strings.Contains(body, "E4013") || !strings.Contains(body, "may not read _Watch") {
		t.Fatalf("writer: %d %s", code, body)
	}
}

// A group's figures: messages from its subject type's count, ready less the leases in
// flight; a principal that may read _Watch but not the subject's type sees a dash.
func TestQueueFigures(t *testing.T) {
	b, _ := fake(t)
	h := New(b, Options{Auth: true})
	_, body, _ := get(t, h, nil, "GET", "/ui/queues", nil)
	for _, want := range []string{`data-fig="g.w1.messages">5<`, `data-fig="g.w1.ready">3<`, `data-fig="g.w1.in_flight">2<`, "30s"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
	_, body, _ = get(t, h, &herald.Principal{Name: "ops", Grants: []string{"read:_Watch"}}, "GET", "/ui/queues", nil)
	if !strings.Contains(body, `data-fig="g.w1.messages">—<`) || !strings.Contains(body, `data-fig="g.w1.ready">—<`) {
		t.Errorf("a principal without read:Job sees\n%s", body)
	}
}

// A group's figures from the node's metrics: delayed, leased, the oldest ready age and
// the settlement totals of the series labelled with its group and subject type, on the
// page and in /ui/stats; a principal that may not read the type sees dashes (-1), and
// without a metrics source every one is a dash.
func TestQueueMetrics(t *testing.T) {
	b, _ := fake(t)
	series := func(name string, v float64, group, typ, queue string) herald.Metric {
		return herald.Metric{Name: name, Value: v, Labels: []herald.Label{{Name: "group", Value: group}, {Name: "type", Value: typ}, {Name: "queue", Value: queue}}}
	}
	metrics := func() []herald.Metric {
		return []herald.Metric{
			series("herald_consume_group_delayed", 4, "workers", "Job", ""),
			series("herald_consume_group_leased", 2, "workers", "Job", ""),
			series("herald_consume_group_oldest_ready_seconds", 12.7, "workers", "Job", ""),
			series("herald_consume_group_acked_total", 17, "workers", "Job", ""),
			series("herald_consume_group_nacked_total", 3, "workers", "Job", ""),
			series("herald_consume_group_dead_lettered_total", 1, "workers", "Job", ""),
			series("herald_consume_group_delayed", 99, "others", "Job", ""),   // another group
			series("herald_consume_group_delayed", 88, "workers", "Task", ""), // another type
			series("herald_consume_group_acked_total", 500, "_other", "", ""), // a sum of groups
		}
	}
	h := New(b, Options{Auth: true, Metrics: metrics})
	_, body, _ := get(t, h, nil, "GET", "/ui/queues", nil)
	for _, want := range []string{`data-fig="g.w1.delayed">4<`, `data-fig="g.w1.leased">2<`, `data-fig="g.w1.oldest_ready_seconds">12<`,
		`data-fig="g.w1.acked">17<`, `data-fig="g.w1.nacked">3<`, `data-fig="g.w1.dead_lettered">1<`} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
	_, js, _ := get(t, h, nil, "GET", "/ui/stats", nil)
	for _, want := range []string{`"leased":2,"delayed":4,"oldest_ready_seconds":12,"acked":17,"nacked":3,"dead_lettered":1`} {
		if !strings.Contains(js, want) {
			t.Errorf("no %s in /ui/stats: %s", want, js)
		}
	}
	ops := &herald.Principal{Name: "ops", Grants: []string{"read:_Watch"}}
	_, body, _ = get(t, h, ops, "GET", "/ui/queues", nil)
	for _, k := range []string{"delayed", "leased", "oldest_ready_seconds", "acked", "nacked", "dead_lettered"} {
		if want := `data-fig="g.w1.` + k + `">—<`; !strings.Contains(body, want) {
			t.Errorf("a principal without read:Job: no %s in\n%s", want, body)
		}
	}
	_, js, _ = get(t, h, ops, "GET", "/ui/stats", nil)
	if !strings.Contains(js, `"leased":-1,"delayed":-1,"oldest_ready_seconds":-1,"acked":-1,"nacked":-1,"dead_lettered":-1`) {
		t.Errorf("a principal without read:Job gets from /ui/stats: %s", js)
	}
	_, body, _ = get(t, New(b, Options{Auth: true}), nil, "GET", "/ui/queues", nil)
	if !strings.Contains(body, `data-fig="g.w1.delayed">—<`) {
		t.Errorf("without metrics:\n%s", body)
	}
}

// A form posted from another origin is refused before anything runs.
func TestCrossOriginPostRefused(t *testing.T) {
	b, ran := fake(t)
	r := httptest.NewRequest("POST", "http://herald.test/ui/dead-letters", strings.NewReader("action=purge&scope=all"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "http://evil.test")
	w := httptest.NewRecorder()
	New(b, Options{}).ServeHTTP(w, r)
	if w.Code != 403 || len(*ran) != 0 {
		t.Fatalf("%d, ran %v", w.Code, *ran)
	}
}

// The dead-letter actions run the statement forms: REDRIVE d or KILL d over the
// selection by id, and over the filter for all matching.
func TestDeadLetterStatements(t *testing.T) {
	b, ran := fake(t)
	h := New(b, Options{})
	code, _, hdr := get(t, h, nil, "POST", "/ui/dead-letters", url.Values{"action": {"redrive"}, "ids": {"dla", "dlb"}})
	if code != 303 || !strings.Contains(hdr.Get("Location"), "2+dead+letters+redriven") {
		t.Fatalf("redrive: %d %v", code, hdr)
	}
	_, _, hdr = get(t, h, nil, "POST", "/ui/dead-letters", url.Values{"act": {"purge dlc"}})
	if !strings.Contains(hdr.Get("Location"), "1+dead+letter+purged") {
		t.Fatalf("purge: %v", hdr)
	}
	get(t, h, nil, "POST", "/ui/dead-letters", url.Values{"action": {"purge"}, "scope": {"all"}, "reason": {"no_retry"}})
	code, body, _ := get(t, h, nil, "POST", "/ui/dead-letters", url.Values{"action": {"redrive"}, "ids": {"dl x"}})
	if code != 400 || !strings.Contains(body, "E4001") {
		t.Fatalf("bad id: %d %s", code, body)
	}
	all := strings.Join(*ran, "\n")
	for _, want := range []string{"MATCH d: _DeadLetter WHERE d.id IN $ids REDRIVE d", "MATCH d: _DeadLetter WHERE d.id IN $ids KILL d",
		"MATCH d: _DeadLetter WHERE d.failure_reason = $reason KILL d"} {
		if !strings.Contains(all, want) {
			t.Errorf("no %q among the statements:\n%s", want, all)
		}
	}
}

// Signing in keeps the token in an HttpOnly, SameSite=Strict cookie on the console's
// path, which Token reads back for console paths only.
func TestLoginCookie(t *testing.T) {
	b, _ := fake(t)
	code, _, hdr := get(t, New(b, Options{Auth: true}), nil, "POST", "/ui/login", url.Values{"token": {"hrd_secret"}})
	c := hdr.Get("Set-Cookie")
	if code != 303 || !strings.Contains(c, CookieName+"=hrd_secret") || !strings.Contains(c, "HttpOnly") ||
		!strings.Contains(c, "SameSite=Strict") || !strings.Contains(c, "Path=/ui") {
		t.Fatalf("%d %q", code, c)
	}
	for path, want := range map[string]string{"/ui/queues": "hrd_secret", "/v1/query": ""} {
		r := httptest.NewRequest("GET", path, nil)
		r.AddCookie(&http.Cookie{Name: CookieName, Value: "hrd_secret"})
		if got := Token(r); got != want {
			t.Errorf("Token(%s) = %q, want %q", path, got, want)
		}
	}
}

// The tail opens the pattern in watch mode only, as the principal, passes each event
// as a server-sent event, and closes the stream when the browser leaves.
func TestTailEvents(t *testing.T) {
	st := brokertest.NewStream(broker.ModeWatch, 4)
	opened := make(chan broker.StreamRequest, 1)
	b := &brokertest.Broker{OpenFunc: func(ctx context.Context, req broker.StreamRequest) (broker.Stream, error) {
		opened <- req
		return st, nil
	}}
	srv := httptest.NewServer(New(b, Options{}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/ui/tail/events?pattern="+url.QueryEscape("WATCH j: Job RETURN j"), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-opened; got.Query != "WATCH j: Job RETURN j" || got.Only != broker.ModeWatch {
		t.Fatalf("opened %+v", got)
	}
	st.Send(herald.Event{Type: herald.EventAdded, Match: herald.Int(7), Seq: 3})
	line := make([]byte, 256)
	n, _ := resp.Body.Read(line)
	if got := string(line[:n]); !strings.HasPrefix(got, `data: {"type":"added","match":7,"seq":3`) {
		t.Fatalf("the tail wrote %q", got)
	}
	cancel()
	resp.Body.Close()
	<-st.Closed()
}

// A quiet tail sends its keep-alive comment when the handler's clock has moved by
// tailPing, and again after as long, not on the wall clock.
func TestTailPingsOnTheClock(t *testing.T) {
	st := brokertest.NewStream(broker.ModeWatch, 4)
	b := &brokertest.Broker{OpenFunc: func(ctx context.Context, req broker.StreamRequest) (broker.Stream, error) {
		return st, nil
	}}
	clk := clock.NewManual(time.Unix(1700000000, 0))
	srv := httptest.NewServer(New(b, Options{Clock: clk}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/ui/tail/events?pattern="+url.QueryEscape("WATCH j: Job RETURN j"), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	reads := make(chan string)
	go func() {
		defer close(reads)
		buf := make([]byte, 256)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				reads <- string(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	for range 2 {
		for deadline := time.Now().Add(10 * time.Second); clk.Pending() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the tail armed no ping timer")
			}
		}
		select {
		case got := <-reads:
			t.Fatalf("the tail wrote %q before its clock moved", got)
		case <-time.After(50 * time.Millisecond):
		}
		clk.Advance(tailPing)
		select {
		case got := <-reads:
			if got != ": ping\n\n" {
				t.Fatalf("the tail wrote %q, want its ping", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no ping once the clock moved")
		}
	}
}
