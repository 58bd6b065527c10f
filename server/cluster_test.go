package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/testutil"
)

// startClusterNodes starts one node per name on a new schema of the test PostgreSQL,
// in order (so the first leads), with a short lease; the schema is dropped once the
// nodes have stopped.
func startClusterNodes(t *testing.T, names ...string) []*Server {
	t.Helper()
	dsn, schema := testutil.PostgresDSN(t), testutil.SchemaName()
	t.Cleanup(func() { testutil.DropSchema(dsn, schema) }) // runs after the nodes' Stop
	var nodes []*Server
	for _, name := range names {
		s := New(Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Store: dsn, StoreSchema: schema,
			NodeName: name, LeaseTTL: time.Second, Logger: quietLogger()})
		start(t, s)
		nodes = append(nodes, s)
	}
	return nodes
}

// readyz asks a node's /readyz with query (e.g. "?role=leader") and returns the
// status and the body's role and leader.
func readyz(t *testing.T, s *Server, query string) (status int, role, leader string) {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr() + "/readyz" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Status, Role, Leader string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("/readyz%s: %v", query, err)
	}
	return resp.StatusCode, body.Role, body.Leader
}

// On two nodes sharing PostgreSQL, /readyz?role=leader answers 200 on the leader
// only and /readyz?role=follower on the follower only, each body naming the node's
// role and the leader; when the leader stops, the follower takes over and the answers
// swap over to it.
func TestReadyzByRoleOnACluster(t *testing.T) {
	nodes := startClusterNodes(t, "a", "b")
	a, b := nodes[0], nodes[1]
	leaderURL := "http://" + a.Addr()
	for _, c := range []struct {
		node   *Server
		query  string
		status int
		role   string
	}{
		{a, "", 200, RoleLeader},
		{a, "?role=leader", 200, RoleLeader},
		{a, "?role=follower", 503, RoleLeader},
		{b, "", 200, RoleFollower},
		{b, "?role=follower", 200, RoleFollower},
		{b, "?role=leader", 503, RoleFollower},
	} {
		status, role, leader := readyz(t, c.node, c.query)
		if status != c.status || role != c.role || leader != leaderURL {
			t.Fatalf("%s /readyz%s: %d, role %q, leader %q; want %d, %q, %q", c.node.Addr(), c.query, status, role, leader, c.status, c.role, leaderURL)
		}
	}

	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, role, leader := readyz(t, b, "?role=leader")
		if status == 200 && role == RoleLeader && leader == "http://"+b.Addr() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b did not take over: /readyz?role=leader answers %d, role %q, leader %q", status, role, leader)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status, _, _ := readyz(t, b, "?role=follower"); status != 503 {
		t.Fatalf("b leads, and /readyz?role=follower answers %d", status)
	}
}

// A leader whose connections to PostgreSQL are cut fails its next commit (E5002); it
// then gives the lease up and starts again as a follower, and a leader with working
// services takes over, so that writes go on without anybody restarting a node.
func TestLeaderWhoseStoreFailedHandsOver(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Skipf("cutting a node's connections needs psql, which is not installed: %v", err)
	}
	dsn, schema := testutil.PostgresDSN(t), testutil.SchemaName()
	t.Cleanup(func() { testutil.DropSchema(dsn, schema) })
	app := schema + "_a" // the leader's connections, by their application_name
	var nodes []*Server
	for _, n := range []struct{ name, dsn string }{{"a", withParam(dsn, "application_name", app)}, {"b", dsn}} {
		s := New(Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Store: n.dsn, StoreSchema: schema,
			NodeName: n.name, LeaseTTL: time.Second, Logger: quietLogger()})
		start(t, s)
		nodes = append(nodes, s)
	}
	a := nodes[0]
	if code, body := post(t, a.Addr(), `SPAWN j: Job { n = 1 }`); code != 200 {
		t.Fatalf("a write before the cut: %d %v", code, body)
	}
	cut := exec.Command(psql, dsn, "-Atc", "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '"+app+"'")
	if out, err := cut.CombinedOutput(); err != nil {
		t.Fatalf("cutting a's connections: %v: %s", err, out)
	}
	// Writes fail while a still leads with its failed engine, then go on: through
	// either node, which sends them to whichever leads.
	deadline := time.Now().Add(20 * time.Second)
	var wrote float64 // the write's seq
	for i := 0; ; i++ {
		code, body := post(t, nodes[i%2].Addr(), `SPAWN j: Job { n = 2 }`)
		if code == 200 {
			wrote, _ = body["seq"].(float64)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still fail: %d %v", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if wrote == 0 {
		t.Fatal("the write's answer carries no seq")
	}
	// b may follow again (a can win the lease back): a follower answers from what it has
	// applied, so the write is read once b answers at its seq or later (docs/scale.md).
	for {
		code, body := post(t, nodes[1].Addr(), `MATCH j: Job RETURN COUNT(j) AS n`)
		if seq, _ := body["seq"].(float64); code == 200 && seq < wrote && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if rows := fmt.Sprint(body["results"]); code != 200 || !strings.Contains(rows, "rows:[[2]]") {
			t.Fatalf("after the hand-over, the write at seq %v: %d %v", wrote, code, body)
		}
		return
	}
}

// withParam adds name=value to a connection string's query.
func withParam(dsn, name, value string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}
