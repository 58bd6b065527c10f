package pebblestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
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
