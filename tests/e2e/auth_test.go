package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
)

// authDo sends one request with a bearer token ("" for none) and returns the status and
// the body (the first part of it, for a stream).
func authDo(t *testing.T, method, url, token string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)) // a stream stops at the deadline
	return resp.StatusCode, string(b)
}

// consumeOne opens a consume stream with a token and returns the delivery id of its
// first message; the stream stays open (the lease held) until stop.
func consumeOne(t *testing.T, url, token string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := streamClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		cancel()
		t.Fatalf("an allowed consume stream: %v %v", resp, err)
	}
	events := make(chan event, 16)
	go func() { _ = readEvents(ctx, resp.Body, events) }()
	stop := func() { cancel(); resp.Body.Close() }
	select {
	case ev := <-events:
		if ev.DeliveryID == "" {
			stop()
			t.Fatalf("first event %+v, want a delivery", ev)
		}
		return ev.DeliveryID, stop
	case <-time.After(eventWait):
		stop()
		t.Fatal("no delivery on the allowed consume stream")
	}
	panic("unreachable")
}

// openHandle opens a stream with a token and waits for the server's answer; the
// stream stays open until stop.
func openHandle(t *testing.T, url, token string) (*http.Response, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := streamClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		cancel()
		t.Fatalf("open %s: %v %v", url, resp, err)
	}
	return resp, func() { cancel(); resp.Body.Close() }
}

// TestPermissionsOnEverySurface: a principal without a grant is refused on each surface
// — a query that reads a type, one that reads a node by #id, a write, a schema change,
// a watch (by pattern and through an #id reference), a consume stream, a settlement,
// the queue REST API and the RPC service — while what its grants allow goes through.
func TestPermissionsOnEverySurface(t *testing.T) {
	s := startServer(t, t.TempDir(), "--auth")
	u := s.URL()
	// A credential-less client on loopback acts as "local", with every grant.
	mustQuery(t, u, `node Secret { v: String } node Other { k: String } node PJob { n: Int }`)
	mustQuery(t, u, `SPAWN #s1: Secret { v = "classified" } SPAWN #o1: Other { k = "public" } SPAWN #j1: PJob { n = 1 }`)

	out, err := exec.Command(binary, "token", "create", "--addr", u, "--principal", "limited", "--json",
		"--grant", "read:Other", "--grant", "watch:Other", "--grant", "write:Other",
		"--grant", "read:PJob", "--grant", "consume:PJob").CombinedOutput()
	if err != nil {
		t.Fatalf("herald token create: %v\n%s", err, out)
	}
	var tok struct{ Token, ID string }
	if err := json.Unmarshal(out, &tok); err != nil || !strings.HasPrefix(tok.Token, "hrd_") {
		t.Fatalf("token create printed %s (%v)", out, err)
	}
	T := tok.Token

	denied := func(what string, status int, body, code string) {
		t.Helper()
		if status != 403 || !strings.Contains(body, `"`+code+`"`) {
			t.Errorf("%s: %d %s, want 403 %s", what, status, body, code)
		}
	}
	// The command line brings the token with --token.
	if out, err := exec.Command(binary, "query", "--addr", u, "--token", T, "-e", `MATCH o: Other RETURN o.k`).CombinedOutput(); err != nil || !strings.Contains(string(out), "public") {
		t.Fatalf("herald query --token: %v\n%s", err, out)
	}
	if out, err := exec.Command(binary, "query", "--addr", u, "--token", T, "-e", `MATCH s: Secret RETURN s.v`).CombinedOutput(); err == nil || !strings.Contains(string(out), "E4013") {
		t.Fatalf("herald query --token of a type without read: %v\n%s", err, out)
	}
	q := func(stmt string) (int, string) {
		return authDo(t, http.MethodPost, u+"/v1/query", T, map[string]any{"query": stmt})
	}
	if st, body := q(`MATCH o: Other RETURN o.k`); st != 200 || !strings.Contains(body, "public") {
		t.Fatalf("an allowed read: %d %s", st, body)
	}
	st, body := q(`MATCH s: Secret RETURN s.v`)
	denied("MATCH of a type without read", st, body, "E4013")
	st, body = q(`MATCH o: Other RETURN o.k, #s1.v`)
	denied("a read through #s1", st, body, "E4013")
	st, body = q(`SPAWN x: Secret { v = "planted" }`)
	denied("SPAWN of a type without write", st, body, "E4013")
	st, body = q(`node Planted { a: Int }`)
	denied("a schema change without admin", st, body, "E4013")
	if st, body := q(`SPAWN x: Other { k = "mine" }`); st != 200 {
		t.Fatalf("an allowed write: %d %s", st, body)
	}

	watch := func(stmt string) (int, string) {
		return authDo(t, http.MethodGet, watchURL(u, "", stmt), T, nil)
	}
	st, body = watch(`WATCH o: Other RETURN o.k, #s1.v`)
	denied("a watch reading #s1", st, body, "E8001")
	st, body = watch(`WATCH s: Secret RETURN s`)
	denied("a watch on a type without watch", st, body, "E8001")
	st, body = watch(`WATCH o: Other [mode: consume] RETURN o`)
	denied("a consume stream without consume", st, body, "E8001")

	// Consume is granted on PJob, settle is not: the delivery comes, its ACK is refused.
	did, stop := consumeOne(t, watchURL(u, "", `WATCH j: PJob [mode: consume] RETURN j`), T)
	defer stop()
	st, body = q(`ACK "` + did + `"`)
	denied("ACK without settle", st, body, "E4013")
	st, body = authDo(t, http.MethodPost, u+"/v1/settle", T, map[string]any{"settlements": []map[string]any{{"delivery_id": did, "action": "ack"}}})
	if !strings.Contains(body, "E4013") {
		t.Errorf("POST /v1/settle without settle: %d %s", st, body)
	}

	st, body = authDo(t, http.MethodPost, u+"/queue/q1/push", T, map[string]any{"item": 1})
	denied("a queue push without write:QueueItem", st, body, "E4013")
	st, body = authDo(t, http.MethodPost, u+"/queue/q1/pop", T, nil)
	denied("a queue pop without consume:QueueItem", st, body, "E4013")

	// The RPC service, through the Go client with the token.
	ctx := context.Background()
	c, err := client.Dial(ctx, u, client.WithToken(T), client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r, err := c.Exec(ctx, `MATCH o: Other RETURN COUNT(o)`, nil); err != nil || r.Results[0].Rows[0][0] != int64(2) {
		t.Fatalf("an allowed read over RPC: %v %v", r, err)
	}
	if _, err := c.Exec(ctx, `MATCH s: Secret RETURN s`, nil); err == nil || !strings.Contains(err.Error(), "E4013") {
		t.Errorf("a read without grant over RPC: %v", err)
	}
	if _, err := c.Publish(ctx, "Secret", map[string]any{"v": "planted"}); err == nil || !strings.Contains(err.Error(), "E4013") {
		t.Errorf("a publish without grant over RPC: %v", err)
	}

	// Revoked, the token gets nothing more.
	if out, err := exec.Command(binary, "token", "revoke", "--addr", u, tok.ID).CombinedOutput(); err != nil {
		t.Fatalf("herald token revoke: %v\n%s", err, out)
	}
	if st, body := q(`MATCH o: Other RETURN o.k`); st != 401 || !strings.Contains(body, "E4014") {
		t.Errorf("a revoked token: %d %s, want 401 E4014", st, body)
	}
}

// TestAuthLoopback: with --auth-loopback even local clients need credentials; a token
// works from the command line.
func TestAuthLoopback(t *testing.T) {
	s := startServer(t, t.TempDir(), "--auth", "--auth-loopback")
	u := s.URL()
	if st, body := authDo(t, http.MethodPost, u+"/v1/query", "", map[string]any{"query": `MATCH n: Any RETURN n`}); st != 401 || !strings.Contains(body, "E4014") {
		t.Fatalf("no credentials: %d %s, want 401 E4014", st, body)
	}
	if st, body := authDo(t, http.MethodPost, u+"/v1/query", "hrd_forged", map[string]any{"query": `MATCH n: Any RETURN n`}); st != 401 {
		t.Fatalf("a forged token: %d %s, want 401", st, body)
	}
	if st, _ := authDo(t, http.MethodGet, u+"/healthz", "", nil); st != 200 {
		t.Fatalf("/healthz needs no credentials: %d", st)
	}
}

// TestSessionsBelongToTheirPrincipal: a session opened with a token acts as its
// principal's node (#self), so the inbox pattern gives each principal its own
// messages; another principal cannot use the session, and BEGIN SESSION AS another
// actor needs admin.
func TestSessionsBelongToTheirPrincipal(t *testing.T) {
	s := startServer(t, t.TempDir(), "--auth")
	u := s.URL()
	tokens := map[string]string{}
	for _, name := range []string{"bob", "ann"} {
		out, err := exec.Command(binary, "token", "create", "--addr", u, "--principal", name, "--json",
			"--grant", "read:Msg", "--grant", "consume:Msg", "--grant", "settle:Msg", "--grant", "consume:inbox").CombinedOutput()
		if err != nil {
			t.Fatalf("token for %s: %v\n%s", name, err, out)
		}
		var tok struct{ Token string }
		if err := json.Unmarshal(out, &tok); err != nil {
			t.Fatal(err)
		}
		tokens[name] = tok.Token
	}
	mustQuery(t, u, `node Msg { body: String } edge inbox(owner: _Principal, m: Msg)`)
	mustQuery(t, u, `SPAWN a: Msg { body = "for bob" } LINK inbox(#`+string(herald.PrincipalNodeID("bob"))+`, a)
		SPAWN b: Msg { body = "for ann" } LINK inbox(#`+string(herald.PrincipalNodeID("ann"))+`, b)`)

	st, body := authDo(t, http.MethodPost, u+"/v1/sessions", tokens["bob"], nil)
	var sess struct{ Session string }
	if st != 200 || json.Unmarshal([]byte(body), &sess) != nil {
		t.Fatalf("bob's session: %d %s", st, body)
	}
	did, stop := consumeOne(t, watchURL(u, sess.Session, `WATCH m: Msg, inbox(#self, m) [mode: consume] RETURN m.body`), tokens["bob"])
	defer stop()
	if did == "" {
		t.Fatal("bob got no message")
	}
	st, body = authDo(t, http.MethodPost, u+"/v1/query", tokens["bob"], map[string]any{"query": `ACK "` + did + `"`})
	if st != 200 {
		t.Fatalf("bob's ACK: %d %s", st, body)
	}
	r := mustQuery(t, u, `MATCH m: Msg RETURN m.body`)
	if got := rowsJSON(r, 0); got != `[["for ann"]]` {
		t.Fatalf("after bob consumed his inbox: %s, want only ann's message left", got)
	}

	// Bob manages his own watch by its handle; ann may not manage it by its _Watch id.
	_, stop2 := openHandle(t, watchURL(u, sess.Session, `h = WATCH m: Msg, inbox(#self, m) [mode: consume, group: "bobs"] RETURN m.body`), tokens["bob"])
	defer stop2()
	if st, body := authDo(t, http.MethodPost, u+"/v1/query", tokens["bob"], map[string]any{"query": `PAUSE WATCH h`, "session": sess.Session}); st != 200 {
		t.Fatalf("bob pausing his own watch: %d %s", st, body)
	}
	var wid string
	if err := json.Unmarshal(mustQuery(t, u, `MATCH w: _Watch WHERE w.group = "bobs" RETURN w.id`).Results[0].Rows[0][0], &wid); err != nil {
		t.Fatal(err)
	}
	st, body = authDo(t, http.MethodPost, u+"/v1/query", tokens["ann"], map[string]any{"query": `RESUME WATCH "` + wid + `"`})
	if st != 403 || !strings.Contains(body, "E4013") {
		t.Fatalf("ann resuming bob's watch by id: %d %s, want 403 E4013", st, body)
	}

	st, body = authDo(t, http.MethodPost, u+"/v1/query", tokens["ann"], map[string]any{"query": `MATCH m: Msg RETURN m.body`, "session": sess.Session})
	if st != 404 || !strings.Contains(body, "E3004") {
		t.Fatalf("ann using bob's session: %d %s, want 404 E3004", st, body)
	}
	st, body = authDo(t, http.MethodPost, u+"/v1/query", tokens["bob"], map[string]any{"query": `BEGIN SESSION AS #` + string(herald.PrincipalNodeID("ann")), "session": sess.Session})
	if st != 403 || !strings.Contains(body, "E4013") {
		t.Fatalf("bob acting as ann: %d %s, want 403 E4013", st, body)
	}
}
