package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/internal/testutil"
	"github.com/herald-mq/herald/store/pgstore"
)

// clusterNode starts a node named name on the shared store (dsn, schema).
func clusterNode(t *testing.T, dsn, schema, name string) *Server {
	t.Helper()
	s := New(Config{Store: dsn, StoreSchema: schema, NodeName: name, Listen: "127.0.0.1:0", LeaseTTL: time.Second, Logger: quietLogger()})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

func postNoRedirect(t *testing.T, url, body string) (int, map[string]any, http.Header) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, resp.Header
}

func statusOf(t *testing.T, s *Server) broker.Status {
	t.Helper()
	st, err := s.status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitFor polls cond until it holds (a bound on a hang, not a timing).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two nodes on one PostgreSQL store: the first leads, the second follows, reads what
// the leader committed from its own graph, and sends writes to the leader; when the
// leader stops, the follower takes over.
func TestTwoNodesOnOneStore(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	schema := testutil.SchemaName()
	t.Cleanup(func() { _ = pgstore.DropSchema(context.Background(), dsn, schema) })

	a := clusterNode(t, dsn, schema, "a")
	b := clusterNode(t, dsn, schema, "b")
	aURL, bURL := "http://"+a.Addr(), "http://"+b.Addr()
	if st := statusOf(t, a); st.Role != RoleLeader || st.Store != "postgres" {
		t.Fatalf("a: %+v", st)
	}
	if st := statusOf(t, b); st.Role != RoleFollower || st.Leader != aURL {
		t.Fatalf("b: %+v", st)
	}

	for _, q := range []string{`SPAWN #j1: Job { n = 1 }`, `SPAWN #j2: Job { n = 2 }`} {
		if code, m, _ := postNoRedirect(t, aURL+"/v1/query", `{"query": "`+strings.ReplaceAll(q, `"`, `\"`)+`"}`); code != 200 {
			t.Fatalf("write on the leader: %d %v", code, m)
		}
	}
	waitFor(t, "the follower to read both jobs", func() bool {
		code, m, _ := postNoRedirect(t, bURL+"/v1/query", `{"query": "MATCH j: Job RETURN count(j)"}`)
		return code == 200 && strings.Contains(mustJSON(m["results"]), "[[2]]")
	})
	code, m, h := postNoRedirect(t, bURL+"/v1/query", `{"query": "SPAWN j: Job { n = 3 }"}`)
	if code != http.StatusTemporaryRedirect || h.Get("Location") != aURL+"/v1/query" {
		t.Fatalf("a write on the follower: %d %v %v", code, m, h.Get("Location"))
	}

	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to lead", func() bool { return statusOf(t, b).Role == RoleLeader })
	if code, m, _ := postNoRedirect(t, bURL+"/v1/query", `{"query": "SPAWN #j3: Job { n = 3 }"}`); code != 200 {
		t.Fatalf("a write on the new leader: %d %v", code, m)
	}
	if code, m, _ := postNoRedirect(t, bURL+"/v1/query", `{"query": "MATCH j: Job RETURN sum(j.n)"}`); code != 200 || !strings.Contains(mustJSON(m["results"]), "[[6]]") {
		t.Fatalf("the new leader's graph: %d %v", code, m)
	}
	if st := statusOf(t, b); len(st.Nodes) != 2 {
		t.Fatalf("nodes %+v", st.Nodes)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
