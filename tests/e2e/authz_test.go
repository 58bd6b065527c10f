package e2e

import (
	"bufio"
	"bytes"
	"context"
	enc "encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The authorization matrix: every statement form and surface a hostile principal was
// seen to get through, each tried by a principal without the grant it needs — the
// answer must be a refusal with its code, and nothing may change — and by one with it,
// which goes through.

// authzSchema is the graph the matrix runs on, made by the credential-less local client.
const authzSchema = `
node Other { v: String }
node Secret { v: String }
node AJob { n: Int }
edge owns(o: Other, s: Secret)
SPAWN #o1: Other { v = "o" }
SPAWN #s1: Secret { v = "hidden" }
LINK owns(#o1, #s1)
SPAWN #x1: Other { v = "plain" }
`

// tokenFor makes principal name with grants (replacing any it had) and a token for it.
func tokenFor(t *testing.T, u, name string, grants ...string) string {
	t.Helper()
	if grants == nil {
		grants = []string{}
	}
	if st, body := authDo(t, http.MethodPut, u+"/v1/principals/"+name, "", map[string]any{"grants": grants}); st != 200 {
		t.Fatalf("make principal %s: %d %s", name, st, body)
	}
	st, body := authDo(t, http.MethodPost, u+"/v1/tokens", "", map[string]any{"principal": name, "label": "matrix"})
	var tok struct{ Token string }
	if st != 200 || json.Unmarshal([]byte(body), &tok) != nil || tok.Token == "" {
		t.Fatalf("token for %s: %d %s", name, st, body)
	}
	return tok.Token
}

// authzState is everything the matrix may touch, read by the local client: what
// "nothing changed" compares.
func authzState(t *testing.T, u string) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`MATCH o: Other RETURN o ORDER BY o.id`,
		`MATCH s: Secret RETURN s ORDER BY s.id`,
		`MATCH j: AJob RETURN j ORDER BY j.id`,
		`MATCH owns(a, b) RETURN a.id, b.id ORDER BY a.id`,
		`MATCH m: QueueMessage RETURN m.id, m.queue ORDER BY m.id`,
		`MATCH i: QueueItem RETURN i.id ORDER BY i.id`,
		`MATCH q: _Queue RETURN q.name ORDER BY q.name`,
		`MATCH d: _DeadLetter RETURN COUNT(d)`,
	} {
		b.WriteString(rowsJSON(mustQuery(t, u, q), 0))
		b.WriteByte('\n')
	}
	return b.String()
}

// rpcAs calls a unary RPC in the Connect protocol (JSON) with a token and returns the
// HTTP status, the herald error code ("" on success) and the body.
func rpcAs(t *testing.T, u, token, procedure string, msg any) (int, string, string) {
	t.Helper()
	b, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, u+procedure, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Herald-Code"), string(body)
}

// rpcStream is a server-streaming RPC in the Connect protocol (JSON envelopes).
type rpcStream struct {
	resp   *http.Response
	cancel context.CancelFunc
	r      *bufio.Reader
}

// openRPCStream starts a server-streaming RPC with a token.
func openRPCStream(t *testing.T, u, token, procedure string, msg any) *rpcStream {
	t.Helper()
	b, _ := json.Marshal(msg)
	env := make([]byte, 5, 5+len(b))
	enc.BigEndian.PutUint32(env[1:], uint32(len(b)))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u+procedure, bytes.NewReader(append(env, b...)))
	req.Header.Set("Content-Type", "application/connect+json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := streamClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &rpcStream{resp: resp, cancel: cancel, r: bufio.NewReader(resp.Body)}
	t.Cleanup(s.close)
	return s
}

func (s *rpcStream) close() { s.cancel(); s.resp.Body.Close() }

// next reads the next envelope within eventWait: a message (its JSON), or the end of
// the stream with its herald error code ("" when it ended cleanly).
func (s *rpcStream) next(t *testing.T) (msg map[string]any, end bool, code string) {
	t.Helper()
	type frame struct {
		flags byte
		data  []byte
		err   error
	}
	got := make(chan frame, 1)
	go func() {
		var hdr [5]byte
		if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
			got <- frame{err: err}
			return
		}
		data := make([]byte, enc.BigEndian.Uint32(hdr[1:]))
		_, err := io.ReadFull(s.r, data)
		got <- frame{flags: hdr[0], data: data, err: err}
	}()
	select {
	case f := <-got:
		if f.err != nil {
			t.Fatalf("reading the stream: %v (status %d)", f.err, s.resp.StatusCode)
		}
		if f.flags&2 != 0 {
			var e struct {
				Error    *struct{ Code, Message string } `json:"error"`
				Metadata map[string][]string             `json:"metadata"`
			}
			_ = json.Unmarshal(f.data, &e)
			if e.Error == nil {
				return nil, true, ""
			}
			if c := e.Metadata["herald-code"]; len(c) > 0 {
				return nil, true, c[0]
			}
			return nil, true, e.Error.Code
		}
		_ = json.Unmarshal(f.data, &msg)
		return msg, false, ""
	case <-time.After(eventWait):
		t.Fatal("no frame on the stream")
	}
	panic("unreachable")
}

// sseAs opens GET /v1/watch with a token and returns the status, and for an open
// stream (200) its events; the stream closes at cleanup.
func sseAs(t *testing.T, u, token, statement string) (int, string, *wstream) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, watchURL(u, "", statement), nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	timer := time.AfterFunc(eventWait, cancel)
	resp, err := streamClient.Do(req)
	timer.Stop()
	if err != nil {
		cancel()
		t.Fatalf("open %s: %v", statement, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		cancel()
		return resp.StatusCode, string(b), nil
	}
	s := &wstream{events: make(chan wevent, 1024), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(s.events)
		defer resp.Body.Close()
		s.err = readWatchEvents(ctx, resp.Body, s.events)
	}()
	t.Cleanup(s.close)
	return 200, "", s
}

// outcome is what one attempt answered: an HTTP status and a herald code ("" for none).
type outcome struct {
	status int
	code   string
}

func (o outcome) refused() bool {
	return o.status == 401 || o.status == 403 || o.code == "E4013" || o.code == "E8001"
}

// codeIn finds the herald code in an answer's body ("" when there is none).
func codeIn(body string) string {
	i := strings.Index(body, `"code":"E`)
	if i < 0 {
		return ""
	}
	return body[i+8 : i+13]
}

// TestAuthorizationMatrix: each row is an operation a principal without the grant was
// seen to get through. The row runs it as a principal with its base grants (refused
// with the code given, and the graph unchanged) and as one with the extra grants too
// (not refused).
func TestAuthorizationMatrix(t *testing.T) {
	s := startServer(t, t.TempDir(), "--auth")
	u := s.URL()
	mustQuery(t, u, authzSchema)
	// A named queue with three messages, and a REST queue with an item.
	for _, call := range []struct {
		proc string
		msg  any
	}{
		{"/herald.v1.Queues/CreateQueue", map[string]any{"name": "mq"}},
		{"/herald.v1.Queues/Enqueue", map[string]any{"queue": "mq", "payload": "YQ=="}},
		{"/herald.v1.Queues/Enqueue", map[string]any{"queue": "mq", "payload": "Yg=="}},
		{"/herald.v1.Queues/Enqueue", map[string]any{"queue": "mq", "payload": "Yw=="}},
	} {
		if st, code, body := rpcAs(t, u, "", call.proc, call.msg); st != 200 {
			t.Fatalf("setup %s: %d %s %s", call.proc, st, code, body)
		}
	}
	if st, body := authDo(t, http.MethodPost, u+"/queue/rq/push", "", map[string]any{"item": map[string]any{"to": "ann"}}); st != 200 {
		t.Fatalf("setup push: %d %s", st, body)
	}

	query := func(tok, q string) func() outcome {
		return func() outcome {
			st, body := authDo(t, http.MethodPost, u+"/v1/query", tok, map[string]any{"query": q})
			return outcome{st, codeIn(body)}
		}
	}
	rpc := func(tok, proc string, msg any) func() outcome {
		return func() outcome {
			st, code, _ := rpcAs(t, u, tok, proc, msg)
			return outcome{st, code}
		}
	}
	watch := func(tok, stmt string) func() outcome {
		return func() outcome {
			st, body, _ := sseAs(t, u, tok, stmt)
			return outcome{st, codeIn(body)}
		}
	}
	rest := func(tok, method, path string, body any) func() outcome {
		return func() outcome {
			st, b := authDo(t, method, u+path, tok, body)
			return outcome{st, codeIn(b)}
		}
	}
	rows := []struct {
		name  string
		base  []string // the refused principal's grants
		extra []string // what the allowed one has besides
		code  string   // the refusal's code
		op    func(tok string) func() outcome
	}{
		// 1. The queue RPC checks its grants.
		{"Queues/CreateQueue", nil, []string{"admin"}, "E4013", func(tok string) func() outcome {
			return rpc(tok, "/herald.v1.Queues/CreateQueue", map[string]any{"name": "made-" + tok[4:10]})
		}},
		{"Queues/DeleteQueue", nil, []string{"admin"}, "E4013", func(tok string) func() outcome {
			return rpc(tok, "/herald.v1.Queues/DeleteQueue", map[string]any{"name": "no-such-queue"})
		}},
		{"Queues/RedriveDeadLetters", nil, []string{"admin"}, "E4013", func(tok string) func() outcome {
			return rpc(tok, "/herald.v1.Queues/RedriveDeadLetters", map[string]any{"queue": "mq"})
		}},
		{"Queues/Enqueue", nil, []string{"write:QueueMessage"}, "E4013", func(tok string) func() outcome {
			return rpc(tok, "/herald.v1.Queues/Enqueue", map[string]any{"queue": "mq", "payload": "ZA=="})
		}},
		// 2. ON MATCH DO writes only with the write grant.
		{"trigger SET", []string{"watch:Other"}, []string{"write:Other"}, "E4013", func(tok string) func() outcome {
			return watch(tok, `WATCH o: Other WHERE o.v = "never" ON MATCH DO SET o.v = "PWNED"`)
		}},
		{"trigger KILL", []string{"watch:Other"}, []string{"write:Other"}, "E4013", func(tok string) func() outcome {
			return watch(tok, `WATCH o: Other WHERE o.v = "never" ON MATCH DO KILL o`)
		}},
		{"trigger SPAWN", []string{"watch:Other"}, []string{"write:Secret"}, "E4013", func(tok string) func() outcome {
			return watch(tok, `WATCH o: Other WHERE o.v = "never" ON MATCH DO SPAWN n: Secret { v = "planted" }`)
		}},
		// 3. Edge endpoints read their types.
		{"MATCH endpoint", []string{"read:Other", "read:owns"}, []string{"read:Secret"}, "E4013", func(tok string) func() outcome {
			return query(tok, `MATCH owns(_, s) RETURN s`)
		}},
		{"MATCH endpoint in WHERE", []string{"read:Other", "read:owns"}, []string{"read:Secret"}, "E4013", func(tok string) func() outcome {
			return query(tok, `MATCH o: Other, owns(o, s) WHERE s.v = "hidden" RETURN o.id`)
		}},
		{"WATCH endpoint", []string{"watch:Other", "watch:owns"}, []string{"watch:Secret"}, "E8001", func(tok string) func() outcome {
			return watch(tok, `WATCH owns(_, s) RETURN s.v`)
		}},
		// 4. A statement refused for a read writes nothing.
		{"SET from a forbidden read", []string{"read:Other", "write:Other"}, []string{"read:Secret"}, "E4013", func(tok string) func() outcome {
			return query(tok, `MATCH o: Other WHERE o.id = "x1" SET o.v = #s1.v`)
		}},
		{"SPAWN from a forbidden read", []string{"read:Other", "write:Other"}, []string{"read:Secret"}, "E4013", func(tok string) func() outcome {
			return query(tok, `SPAWN x: Other { v = #s1.v }`)
		}},
		// 8/10. Nodes named by id, in a watch.
		{"WATCH reads #id", []string{"watch:Other"}, []string{"watch:Secret"}, "E8001", func(tok string) func() outcome {
			return watch(tok, `WATCH o: Other RETURN o.v, #s1.v`)
		}},
		// 11. The COUNT fast path.
		{"COUNT of a type", nil, []string{"read:Secret"}, "E4013", func(tok string) func() outcome {
			return query(tok, `MATCH s: Secret RETURN COUNT(s)`)
		}},
		{"COUNT of tokens", nil, []string{"read:_Token"}, "E4013", func(tok string) func() outcome {
			return query(tok, `MATCH k: _Token RETURN COUNT(k)`)
		}},
		{"COUNT of principals", nil, []string{"read:_Principal"}, "E4013", func(tok string) func() outcome {
			return query(tok, `MATCH p: _Principal RETURN COUNT(p)`)
		}},
		// 12. The queue REST API: release and pop need their grants before anything.
		{"REST release", nil, []string{"settle:QueueItem"}, "E4013", func(tok string) func() outcome {
			return rest(tok, http.MethodPost, "/queue/rq/release", map[string]any{"lock_id": "nope"})
		}},
		{"REST pop", []string{"consume:QueueItem"}, []string{"settle:QueueItem"}, "E4013", func(tok string) func() outcome {
			return rest(tok, http.MethodPost, "/queue/none-here/pop", nil)
		}},
	}
	for i, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			before := authzState(t, u)
			denied := tokenFor(t, u, fmt.Sprintf("denied%d", i), row.base...)
			if got := row.op(denied)(); !got.refused() || got.code != row.code {
				t.Fatalf("without %v: %+v, want a refusal with %s", row.extra, got, row.code)
			}
			if after := authzState(t, u); after != before {
				t.Fatalf("a refused operation changed the graph:\nbefore\n%s\nafter\n%s", before, after)
			}
			allowed := tokenFor(t, u, fmt.Sprintf("allowed%d", i), append(append([]string{}, row.base...), row.extra...)...)
			if got := row.op(allowed)(); got.refused() {
				t.Fatalf("with %v: refused %+v", row.extra, got)
			}
		})
	}
}

// TestConsumeGroupsBelongToTheirPrincipal: a second principal cannot join the first
// one's consume group (so it cannot alter its options, pause or cancel it through a
// handle of its own); the queue RPC settles a message by its id only for the
// principal it is leased to.
func TestConsumeGroupsBelongToTheirPrincipal(t *testing.T) {
	s := startServer(t, t.TempDir(), "--auth")
	u := s.URL()
	mustQuery(t, u, `SPAWN j: AJob { n = 1 }`)
	alice := tokenFor(t, u, "alice", "consume:AJob", "settle:AJob", "consume:QueueMessage", "settle:QueueMessage")
	bob := tokenFor(t, u, "bob", "consume:AJob", "settle:AJob", "consume:QueueMessage", "settle:QueueMessage")
	const group = `WATCH j: AJob [mode: consume, group: "gx"] RETURN j`
	_, stop := consumeOne(t, watchURL(u, "", group), alice)
	defer stop()
	if st, body := authDo(t, http.MethodGet, watchURL(u, "", group), bob, nil); st != 403 || codeIn(body) != "E4013" {
		t.Fatalf("bob joining alice's group: %d %s, want 403 E4013", st, body)
	}

	for _, call := range []struct {
		proc string
		msg  any
	}{
		{"/herald.v1.Queues/CreateQueue", map[string]any{"name": "shared"}},
		{"/herald.v1.Queues/Enqueue", map[string]any{"queue": "shared", "payload": "YQ=="}},
	} {
		if st, code, body := rpcAs(t, u, "", call.proc, call.msg); st != 200 {
			t.Fatalf("setup %s: %d %s %s", call.proc, st, code, body)
		}
	}
	stream := openRPCStream(t, u, alice, "/herald.v1.Queues/ConsumeQueue", map[string]any{"queue": "shared"})
	msg, end, code := stream.next(t)
	if end {
		t.Fatalf("alice's queue consumer ended: %s", code)
	}
	id, _ := msg["messageId"].(string)
	if id == "" {
		t.Fatalf("a queue message without an id: %v", msg)
	}
	if st, code, body := rpcAs(t, u, bob, "/herald.v1.Queues/Ack", map[string]any{"queue": "shared", "messageId": id}); st != 404 {
		t.Fatalf("bob acknowledging alice's message by its id: %d %s %s, want not_found", st, code, body)
	}
	if r := mustQuery(t, u, `MATCH m: QueueMessage RETURN COUNT(m)`); rowsJSON(r, 0) != "[[1]]" {
		t.Fatalf("after bob's ack the message is gone: %s", rowsJSON(r, 0))
	}
	if st, code, body := rpcAs(t, u, alice, "/herald.v1.Queues/Ack", map[string]any{"queue": "shared", "messageId": id}); st != 200 {
		t.Fatalf("alice acknowledging her message: %d %s %s", st, code, body)
	}
}

// TestWatchRecheckedWhenItsNodeChangesType: a watch that reads a node by id, opened
// while that node is a type the principal may watch, ends with E8001 when the node is
// replaced under the same id by one of a type it may not — the Secret's value never
// reaches it. A stream also ends when its token is revoked.
func TestWatchRecheckedWhenItsNodeChangesType(t *testing.T) {
	s := startServer(t, t.TempDir(), "--auth")
	u := s.URL()
	mustQuery(t, u, authzSchema)
	tok := tokenFor(t, u, "watcher", "watch:Other")
	st, body, w := sseAs(t, u, tok, `WATCH o: Other WHERE o.id = "o1" RETURN o.v, #x1.v AS x`)
	if st != 200 {
		t.Fatalf("open: %d %s", st, body)
	}
	if ev := w.next(t); ev.Type != "initial" || ev.Match["x"] != "plain" {
		t.Fatalf("first event %s", ev)
	}
	mustQuery(t, u, `KILL #x1`)
	mustQuery(t, u, `SPAWN #x1: Secret { v = "secret" }`)
	mustQuery(t, u, `SET #o1.v = "wake"`)
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				t.Fatalf("the stream ended without an error event: %v", w.err)
			}
			if strings.Contains(ev.String(), "secret") {
				t.Fatalf("the Secret reached the watch: %s", ev)
			}
			if ev.Type == "error" {
				if ev.Code != "E8001" {
					t.Fatalf("the stream ended with %s, want E8001", ev)
				}
				goto revoked
			}
		case <-time.After(eventWait):
			t.Fatal("the watch went on after its node became a Secret")
		}
	}
revoked:
	// A token revoked ends the streams it opened.
	tok2 := tokenFor(t, u, "watcher2", "watch:Other")
	_, _, w2 := sseAs(t, u, tok2, `WATCH o: Other RETURN o.v`)
	w2.next(t)
	st, b := authDo(t, http.MethodGet, u+"/v1/tokens", "", nil)
	var list struct {
		Tokens []struct{ ID, Principal string }
	}
	if st != 200 || json.Unmarshal([]byte(b), &list) != nil {
		t.Fatalf("list tokens: %d %s", st, b)
	}
	for _, k := range list.Tokens {
		if k.Principal == "watcher2" {
			if st, b := authDo(t, http.MethodDelete, u+"/v1/tokens/"+url.PathEscape(k.ID), "", nil); st != 204 {
				t.Fatalf("revoke: %d %s", st, b)
			}
		}
	}
	select {
	case <-w2.done:
	case <-time.After(eventWait):
		t.Fatal("a stream went on after its token was revoked")
	}
}

// TestDenyWatchCoversReferences: without --auth, --deny-watch refuses a watch that
// reads a denied type through a node it names by id — in RETURN, WHERE, a filter, or
// a consume watch's options — not only one whose pattern names the type.
func TestDenyWatchCoversReferences(t *testing.T) {
	s := startServer(t, t.TempDir(), "--deny-watch", "Secret")
	u := s.URL()
	mustQuery(t, u, authzSchema)
	for _, stmt := range []string{
		`WATCH o: Other RETURN #s1.v`,
		`WATCH o: Other WHERE o.v = #s1.v RETURN o`,
		`WATCH o: Other [filter: #s1.v = "hidden"] RETURN o`,
		`WATCH o: Other [mode: consume, fairness: #s1.v] RETURN o`,
		`WATCH o: Other [mode: consume, dead_letter: #s1] RETURN o`,
		`WATCH owns(_, s) RETURN s.v`,
	} {
		if st, body, _ := sseAs(t, u, "", stmt); st != 403 || codeIn(body) != "E8001" {
			t.Errorf("%s: %d %s, want 403 E8001", stmt, st, body)
		}
	}
	if st, body, _ := sseAs(t, u, "", `WATCH o: Other RETURN o.v`); st != 200 {
		t.Fatalf("a watch the policy allows: %d %s", st, body)
	}
}
