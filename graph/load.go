package graph

import "github.com/herald-mq/herald"

// Loader fills a graph with stored nodes, splitting PutNode's work in two: the caller's
// goroutine puts each node into the node map, and a goroutine of the loader's own adds
// it to the type and attribute indexes, which the node map shares nothing with. A
// restart, which installs every stored node once and in order, spends about as long on
// each half. Until Close returns, the graph may be changed only through the loader,
// by PutType before the first Nodes, and by PutEdge.
type Loader struct {
	g    *Graph
	work chan loadWork
	done chan struct{}
}

// loadWork is a batch of nodes for the indexing goroutine, or, with ack set, a request
// to close ack once everything before it is indexed.
type loadWork struct {
	nodes []*herald.Node
	ack   chan struct{}
}

// Loader starts a loader for g.
func (g *Graph) Loader() *Loader {
	l := &Loader{g: g, work: make(chan loadWork, 4), done: make(chan struct{})}
	go l.index()
	return l
}

func (l *Loader) index() {
	defer close(l.done)
	for w := range l.work {
		for _, n := range w.nodes {
			l.g.indexNode(n)
		}
		if w.ack != nil {
			close(w.ack)
		}
	}
}

// Nodes installs the nodes of batch at the versions they carry (n.Ver), as PutNode
// would. The loader keeps batch: the caller must not change it or its nodes.
func (l *Loader) Nodes(batch []*herald.Node) {
	start := 0
	for i, n := range batch {
		if old, _ := l.g.nodes.set(n.ID, n); old != nil {
			// An id installed twice (a store never holds one twice): let the indexes
			// catch up to it, and take the replaced node out of them here, in order.
			l.work <- loadWork{nodes: batch[start:i]}
			ack := make(chan struct{})
			l.work <- loadWork{ack: ack}
			<-ack
			l.g.unindexNode(old)
			start = i
		}
	}
	if start < len(batch) {
		l.work <- loadWork{nodes: batch[start:]}
	}
}

// Close waits until every node is indexed and ends the loader's goroutine.
func (l *Loader) Close() {
	close(l.work)
	<-l.done
}
