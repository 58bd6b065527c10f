package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"
)

// DefaultPostgresDSN is the server the PostgreSQL tests use unless HERALD_TEST_PG_DSN
// names another (.ci/run names a database of its own for each run).
const DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// PostgresDSN returns the test server's connection string. A server that refuses
// connections on a machine with pg_ctlcluster is started first. The test skips only
// where PostgreSQL is not installed and no server is named; installed but unreachable
// fails it.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("HERALD_TEST_PG_DSN")
	named := dsn != ""
	if !named {
		dsn = DefaultPostgresDSN
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("HERALD_TEST_PG_DSN: %v", err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	if reachable(host) {
		return dsn
	}
	ctl, err := exec.LookPath("pg_ctlcluster")
	if err != nil {
		if named {
			t.Fatalf("PostgreSQL is not reachable at %s (HERALD_TEST_PG_DSN)", host)
		}
		t.Skipf("PostgreSQL is not installed here (no pg_ctlcluster) and nothing listens at %s; set HERALD_TEST_PG_DSN to use a server elsewhere", host)
	}
	if out, err := exec.Command(ctl, "--skip-systemctl-redirect", PostgresVersion(), "main", "start").CombinedOutput(); err != nil {
		t.Logf("starting PostgreSQL: %v: %s", err, out)
	}
	for range 30 {
		if reachable(host) {
			return dsn
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("PostgreSQL is installed but nothing listens at %s", host)
	return ""
}

func reachable(host string) bool {
	c, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// PostgresVersion is the newest PostgreSQL cluster version configured here ("15" if
// none is).
func PostgresVersion() string {
	entries, _ := os.ReadDir("/etc/postgresql")
	var vs []string
	for _, e := range entries {
		if e.IsDir() {
			vs = append(vs, e.Name())
		}
	}
	if len(vs) == 0 {
		return "15"
	}
	sort.Strings(vs)
	return vs[len(vs)-1]
}

// SchemaName returns a fresh schema name for one test's store.
func SchemaName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "herald_test_" + hex.EncodeToString(b[:])
}

// DropSchema removes a test's schema with psql, when psql is installed (best effort:
// CI drops its whole database at the end anyway).
func DropSchema(dsn, schema string) {
	if psql, err := exec.LookPath("psql"); err == nil {
		_ = exec.Command(psql, dsn, "-qc", "DROP SCHEMA IF EXISTS "+schema+" CASCADE").Run()
	}
}
