package pebblestore

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// listSuffix returns the names in dir that end in suffix.
func listSuffix(t *testing.T, fs vfs.FS, dir, suffix string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			out = append(out, n)
		}
	}
	return out
}

// A new store writes its prepared log files and Pebble's first log is one of them, at
// its full length; reopened, the store removes the files left and writes none.
func TestPreparedLogs(t *testing.T) {
	const size = 256 << 10
	fs := vfs.NewMem()
	quiet := slog.New(slog.DiscardHandler)
	s, err := Open("db", Options{FS: fs, Logger: quiet, PreparedLogs: 3, PreparedLogSize: size})
	if err != nil {
		t.Fatal(err)
	}
	if left := listSuffix(t, fs, "db", spareSuffix); len(left) != 2 {
		t.Errorf("after Open: %d prepared files left (%v), want 2: the first log took one", len(left), left)
	}
	logs := listSuffix(t, fs, "db", ".log")
	if len(logs) != 1 {
		t.Fatalf("logs after Open: %v, want one", logs)
	}
	if fi, err := fs.Stat(fs.PathJoin("db", logs[0])); err != nil || fi.Size() != size {
		t.Errorf("log %s: %v, %v; want a prepared file of %d bytes", logs[0], fi, err, size)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open("db", Options{FS: fs, Logger: quiet, PreparedLogs: 3, PreparedLogSize: size})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if left := listSuffix(t, fs, "db", spareSuffix); len(left) != 0 {
		t.Errorf("after reopening: prepared files %v, want none (the store exists)", left)
	}
}

// noSpares fails every prepared file's creation, as a full disk would.
type noSpares struct{ vfs.FS }

func (f noSpares) Create(name string) (vfs.File, error) {
	if strings.HasSuffix(name, spareSuffix) {
		return nil, errors.New("no space left on device")
	}
	return f.FS.Create(name)
}

// A store whose prepared logs cannot be written opens without them, and says so.
func TestPreparedLogsFailSoftly(t *testing.T) {
	mem := vfs.NewMem()
	var logged bytes.Buffer
	s, err := Open("db", Options{FS: noSpares{mem}, Logger: slog.New(slog.NewTextHandler(&logged, nil)), PreparedLogs: 2, PreparedLogSize: 4096})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if left := listSuffix(t, mem, "db", spareSuffix); len(left) != 0 {
		t.Errorf("prepared files %v left behind", left)
	}
	if !strings.Contains(logged.String(), "no space left on device") {
		t.Errorf("log %q does not say why the logs were not prepared", logged.String())
	}
}
