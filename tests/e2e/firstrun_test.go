package e2e

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// dirUsage returns the bytes the files under dir hold: their lengths, and the disk
// blocks allocated to them (more than the length when a file is preallocated).
func dirUsage(t *testing.T, dir string) (length, allocated int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		length += fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return length, max(length, allocated)
}

// TestDefaultServeLeavesDataDirSmall: a first start with the defaults, as on a laptop,
// in CI or in a container, writes a few kilobytes, not the 576 MB of prepared log
// files it once wrote; with --prepared-logs they are there.
func TestDefaultServeLeavesDataDirSmall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := startServer(t, dir)
	mustQuery(t, s.URL(), `node FirstRun { n: Int }`)
	mustQuery(t, s.URL(), `SPAWN f: FirstRun { n = 1 }`)
	length, allocated := dirUsage(t, dir)
	t.Logf("a new data directory after a default start: %d bytes long, %d allocated", length, allocated)
	// Written: the files' lengths. Allocated adds what Pebble reserves, without
	// writing it, for its current log (110 % of the 64 MB memtable, about 70 MB).
	if length > 64<<20 || allocated > 128<<20 {
		t.Errorf("a default start left %d MB written in %s and %d MB allocated, want under 64 MB written and 128 MB allocated",
			length>>20, dir, allocated>>20)
	}
	if code, err := s.Terminate(stopTimeout); err != nil || code != 0 {
		t.Fatalf("stop: %d, %v", code, err)
	}

	// Asked for, one prepared file is written, and one was taken by the first log.
	dir2 := filepath.Join(t.TempDir(), "data")
	s2 := startServer(t, dir2, "--prepared-logs", "2")
	length2, _ := dirUsage(t, dir2)
	if length2 < 2*64<<20 {
		t.Errorf("with --prepared-logs 2 the new directory holds %d bytes, want two files of 64 MB", length2)
	}
	if code, err := s2.Terminate(stopTimeout); err != nil || code != 0 {
		t.Fatalf("stop: %d, %v", code, err)
	}
}

// runServe runs herald serve to its end and returns its exit status and what it wrote.
func runServe(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, append([]string{"serve"}, args...)...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("herald serve %q still running after %v:\n%s", args, startTimeout, out)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("herald serve %q: %v", args, err)
	return -1, ""
}

// TestSecondServerOnSameDataDir: a second server on a data directory in use stops at
// once and says that another process holds the directory, naming it and the way out
// (--data), instead of Pebble's "resource temporarily unavailable"; the first one
// goes on serving.
func TestSecondServerOnSameDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first := startServer(t, dir)
	mustQuery(t, first.URL(), `node Held { n: Int }`)

	code, out := runServe(t, "--listen", "127.0.0.1:0", "--data", dir)
	if code == 0 {
		t.Fatalf("the second server exited 0:\n%s", out)
	}
	for _, want := range []string{dir, "in use", "held by another process (pid ", "--data"} {
		if !strings.Contains(out, want) {
			t.Errorf("the second server's message lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "resource temporarily unavailable") && !strings.Contains(out, "in use") {
		t.Errorf("the second server says only what the system call said:\n%s", out)
	}
	if strings.Contains(out, `"msg":"listening"`) {
		t.Errorf("the second server listened:\n%s", out)
	}
	mustQuery(t, first.URL(), `SPAWN h: Held { n = 1 }`)
}

// TestBusyPortCreatesNothing: a server whose address is taken stops before it creates
// or opens its data directory, and names the address in use.
func TestBusyPortCreatesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	dir := filepath.Join(t.TempDir(), "data")

	code, out := runServe(t, "--listen", addr, "--data", dir)
	if code == 0 {
		t.Fatalf("a server on a busy port exited 0:\n%s", out)
	}
	for _, want := range []string{addr, "already in use", "--listen"} {
		if !strings.Contains(out, want) {
			t.Errorf("the message lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the data directory %s exists after a failed start (%v)", dir, err)
	}
}
