package lint

import (
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// moduleRoot is the folder holding go.mod, two levels above this file.
func moduleRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestImportRules fails when any package of the module imports against the rules.
func TestImportRules(t *testing.T) {
	vs, err := Check(moduleRoot(t), Herald)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Error(v)
	}
}

// TestCheckerCatchesViolations runs the checker over a fixture tree that breaks the
// rules on purpose, so the rule test above cannot pass by checking nothing.
func TestCheckerCatchesViolations(t *testing.T) {
	vs, err := Check(filepath.Join("testdata", "bad"), Herald)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range vs {
		got[v.File+" -> "+v.Import] = v.Reason
	}
	want := map[string]string{
		"lang/parser/parser.go -> github.com/herald-mq/herald/engine": "lang/parser may import only",
		"client/client.go -> github.com/herald-mq/herald/server":      "client may import only",
		"engine/engine.go -> github.com/cockroachdb/pebble":           "only store/pebblestore may import",
		"newpkg/newpkg.go -> github.com/herald-mq/herald":             "no rule covers this package",
		"bench/nats/nats.go -> github.com/redis/go-redis/v9":          "only bench/redis may import",
	}
	for k, prefix := range want {
		reason, ok := got[k]
		if !ok {
			t.Errorf("violation %s not reported", k)
			continue
		}
		if !strings.HasPrefix(reason, prefix) {
			t.Errorf("%s: reason %q, want prefix %q", k, reason, prefix)
		}
	}
	if len(vs) != len(want) {
		t.Errorf("got %d violations, want %d:", len(vs), len(want))
		for _, v := range vs {
			t.Log(v)
		}
	}
}

func TestVerdict(t *testing.T) {
	cases := []struct {
		pkg, imp string
		test     bool
		ok       bool
	}{
		{".", "fmt", false, true},
		{".", "github.com/herald-mq/herald/lang/token", false, false},
		{"lang/parser", "github.com/herald-mq/herald/lang/printer", false, false},
		{"lang/parser", "github.com/herald-mq/herald/lang/printer", true, true},
		{"lang/parser", "github.com/herald-mq/herald/lang/parser", true, true},
		{"engine", "github.com/herald-mq/herald/store/memstore", false, false},
		{"engine", "github.com/herald-mq/herald/store/memstore", true, true},
		{"engine", "github.com/herald-mq/herald/graph", false, true},
		{"engine", "github.com/cockroachdb/pebble/vfs", true, true},
		{"engine", "github.com/cockroachdb/pebble/vfs", false, false},
		{"engine", "github.com/cockroachdb/pebble", true, false},
		{"graph", "github.com/cockroachdb/pebble/vfs", true, false},
		{"graph", "github.com/cockroachdb/datadriven", true, true},
		{"store/pebblestore", "github.com/cockroachdb/pebble/vfs", false, true},
		{"store/memstore", "pgregory.net/rapid", false, false},
		{"store/memstore", "pgregory.net/rapid", true, true},
		{"client", "github.com/herald-mq/herald/engine", false, false},
		{"client", "github.com/herald-mq/herald/heraldtest", true, true},
		{"client", "go.uber.org/goleak", true, true},
		{"client", "go.uber.org/goleak", false, false},
		{"delivery", "go.uber.org/goleak", true, true},
		{"watch", "go.uber.org/goleak", true, true},
		{"engine", "go.uber.org/goleak", true, true},
		{"engine", "go.uber.org/goleak", false, false},
		{"graph", "go.uber.org/goleak", true, false},
		{"cmd/herald", "github.com/herald-mq/herald/internal/cli", false, true},
		{"cmd/herald", "github.com/herald-mq/herald/server", false, false},
		{"httpapi", "github.com/herald-mq/herald/server", false, false},
		{"httpapi", "github.com/prometheus/client_golang/prometheus/promhttp", false, true},
		{"server", "github.com/prometheus/client_golang/prometheus", false, false},
		{"internal/cli", "github.com/spf13/cobra", false, true},
		{"graph/index", "github.com/herald-mq/herald/lang/eval", false, true},
		{"graph/index", "github.com/herald-mq/herald/engine", false, false},
	}
	for _, c := range cases {
		reason := Herald.verdict(c.pkg, c.imp, c.test)
		if (reason == "") != c.ok {
			t.Errorf("%s -> %s (test=%v): ok=%v, reason %q", c.pkg, c.imp, c.test, reason == "", reason)
		}
	}
}

// The surfaces reach a node through the seam only: nothing they depend on, directly or
// not, is the engine, the standing queries, either mode, the queues or the store.
func TestSurfacesDependOnTheSeamOnly(t *testing.T) {
	serverSide := []string{"engine", "standing", "watch", "delivery", "lockqueue", "namedqueue", "queue", "graph", "store", "auth", "server"}
	for _, surface := range []string{"httpapi", "rpcapi", "console"} {
		deps, err := Deps(moduleRoot(t), Herald.Module, surface)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(deps, "broker") {
			t.Errorf("%s does not depend on the seam (broker): %v", surface, deps)
		}
		for _, d := range deps {
			for _, s := range serverSide {
				if d == s || strings.HasPrefix(d, s+"/") {
					t.Errorf("%s depends on %s", surface, d)
				}
			}
		}
	}
}

// Deps follows imports through packages: a fixture whose a imports b imports c.
func TestDepsFollowsImports(t *testing.T) {
	deps, err := Deps(filepath.Join("testdata", "deps"), "example.com/m", "a")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(deps, ",") != "b,c" {
		t.Fatalf("deps %v, want b,c", deps)
	}
}

// The command line reaches a server through the Go client: of the server's packages it
// imports only server, for `herald serve`.
func TestCLIImportsNoServerPackageButServer(t *testing.T) {
	imps, err := imports(filepath.Join(moduleRoot(t), "internal", "cli"), Herald.Module)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range imps {
		for _, s := range []string{"engine", "standing", "watch", "delivery", "lockqueue", "namedqueue", "queue", "graph", "store", "auth", "httpapi", "rpcapi"} {
			if imp == s || strings.HasPrefix(imp, s+"/") {
				t.Errorf("internal/cli imports %s", imp)
			}
		}
	}
}
