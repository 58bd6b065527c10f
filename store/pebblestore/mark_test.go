package pebblestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/pebblestore"
)

// commitSeqs commits one change set per seq in from..to, each synced on its own.
func commitSeqs(t *testing.T, s *pebblestore.Store, from, to uint64) {
	t.Helper()
	for seq := from; seq <= to; seq++ {
		b := &store.Batch{Changes: &herald.ChangeSet{Seq: seq, Changes: []herald.Change{
			{Kind: herald.NodeChange, NodeAfter: &herald.Node{ID: herald.NodeID(fmt.Sprint("n", seq)), Type: "T",
				Attrs: herald.AttrsOf(map[string]herald.Value{"pad": herald.String(strings.Repeat("p", 512))})}},
		}}}
		if errs, err := s.Commit(context.Background(), []*store.Batch{b}); err != nil || errs[0] != nil {
			t.Fatalf("commit %d: %v %v", seq, errs, err)
		}
	}
}

// TestLostTailIsRefused: a write-ahead log cut short behind the position mark (synced
// commits lost) makes Open refuse the store with ErrLostTail, naming both positions;
// with AcceptLoss it opens at the position the log reaches, and says so.
func TestLostTailIsRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	commitSeqs(t, s, 1, 400)
	if err := s.Close(); err != nil { // the mark now says 400
		t.Fatal(err)
	}
	// Damage the log: cut the newest WAL file in half.
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no write-ahead log file")
	}
	newest := logs[len(logs)-1]
	fi, err := os.Stat(newest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(newest, fi.Size()/2); err != nil {
		t.Fatal(err)
	}

	_, err = pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
	if !errors.Is(err, pebblestore.ErrLostTail) || !strings.Contains(err.Error(), "seq 400") {
		t.Fatalf("Open of a store that lost its tail: %v, want ErrLostTail naming seq 400", err)
	}
	s, err = pebblestore.Open(dir, pebblestore.Options{Logger: quiet, AcceptLoss: true})
	if err != nil {
		t.Fatalf("Open with AcceptLoss: %v", err)
	}
	m, err := s.Meta(context.Background())
	if err != nil || m.Seq == 0 || m.Seq >= 400 {
		t.Fatalf("recovered position %d (%v), want between 0 and 400", m.Seq, err)
	}
	// From there on the store works, and the mark follows it: the next open is clean.
	commitSeqs(t, s, m.Seq+1, m.Seq+3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
	if err != nil {
		t.Fatalf("reopen after accepting the loss: %v", err)
	}
	s.Close()
}

// cutNewestLog cuts the newest write-ahead log file of dir in half.
func cutNewestLog(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no write-ahead log file")
	}
	newest := logs[len(logs)-1]
	fi, err := os.Stat(newest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(newest, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the files of src into a new directory, as a crash would leave them:
// what the store synced is there, nothing written at Close.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestMarkCatchesUpWhenCommitsPause: commits that stop before the mark is due leave it
// behind the durable position only until the interval is up; then the marker writes it,
// without another commit, so a log that later loses its tail is refused. The store is
// copied while open, as a kill -9 would leave it.
func TestMarkCatchesUpWhenCommitsPause(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet, Clock: clk, MarkInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commitSeqs(t, s, 1, 300) // the clock stands still: no committer finds the mark due
	clk.Advance(time.Second)
	deadline := time.Now().Add(10 * time.Second) // a bound on a hang, not a timing
	for {
		b, err := os.ReadFile(filepath.Join(dir, "HERALD-POSITION"))
		if err == nil && strings.TrimSpace(string(b)) == "300" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mark reads %q after the interval, with commits paused; want 300", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	crashed := copyDir(t, dir)
	cutNewestLog(t, crashed)
	_, err = pebblestore.Open(crashed, pebblestore.Options{Logger: quiet})
	if !errors.Is(err, pebblestore.ErrLostTail) || !strings.Contains(err.Error(), "seq 300") {
		t.Fatalf("Open of a copy that lost its tail: %v, want ErrLostTail naming seq 300", err)
	}
}

// TestMissingMarkIsRefused: a store that wrote a position mark and lost it — deleted,
// or left out of a restore — is refused like a lost tail (the loss it would hide is real
// here: the log is cut too); AcceptLoss opens it.
func TestMissingMarkIsRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	commitSeqs(t, s, 1, 400)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "HERALD-POSITION")); err != nil {
		t.Fatal(err)
	}
	cutNewestLog(t, dir)
	_, err = pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
	if !errors.Is(err, pebblestore.ErrLostTail) || !strings.Contains(err.Error(), "no position mark") {
		t.Fatalf("Open without its mark: %v, want ErrLostTail saying the mark is missing", err)
	}
	s, err = pebblestore.Open(dir, pebblestore.Options{Logger: quiet, AcceptLoss: true})
	if err != nil {
		t.Fatalf("Open with AcceptLoss: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebblestore.Open(dir, pebblestore.Options{Logger: quiet}) // the mark is back
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	s.Close()
}
