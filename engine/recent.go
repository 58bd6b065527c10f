package engine

import (
	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
)

// RecentChanges is how many of the newest change sets the engine keeps in memory, so a
// reader of the graph can take its view back to an earlier position (ViewSince) without
// reading the change log.
const RecentChanges = 4096

// recent is a ring of the newest change sets, written under Engine.mu.
type recent struct {
	sets  []*herald.ChangeSet // ring storage
	start int                 // index of the oldest
	n     int
}

func (r *recent) add(cs *herald.ChangeSet) {
	if r.sets == nil {
		r.sets = make([]*herald.ChangeSet, RecentChanges)
	}
	if r.n < len(r.sets) {
		r.sets[(r.start+r.n)%len(r.sets)] = cs
		r.n++
		return
	}
	r.sets[r.start] = cs
	r.start = (r.start + 1) % len(r.sets)
}

// since returns the held change sets with seq > after, oldest first, and whether they
// are all the commits after it (after is at or past the ring's oldest position).
func (r *recent) since(after, seq uint64) ([]*herald.ChangeSet, bool) {
	if after >= seq {
		return nil, true
	}
	if r.n == 0 || r.sets[r.start].Seq > after+1 {
		return nil, false
	}
	// Seqs in the ring are contiguous: the one after `after` is at a known offset.
	first := int(after + 1 - r.sets[r.start].Seq)
	out := make([]*herald.ChangeSet, 0, r.n-first)
	for i := first; i < r.n; i++ {
		out = append(out, r.sets[(r.start+i)%len(r.sets)])
	}
	return out, true
}

// ViewSince is View that also hands fn the change sets committed after position after,
// oldest first: with them fn can take the view back to any position from after on
// (graph.Tx views over earlier images). The change sets may include commits that are
// not durable yet. ok is false, and fn is not called, when the engine no longer holds
// every change set after after in memory (more than RecentChanges commits ago); the
// older ones are in the change log (Changes).
func (e *Engine) ViewSince(after uint64, fn func(tx *graph.Tx, seq, tick uint64, sets []*herald.ChangeSet) error) (ok bool, err error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	sets, ok := e.recent.since(after, e.seq)
	if !ok {
		return false, nil
	}
	return true, fn(e.g.Begin(), e.seq, e.tick, sets)
}

// Metrics reports the engine's durable position and commit pipeline
// (herald.MetricSource); the HTTP API adds the committed position itself.
func (e *Engine) Metrics() []herald.Metric {
	durable, _ := e.Durable()
	groups, txns := e.Syncs()
	return []herald.Metric{
		{Name: "herald_durable_seq", Help: "Sequence number of the last transaction synced to the store.", Value: float64(durable)},
		{Name: "herald_commits_total", Help: "Transactions committed through the pipeline.", Counter: true, Value: float64(txns)},
		{Name: "herald_syncs_total", Help: "Group commits (one synced store batch each) made by the pipeline.", Counter: true, Value: float64(groups)},
		{Name: "herald_commit_sync_seconds", Help: "Time each group commit took from the start of its write to the end of its sync: a commit is answered no sooner.", Histogram: e.pipe.commitTime.Read()},
		{Name: "herald_graph_snapshots_total", Help: "Read snapshots of the graph taken; the writer copies the tree nodes it next changes after each.", Counter: true, Value: float64(e.snapshots.Load())},
	}
}
