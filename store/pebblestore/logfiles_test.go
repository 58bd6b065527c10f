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

// A second store on a directory in use is refused with ErrLocked before it touches
// anything: the first one's prepared logs stay, and once it is closed the directory
// opens again.
func TestOpenLockedDirectory(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{
		{"mem", vfs.NewMem(), "db"},
		{"disk", vfs.Default, t.TempDir()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{FS: tc.fs, Logger: quiet, PreparedLogs: 3, PreparedLogSize: 64 << 10}
			first, err := Open(tc.dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			spares := listSuffix(t, tc.fs, tc.dir, spareSuffix)
			second, err := Open(tc.dir, opts)
			if !errors.Is(err, ErrLocked) {
				if second != nil {
					second.Close()
				}
				t.Fatalf("second Open: %v, want ErrLocked", err)
			}
			if !strings.Contains(err.Error(), tc.dir) {
				t.Errorf("%q does not name the directory %s", err, tc.dir)
			}
			if left := listSuffix(t, tc.fs, tc.dir, spareSuffix); len(left) != len(spares) || len(spares) == 0 {
				t.Errorf("the refused Open left prepared files %v of %v", left, spares)
			}
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := Open(tc.dir, opts)
			if err != nil {
				t.Fatalf("Open after the first store closed: %v", err)
			}
			if err := again.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
