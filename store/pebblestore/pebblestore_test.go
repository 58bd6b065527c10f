package pebblestore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/pebblestore"
	"github.com/herald-mq/herald/store/storetest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func mustOpen(t *testing.T, dir string, fs vfs.FS) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open(dir, pebblestore.Options{FS: fs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// harness runs the suite on dir within the filesystem fs (nil: the real one).
func harness(newDir func(t *testing.T) (string, vfs.FS)) storetest.Harness {
	type handle struct {
		dir string
		fs  vfs.FS
	}
	opened := map[store.Backend]handle{}
	return storetest.Harness{
		Open: func(t *testing.T) store.Backend {
			dir, fs := newDir(t)
			s := mustOpen(t, dir, fs)
			opened[s] = handle{dir, fs}
			return s
		},
		Reopen: func(t *testing.T, b store.Backend) store.Backend {
			h := opened[b]
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			s := mustOpen(t, h.dir, h.fs)
			opened[s] = h
			return s
		},
	}
}

func TestConformanceDisk(t *testing.T) {
	storetest.Run(t, harness(func(t *testing.T) (string, vfs.FS) { return t.TempDir(), nil }))
}

func TestConformanceMem(t *testing.T) {
	storetest.Run(t, harness(func(t *testing.T) (string, vfs.FS) { return "db", vfs.NewMem() }))
}

func TestGroupCommitSyncsOnce(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, "db", vfs.NewMem())
	defer s.Close()
	var group []*store.Batch
	for seq := uint64(1); seq <= 5; seq++ {
		group = append(group, &store.Batch{Changes: &herald.ChangeSet{Seq: seq, Changes: []herald.Change{
			{Kind: herald.NodeChange, NodeAfter: &herald.Node{ID: herald.NodeID(fmt.Sprint(seq)), Type: "T"}},
		}}})
	}
	// One failing batch does not cost a sync of its own.
	group = append(group, &store.Batch{Changes: group[0].Changes})
	errs, err := s.Commit(ctx, group)
	if err != nil || !errors.Is(errs[5], store.ErrOutOfOrder) {
		t.Fatalf("Commit = %v, %v", errs, err)
	}
	if got := s.Stats(); got != (pebblestore.Stats{Calls: 1, Batches: 5, Syncs: 1}) || s.Syncs() != 1 {
		t.Fatalf("Stats after one group = %+v", got)
	}
	// A call in which nothing applies writes nothing.
	if _, err := s.Commit(ctx, group[:1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Truncate(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got != (pebblestore.Stats{Calls: 1, Batches: 5, Syncs: 2}) {
		t.Fatalf("Stats = %+v", got)
	}
}
