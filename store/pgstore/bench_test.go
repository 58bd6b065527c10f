package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/pgstore"
)

// BenchmarkCommit commits groups of batches that each create one node with a body of
// about 300 bytes, as a group of publishes does: per node, PostgreSQL stores three rows
// (the node, its body and its change set). depth is how many groups are in flight
// (CommitAsync), as in the engine's pipeline; depth 1 waits for each group before the
// next. ns/op is per group.
func BenchmarkCommit(b *testing.B) {
	for _, group := range []int{64, 512} {
		for _, depth := range []int{1, 4} {
			b.Run(fmt.Sprintf("group=%d/depth=%d", group, depth), func(b *testing.B) {
				benchCommit(b, group, depth)
			})
		}
	}
}

func benchCommit(b *testing.B, group, depth int) {
	s := mustOpen(b, newSchema(b), pgstore.Options{})
	defer s.Close()
	ctx := context.Background()
	var seq uint64
	next := func() []*store.Batch {
		batches := make([]*store.Batch, group)
		for i := range batches {
			seq++
			batches[i] = put(seq, node(fmt.Sprintf("m%d", seq), seq))
		}
		return batches
	}
	var waits []func() error
	wait := func() {
		if err := waits[0](); err != nil {
			b.Fatal(err)
		}
		waits = waits[1:]
	}
	b.ResetTimer()
	for range b.N {
		errs, w, err := s.CommitAsync(ctx, next())
		if err != nil || errs[0] != nil {
			b.Fatal(err, errs[0])
		}
		if waits = append(waits, w); len(waits) == depth {
			wait()
		}
	}
	for len(waits) > 0 {
		wait()
	}
	nodes := float64(b.N*group) / b.Elapsed().Seconds()
	b.ReportMetric(nodes, "nodes/s")
	b.ReportMetric(3*nodes, "rows/s")
}

// BenchmarkBuild measures what BenchmarkCommit spends building its batches, to set
// against its figures.
func BenchmarkBuild(b *testing.B) {
	for i := range b.N {
		seq := uint64(i + 1)
		_ = put(seq, node(fmt.Sprintf("m%d", seq), seq))
	}
}
