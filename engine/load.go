package engine

import (
	"context"
	"runtime/debug"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/store"
)

// loadBatch is how many records loadGraph hands from the store's reader to the graph's
// builder at a time.
const loadBatch = 512

// loadGCPercent is the garbage collector's target while the graph loads: what a load
// allocates stays live, so collections during it would mark a growing heap over and
// over for nothing.
const loadGCPercent = 400

// raiseGCPercent raises the collector's target to pct, unless it is higher already or
// collection is off, and returns how to restore it.
func raiseGCPercent(pct int) (restore func()) {
	prev := debug.SetGCPercent(pct)
	if prev < 0 || prev >= pct {
		debug.SetGCPercent(prev)
		return func() {}
	}
	return func() { debug.SetGCPercent(prev) }
}

// loadGraph fills g with what the backend holds, in the backend's order. Reading and
// decoding the records and inserting them into the graph's trees each take about half
// of a restart's work: they run on different goroutines, the builder taking the
// reader's records in batches and handing the nodes' indexes to a third (a
// graph.Loader), so that they overlap on two CPUs. The collector's target is raised
// meanwhile (loadGCPercent).
// seq is the store's position: the version of nodes stored without one, and of edges.
func loadGraph(ctx context.Context, b store.Backend, g *graph.Graph, seq uint64) error {
	defer raiseGCPercent(loadGCPercent)()
	batches := make(chan []store.Record, 4)
	built := make(chan struct{})
	go func() {
		defer close(built)
		l := g.Loader() // the nodes' indexes on a goroutine of their own
		defer l.Close()
		for batch := range batches {
			putRecords(g, l, batch, seq)
		}
	}()
	batch := make([]store.Record, 0, loadBatch)
	err := b.Load(ctx, func(r store.Record) error {
		if batch = append(batch, r); len(batch) == loadBatch {
			batches <- batch
			batch = make([]store.Record, 0, loadBatch)
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		batches <- batch
	}
	close(batches)
	<-built
	return err
}

// putRecords adds a batch of stored records to g, its nodes through l.
func putRecords(g *graph.Graph, l *graph.Loader, batch []store.Record, seq uint64) {
	nodes := make([]*herald.Node, 0, len(batch))
	for _, r := range batch {
		switch {
		case r.Type != nil:
			g.PutType(r.Type.Name, r.Type)
		case r.Node != nil:
			if r.Node.Ver == 0 {
				r.Node.Ver = seq // stored before nodes recorded their version
			}
			nodes = append(nodes, r.Node)
		case r.Edge != nil:
			g.PutEdge(r.Edge, seq)
		}
	}
	l.Nodes(nodes)
}
