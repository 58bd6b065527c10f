package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald/heraldtest"
	"github.com/herald-mq/herald/internal/testutil"
	"github.com/herald-mq/herald/server"
)

// clusterBroker answers GET /v1/cluster with a canned body.
func clusterBroker(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			io.WriteString(w, `{"status":"ok"}`)
		case "/v1/cluster":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body+"\n")
		default:
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"code":"E4007","name":"NOT_FOUND","message":"no"}}`)
		}
	}
}

const fourNodes = `{"name":"b","role":"follower","address":"http://10.0.0.2:7420","leader":"http://10.0.0.1:7420","term":4,"seq":1207,"store":"postgres","nodes":[` +
	`{"name":"a","address":"http://10.0.0.1:7420","role":"leader","seq":1210,"behind_seconds":0,"age_seconds":0.31},` +
	`{"name":"b","address":"http://10.0.0.2:7420","role":"follower","seq":1207,"behind_seconds":0.04,"age_seconds":0.6},` +
	`{"name":"c","address":"http://10.0.0.3:7420","role":"follower","seq":980,"behind_seconds":12.53,"age_seconds":93.2},` +
	`{"name":"d","address":"http://10.0.0.4:7420","role":"leader","seq":1100,"behind_seconds":0,"age_seconds":4000}]}`

// herald status prints the leader and term, the node that answered, and one row per
// node (one that reported leading before the lease moved "was leader"); --json prints
// the answer in the API's shape.
func TestStatusCommand(t *testing.T) {
	srv := serveFake(t, clusterBroker(fourNodes))
	out, errOut, err := run(t, "", "status", "--addr", srv.URL)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	want := `leader: a at http://10.0.0.1:7420, term 4
answered by: b (follower) at seq 1207
 name | role       | address              | seq  | behind | last report
------+------------+----------------------+------+--------+-------------
 a    | leader     | http://10.0.0.1:7420 | 1210 | 0s     | 0.3s ago
 b    | follower   | http://10.0.0.2:7420 | 1207 | 0s     | 0.6s ago
 c    | follower   | http://10.0.0.3:7420 |  980 | 12.5s  | 1m33.2s ago
 d    | was leader | http://10.0.0.4:7420 | 1100 | 0s     | 1h6m40s ago
(4 nodes on postgres)
`
	if out != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
	out, _, err = run(t, "", "status", "--json", "--addr", srv.URL)
	if err != nil || out != fourNodes+"\n" {
		t.Fatalf("--json: %v\n%s\nwant\n%s", err, out, fourNodes)
	}

	noLeader := serveFake(t, clusterBroker(`{"name":"b","role":"follower","address":"http://b","leader":"","term":4,"seq":7,"store":"postgres","nodes":[]}`))
	out, _, err = run(t, "", "status", "--addr", noLeader.URL)
	if err != nil || !strings.HasPrefix(out, "leader: none: no node holds the lease") || !strings.HasSuffix(out, "(0 nodes on postgres)\n") {
		t.Fatalf("without a leader: %v\n%s", err, out)
	}
}

// A broker on a store of its own leads alone; herald status says so.
func TestStatusCommandSingleNode(t *testing.T) {
	srv := heraldtest.NewServer(t)
	out, errOut, err := run(t, "", "status", "--addr", srv.URL())
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	want := regexp.MustCompile(`^leader: \S+ at ` + regexp.QuoteMeta(srv.URL()) + `, on a store of its own
answered by: \S+ \(leader\) at seq \d+
 name +\| role +\| address +\| seq +\| behind \| last report
-+\+-+\+-+\+-+\+-+\+-+
 \S+ +\| leader \| ` + regexp.QuoteMeta(srv.URL()) + ` \| +\d+ \| 0s +\| 0s ago
\(1 node on memory\)
$`)
	if !want.MatchString(out) {
		t.Fatalf("got:\n%s", out)
	}
}

// A broker that cannot be reached is E4025 UNREACHABLE with exit status 1 (and the
// error body on stdout with --json); a usage error is exit status 2.
func TestStatusCommandErrors(t *testing.T) {
	srv := serveFake(t, clusterBroker(fourNodes))
	addr := srv.URL
	srv.Close()
	_, errOut, err := run(t, "", "status", "--addr", addr)
	if ExitCode(err) != 1 || !strings.HasPrefix(errOut, "herald: E4025 UNREACHABLE: cannot reach "+addr+": dial tcp") || !strings.Contains(errOut, "connection refused") {
		t.Fatalf("an unreachable broker: exit %d, %q", ExitCode(err), errOut)
	}
	out, _, err := run(t, "", "status", "--json", "--addr", addr)
	var body struct{ Error struct{ Code, Name string } }
	if ExitCode(err) != 1 || json.Unmarshal([]byte(out), &body) != nil || body.Error.Code != "E4025" || body.Error.Name != "UNREACHABLE" {
		t.Fatalf("--json, unreachable: exit %d, %q", ExitCode(err), out)
	}
	if _, errOut, err := run(t, "", "status", "extra"); ExitCode(err) != 2 || !strings.Contains(errOut, "usage: herald status") {
		t.Fatalf("an argument: exit %d, %q", ExitCode(err), errOut)
	}
	if out, _, err := run(t, "", "status", "--help"); err != nil || !strings.Contains(out, "Examples:\n  herald status") || !strings.Contains(out, "--json") {
		t.Fatalf("--help: %v\n%s", err, out)
	}
}

// On two nodes sharing PostgreSQL, herald status asked of the follower names the
// leader and its term and lists both nodes with their roles and addresses.
func TestStatusCommandOnACluster(t *testing.T) {
	dsn, schema := testutil.PostgresDSN(t), testutil.SchemaName()
	t.Cleanup(func() { testutil.DropSchema(dsn, schema) })
	var urls []string
	for _, name := range []string{"a", "b"} {
		s := server.New(server.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Store: dsn, StoreSchema: schema,
			NodeName: name, LeaseTTL: time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
		urls = append(urls, "http://"+s.Addr())
	}
	out, errOut, err := run(t, "", "status", "--addr", urls[1])
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	want := regexp.MustCompile(`^leader: a at ` + regexp.QuoteMeta(urls[0]) + `, term [1-9]\d*
answered by: b \(follower\) at seq \d+
.*
.*
 a +\| leader +\| ` + regexp.QuoteMeta(urls[0]) + ` \| +\d+ \| 0s +\| [\d.]+s ago
 b +\| follower \| ` + regexp.QuoteMeta(urls[1]) + ` \| +\d+ \| [\d.]+s +\| [\d.]+s ago
\(2 nodes on postgres\)
$`)
	if !want.MatchString(out) {
		t.Fatalf("got:\n%s", out)
	}
}
