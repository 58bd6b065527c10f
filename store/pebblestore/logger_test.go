package pebblestore

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// The server hands pebble a logger already labelled component=pebble; a JSON line
// must not carry the key twice.
func TestPebbleLinesCarryOneComponent(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, nil)).With("component", "pebble")
	pebbleLogger{l}.Infof("[JOB %d] WAL created", 1)
	func() {
		defer func() { _ = recover() }()
		pebbleLogger{l}.Fatalf("bad %s", "state")
	}()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), buf.String())
	}
	for _, line := range lines {
		if n := strings.Count(line, `"component":`); n != 1 {
			t.Errorf("%d component keys in %s", n, line)
		}
	}
}
