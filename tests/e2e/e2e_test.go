package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/testutil"
)

// Bounds of every wait in these tests.
const (
	startTimeout = 60 * time.Second
	stopTimeout  = 60 * time.Second
)

var binary string // path of the built herald binary

// TestMain builds the herald binary once for every test; a failed build fails the
// whole suite.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "herald-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	root, err := testutil.ModuleRoot(".")
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		binary, err = testutil.BuildBinary(ctx, root, "./cmd/herald", dir)
		cancel()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: cannot build the herald binary: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// storeSchemas names the PostgreSQL schema of each data directory when the suite runs
// against the PostgreSQL store (HERALD_E2E_STORE=postgres): a server restarted on the
// same directory finds the same store.
var storeSchemas sync.Map

// storeFlags are the flags that put a server on the suite's store: none for the
// embedded store (the default), --store and --store-schema with HERALD_E2E_STORE=postgres.
func storeFlags(t *testing.T, dataDir string, flags []string) []string {
	t.Helper()
	switch os.Getenv("HERALD_E2E_STORE") {
	case "", "pebble":
		return flags
	case "postgres":
	default:
		t.Fatalf("HERALD_E2E_STORE=%q: want pebble or postgres", os.Getenv("HERALD_E2E_STORE"))
	}
	if slices.Contains(flags, "--store") {
		return flags
	}
	dsn := testutil.PostgresDSN(t)
	schema, loaded := storeSchemas.LoadOrStore(dataDir, testutil.SchemaName())
	if !loaded {
		t.Cleanup(func() { testutil.DropSchema(dsn, schema.(string)) })
	}
	// One node name per store: a server restarted there (after kill -9 too) takes its
	// last run's lease back at once instead of waiting for it to expire.
	return append([]string{"--store", dsn, "--store-schema", schema.(string), "--node-name", schema.(string)}, flags...)
}

func startServer(t *testing.T, dataDir string, flags ...string) *testutil.Server {
	t.Helper()
	flags = storeFlags(t, dataDir, flags)
	s, err := testutil.StartServer(binary, dataDir, startTimeout, flags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !s.Exited() {
			s.Kill()
		}
		if t.Failed() {
			t.Logf("server log:\n%s", s.Log())
		}
	})
	return s
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

type response struct {
	Status  int
	Results []struct {
		Columns []string            `json:"columns"`
		Rows    [][]json.RawMessage `json:"rows"`
	} `json:"results"`
	Seq   uint64 `json:"seq"`
	Tick  uint64 `json:"tick"`
	Error *struct {
		Code    string `json:"code"`
		Name    string `json:"name"`
		Message string `json:"message"`
		Line    int    `json:"line"`
		Column  int    `json:"column"`
	} `json:"error"`
}

// query posts one query; a transport error is returned, any HTTP answer decoded.
func query(url, q string, params map[string]any) (*response, error) {
	body, _ := json.Marshal(map[string]any{"query": q, "params": params})
	resp, err := httpClient.Post(url+"/v1/query", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out response
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("status %d, undecodable body: %v", resp.StatusCode, err)
	}
	out.Status = resp.StatusCode
	return &out, nil
}

func mustQuery(t *testing.T, url, q string) *response {
	t.Helper()
	r, err := query(url, q, nil)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if r.Status != 200 {
		t.Fatalf("%s: status %d, error %+v", q, r.Status, r.Error)
	}
	return r
}

func rowsJSON(r *response, i int) string {
	b, _ := json.Marshal(r.Results[i].Rows)
	return string(b)
}

// TestAcceptance is the first-use path: declare a type, spawn with a default, match.
func TestAcceptance(t *testing.T) {
	s := startServer(t, t.TempDir())
	mustQuery(t, s.URL(), `node Job { status: String = "pending", priority: Int }`)
	mustQuery(t, s.URL(), `SPAWN j: Job { priority = 5 }`)
	r := mustQuery(t, s.URL(), `MATCH j: Job WHERE j.priority > 3 RETURN j.status, j.priority`)
	if got := rowsJSON(r, 0); got != `[["pending",5]]` {
		t.Fatalf("rows = %s", got)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := httpClient.Get(s.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
}

// TestSyntaxError checks the error shape of a statement that does not parse.
func TestSyntaxError(t *testing.T) {
	s := startServer(t, t.TempDir())
	r, err := query(s.URL(), "SPAWN j: Job {\n  priority = = 5 }", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 400 || r.Error == nil || r.Error.Code != "E1001" || r.Error.Name != "SYNTAX_ERROR" {
		t.Fatalf("status %d, error %+v", r.Status, r.Error)
	}
	if r.Error.Line != 2 || r.Error.Column < 1 {
		t.Fatalf("position %d:%d, want line 2", r.Error.Line, r.Error.Column)
	}
	// The server keeps serving after bad requests of every kind.
	for _, body := range []string{`{"query":`, `{"query":"  "}`, `{"query":"RETURN 1","params":{"unused":1}}`} {
		resp, err := httpClient.Post(s.URL()+"/v1/query", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d", body, resp.StatusCode)
		}
	}
	mustQuery(t, s.URL(), `SPAWN j: Job { priority = 1 }`)
}

// TestKillNine spawns from concurrent clients, SIGKILLs the server mid-stream, restarts
// it on the same data and checks that every acknowledged SPAWN survived and that seq
// continues after the last acknowledged commit.
func TestKillNine(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	mustQuery(t, s.URL(), `node Msg { k: Int [required] }`)

	const workers, perWorker, killAfter = 8, 100, 200
	var (
		mu     sync.Mutex
		acked  = map[int64]bool{}
		maxSeq uint64
		wg     sync.WaitGroup
		killed = make(chan struct{})
		once   sync.Once
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				k := int64(w*perWorker + i)
				r, err := query(s.URL(), `SPAWN m: Msg { k = $k }`, map[string]any{"k": k})
				if err != nil {
					return // the server is gone
				}
				if r.Status != 200 {
					t.Errorf("spawn %d: status %d %+v", k, r.Status, r.Error)
					return
				}
				mu.Lock()
				acked[k] = true
				maxSeq = max(maxSeq, r.Seq)
				n := len(acked)
				mu.Unlock()
				if n >= killAfter {
					once.Do(func() { close(killed) })
				}
			}
		}(w)
	}
	select {
	case <-killed:
	case <-time.After(2 * time.Minute):
		t.Fatal("spawns did not reach the kill point in time")
	}
	s.Kill()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d spawns acknowledged before SIGKILL, last acknowledged seq %d", len(acked), maxSeq)

	s2 := startServer(t, dir)
	r := mustQuery(t, s2.URL(), `MATCH m: Msg RETURN m.k`)
	found := map[int64]bool{}
	for _, row := range r.Results[0].Rows {
		var k int64
		if err := json.Unmarshal(row[0], &k); err != nil {
			t.Fatalf("row %s: %v", row[0], err)
		}
		found[k] = true
	}
	lost := 0
	for k := range acked {
		if !found[k] {
			lost++
			if lost <= 10 {
				t.Errorf("acknowledged spawn k=%d lost", k)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged spawns lost", lost, len(acked))
	}
	if r.Seq < maxSeq {
		t.Fatalf("position after restart seq %d, before the last acknowledged %d", r.Seq, maxSeq)
	}
	next := mustQuery(t, s2.URL(), `SPAWN m: Msg { k = -1 }`)
	if next.Seq <= maxSeq || next.Seq != r.Seq+1 {
		t.Fatalf("next commit seq %d; last acknowledged %d, position after restart %d", next.Seq, maxSeq, r.Seq)
	}
}

// TestGracefulShutdown stops the server with SIGTERM: it exits 0 and the data is there
// after a restart.
func TestGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	mustQuery(t, s.URL(), `node Job { status: String = "pending", priority: Int }`)
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 25; j++ {
				r, err := query(s.URL(), `SPAWN j: Job { priority = $p }`, map[string]any{"p": i*100 + j})
				if err != nil || r.Status != 200 {
					return
				}
				mu.Lock()
				acked++
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	code, err := s.Terminate(stopTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if !strings.Contains(s.Log(), `"msg":"stopped"`) {
		t.Errorf("no clean stop in the log")
	}

	s2 := startServer(t, dir)
	r := mustQuery(t, s2.URL(), `MATCH j: Job RETURN COUNT(j)`)
	if got, want := rowsJSON(r, 0), fmt.Sprintf("[[%d]]", acked); got != want {
		t.Fatalf("count after restart %s, want %s", got, want)
	}
}

// TestQueryCommand runs the CLI against the server: one-shot, JSON, a script with a
// transaction spanning statements, and a failing statement.
func TestQueryCommand(t *testing.T) {
	s := startServer(t, t.TempDir())
	run := func(stdin string, args ...string) (string, string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, append([]string{"query", "--addr", s.URL(), "--history", ""}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	script := `node Job { status: String = "pending", priority: Int };
BEGIN;
SPAWN a: Job { priority = 5 };
SPAWN b: Job {
  priority = 7
};
COMMIT;
`
	if out, errOut, code := run(script); code != 0 {
		t.Fatalf("script: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code := run("", "-e", "MATCH j: Job WHERE j.priority > 3 RETURN j.status, j.priority ORDER BY j.priority")
	if code != 0 || !strings.Contains(out, "pending") || !strings.Contains(out, "(2 rows") {
		t.Fatalf("-e: exit %d\n%s\n%s", code, out, errOut)
	}
	out, _, code = run("", "--json", "-e", "MATCH j: Job RETURN COUNT(j)")
	if code != 0 || !strings.HasPrefix(out, `{"results":[{"columns":`) {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
	_, errOut, code = run("", "-e", "MATCH j: Job RETURN ]")
	if code != 1 || !strings.Contains(errOut, "E1001") || !strings.Contains(errOut, "^") {
		t.Fatalf("error: exit %d\n%s", code, errOut)
	}
}
