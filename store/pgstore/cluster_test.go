package pgstore_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// privateCluster starts a PostgreSQL server of the test's own (initdb in a fresh
// folder, a free port on loopback), so that the test may restart or kill it without
// disturbing any other user of the machine's server. It stops and is removed when the
// test ends. restart runs `pg_ctl restart` in mode ("fast", or "immediate": a crash
// and recovery). The test skips only where PostgreSQL's server programs are not
// installed.
func privateCluster(t *testing.T) (dsn string, restart func(mode string) error) {
	t.Helper()
	bin := filepath.Join("/usr/lib/postgresql", pgVersion(), "bin")
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		t.Skipf("PostgreSQL's server programs are not installed (%s): cannot run a server of the test's own", bin)
	}
	dir, err := os.MkdirTemp("", "herald-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// initdb refuses to run as root: run the server programs as postgres then.
	var as []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, and there is no postgres user to run the server as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		as = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(args ...string) error {
		full := append(append([]string(nil), as...), args...)
		out, err := exec.Command(full[0], full[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %v: %s", args, err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := run(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync"); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=on", port, dir)
	pgctl := func(verb string, extra ...string) error {
		args := append([]string{filepath.Join(bin, "pg_ctl"), "-D", data, "-w", "-l", filepath.Join(dir, "log"), "-o", opts, verb}, extra...)
		return run(args...)
	}
	if err := pgctl("start"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pgctl("stop", "-m", "immediate") })
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		func(mode string) error { return pgctl("restart", "-m", mode) }
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
