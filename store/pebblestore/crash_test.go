package pebblestore_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/pebblestore"
)

// TestCrash commits batches (alone and in groups) on pebble's strict in-memory
// filesystem, crashes at random points by discarding everything that was not synced,
// reopens, and checks that every acknowledged batch survived whole, that Meta is the last
// acknowledged position, and that nothing of a batch in flight at the crash is visible.
// It runs on a store created plainly and on one created with prepared log files, whose
// logs are files of zeros that the records overwrite.
func TestCrash(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testCrash(t, pebblestore.Options{}) })
	t.Run("prepared logs", func(t *testing.T) {
		testCrash(t, pebblestore.Options{PreparedLogs: 3, PreparedLogSize: 1 << 20})
	})
}

func testCrash(t *testing.T, first pebblestore.Options) {
	const rounds = 40
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(20250101, 7))
	fs := vfs.NewStrictMem()
	first.FS, first.Logger = fs, quiet
	s, err := pebblestore.Open("db", first)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()

	m := newModel()
	for round := range rounds {
		// Acknowledged work: each successful Commit returned after its sync.
		for range rng.IntN(5) {
			group := m.nextGroup(rng, 1+rng.IntN(4))
			errs, err := s.Commit(ctx, group)
			if err != nil {
				t.Fatalf("round %d: Commit: %v", round, err)
			}
			for i, b := range group {
				if errs[i] != nil {
					t.Fatalf("round %d: batch %d: %v", round, b.Changes.Seq, errs[i])
				}
				m.ack(b)
			}
			if rng.IntN(6) == 0 && m.last > 0 {
				upTo := rng.Uint64N(m.last + 1)
				if err := s.Truncate(ctx, upTo); err != nil {
					t.Fatal(err)
				}
				m.horizon = max(m.horizon, upTo)
			}
		}

		// The crash: from here on no sync reaches the disk, so the batches committed below
		// are in flight when the machine dies. Some are large, to span several WAL blocks.
		fs.SetIgnoreSyncs(true)
		var lost []*store.Batch
		for range rng.IntN(3) {
			group := m.nextGroupAfter(rng, 1+rng.IntN(4), lostLast(lost, m.last))
			if _, err := s.Commit(ctx, group); err != nil {
				t.Fatalf("round %d: in-flight Commit: %v", round, err)
			}
			lost = append(lost, group...)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		fs.ResetToSyncedState()
		fs.SetIgnoreSyncs(false)
		s = mustOpen(t, "db", fs)

		m.check(t, s, round, lost)
	}
}

func lostLast(lost []*store.Batch, last uint64) uint64 {
	if len(lost) == 0 {
		return last
	}
	return lost[len(lost)-1].Changes.Seq
}

// model is what the store must hold: the effect of the acknowledged batches.
type model struct {
	last, tick, horizon uint64
	nodes               map[herald.NodeID]*herald.Node
	log                 []uint64 // acknowledged seqs
}

func newModel() *model { return &model{nodes: map[herald.NodeID]*herald.Node{}} }

func (m *model) nextGroup(rng *rand.Rand, n int) []*store.Batch {
	return m.nextGroupAfter(rng, n, m.last)
}

// nextGroupAfter builds n batches numbered after seq. Each writes several fresh nodes,
// updates a shared counter node and may delete a node of an acknowledged batch.
func (m *model) nextGroupAfter(rng *rand.Rand, n int, seq uint64) []*store.Batch {
	var group []*store.Batch
	deleted := map[herald.NodeID]bool{}
	for range n {
		seq += 1 + uint64(rng.IntN(2)) // gaps are allowed
		cs := &herald.ChangeSet{Seq: seq, Tick: seq / 2, Actor: "crash"}
		pad := herald.String(string(make([]byte, rng.IntN(3)*12000)))
		for k := range 1 + rng.IntN(6) {
			cs.Changes = append(cs.Changes, herald.Change{Kind: herald.NodeChange, NodeAfter: &herald.Node{
				ID: herald.NodeID(fmt.Sprintf("b%d-%d", seq, k)), Type: "Item",
				Attrs: herald.AttrsOf(map[string]herald.Value{"seq": herald.Int(int64(seq)), "pad": pad}),
			}})
		}
		cs.Changes = append(cs.Changes, herald.Change{Kind: herald.NodeChange,
			NodeBefore: m.nodes["counter"],
			NodeAfter:  &herald.Node{ID: "counter", Type: "Counter", Attrs: herald.AttrsOf(map[string]herald.Value{"seq": herald.Int(int64(seq))})},
		})
		if victim := m.pick(rng); victim != nil && !deleted[victim.ID] {
			deleted[victim.ID] = true
			cs.Changes = append(cs.Changes, herald.Change{Kind: herald.NodeChange, NodeBefore: victim})
		}
		group = append(group, &store.Batch{Changes: cs})
	}
	return group
}

func (m *model) pick(rng *rand.Rand) *herald.Node {
	if len(m.nodes) < 2 || rng.IntN(3) != 0 {
		return nil
	}
	ids := make([]herald.NodeID, 0, len(m.nodes))
	for id := range m.nodes {
		if id != "counter" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return m.nodes[ids[rng.IntN(len(ids))]]
}

func (m *model) ack(b *store.Batch) {
	for _, mu := range store.Mutations(b.Changes) {
		if mu.Delete() {
			delete(m.nodes, herald.NodeID(mu.Key))
		} else {
			m.nodes[herald.NodeID(mu.Key)] = mu.Node
		}
	}
	m.last, m.tick = b.Changes.Seq, b.Changes.Tick
	m.log = append(m.log, b.Changes.Seq)
}

func (m *model) check(t *testing.T, s *pebblestore.Store, round int, lost []*store.Batch) {
	t.Helper()
	ctx := context.Background()
	meta, err := s.Meta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Meta{Seq: m.last, Tick: m.tick, Horizon: m.horizon}); meta != want {
		t.Fatalf("round %d: Meta after crash = %+v, want %+v", round, meta, want)
	}

	got := map[herald.NodeID]*herald.Node{}
	err = s.Load(ctx, func(r store.Record) error {
		if r.Node == nil {
			return fmt.Errorf("unexpected record %+v", r)
		}
		got[r.Node.ID] = r.Node
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing of a lost batch, whole or in part.
	for _, b := range lost {
		seq := herald.Int(int64(b.Changes.Seq))
		for id, n := range got {
			if n.Attrs.Get("seq").Equal(seq) {
				t.Fatalf("round %d: node %s of in-flight batch %d visible after crash", round, id, b.Changes.Seq)
			}
		}
	}
	// Every acknowledged write, exactly.
	if len(got) != len(m.nodes) {
		t.Fatalf("round %d: %d nodes after crash, want %d", round, len(got), len(m.nodes))
	}
	for id, want := range m.nodes {
		n := got[id]
		if n == nil || n.Type != want.Type || !n.Attrs.Equal(want.Attrs) {
			t.Fatalf("round %d: node %s = %+v, want %+v", round, id, n, want)
		}
	}

	cs, err := s.Changes(ctx, m.horizon, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wantLog []uint64
	for _, seq := range m.log {
		if seq > m.horizon {
			wantLog = append(wantLog, seq)
		}
	}
	gotLog := make([]uint64, len(cs))
	for i, c := range cs {
		gotLog[i] = c.Seq
	}
	if !slices.Equal(gotLog, wantLog) {
		t.Fatalf("round %d: change log after crash %v, want %v", round, gotLog, wantLog)
	}
}

// TestCrashAsync starts several commits without waiting for their syncs
// (CommitAsync), waits for a prefix of them, crashes, and checks that every batch
// waited for survived, that what survived is whole groups forming a prefix of the
// commit order (the next group's write overlaps the last one's sync, never reorders
// it), and that Meta names the last surviving one.
func TestCrashAsync(t *testing.T) {
	const rounds = 40
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(20261124, 3))
	fs := vfs.NewStrictMem()
	s := mustOpen(t, "db", fs)
	defer func() { _ = s.Close() }()

	m := newModel()
	for round := range rounds {
		base := m.clone()
		k := 1 + rng.IntN(5)
		groups := make([][]*store.Batch, k)
		waits := make([]func() error, k)
		for i := range k {
			groups[i] = m.nextGroup(rng, 1+rng.IntN(3))
			errs, wait, err := s.CommitAsync(ctx, groups[i])
			if err != nil {
				t.Fatalf("round %d: CommitAsync: %v", round, err)
			}
			for j, e := range errs {
				if e != nil {
					t.Fatalf("round %d: batch %d: %v", round, groups[i][j].Changes.Seq, e)
				}
			}
			waits[i] = wait
			for _, b := range groups[i] {
				m.ack(b) // the model runs ahead; it is rebuilt from what survives
			}
		}
		acked := rng.IntN(k + 1)
		for i := range acked {
			if err := waits[i](); err != nil {
				t.Fatalf("round %d: wait %d: %v", round, i, err)
			}
		}
		fs.SetIgnoreSyncs(true)
		for i := acked; i < k; i++ {
			_ = waits[i]()
		}
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		fs.ResetToSyncedState()
		fs.SetIgnoreSyncs(false)
		s = mustOpen(t, "db", fs)

		meta, err := s.Meta(ctx)
		if err != nil {
			t.Fatal(err)
		}
		present := 0
		for i, g := range groups {
			if g[len(g)-1].Changes.Seq <= meta.Seq {
				present = i + 1
			}
		}
		if present < acked {
			t.Fatalf("round %d: %d groups survived, %d were acknowledged", round, present, acked)
		}
		if present > 0 && groups[present-1][len(groups[present-1])-1].Changes.Seq != meta.Seq {
			t.Fatalf("round %d: Meta.Seq %d is not the end of a group", round, meta.Seq)
		}
		m = base
		var lost []*store.Batch
		for i, g := range groups {
			for _, b := range g {
				if i < present {
					m.ack(b)
				} else {
					lost = append(lost, b)
				}
			}
		}
		m.check(t, s, round, lost)
	}
}

func (m *model) clone() *model {
	c := *m
	c.nodes = maps.Clone(m.nodes)
	c.log = slices.Clone(m.log)
	return &c
}
