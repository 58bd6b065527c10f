package watch

import (
	"context"
	"fmt"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
)

// maxPast bounds how many changed nodes and edges a stream keeps images of to see the
// graph at its position. A join watch further behind than that (a resume from long ago,
// a consumer that stopped reading) gets a reset event and a new snapshot instead.
var maxPast = 1 << 20

// past is a stream's view of the graph at its position, pos, while the graph itself
// has moved on: the images, as of pos, of every node and edge that the change sets
// after pos changed — those its statement can read (keep). Join patterns are evaluated
// on it just before and just after each commit, so their events are exact per commit
// however far the graph is ahead.
type past struct {
	keep  func(herald.Change) bool // the changes that can matter to the statement
	pos   uint64                   // the position the images describe
	known uint64                   // the change sets up to here have been taken in
	sets  []pastSet                // taken in and after pos, oldest first
	nodes map[herald.NodeID]*herald.Node
	edges map[herald.EdgeKey]*herald.Edge
	nlast map[herald.NodeID]uint64 // the last taken-in commit that changes the node
	elast map[herald.EdgeKey]uint64
	big   bool // the maps grew large: renew them once they are empty again
}

// pastSet is the part of a change set that a past keeps.
type pastSet struct {
	seq     uint64
	changes []herald.Change
}

func newPast(pos uint64, keep func(herald.Change) bool) *past {
	p := &past{keep: keep, pos: pos, known: pos}
	p.renew()
	return p
}

func (p *past) renew() {
	p.nodes = map[herald.NodeID]*herald.Node{}
	p.edges = map[herald.EdgeKey]*herald.Edge{}
	p.nlast = map[herald.NodeID]uint64{}
	p.elast = map[herald.EdgeKey]uint64{}
	p.big = false
}

// take takes in the change sets after known, which must follow it without a gap.
func (p *past) take(sets []*herald.ChangeSet) error {
	for _, cs := range sets {
		if cs.Seq <= p.known {
			continue
		}
		if cs.Seq != p.known+1 {
			return herald.Errorf(herald.CodeInternal, "watch: change set %d follows %d", cs.Seq, p.known)
		}
		var kept []herald.Change
		for _, ch := range cs.Changes {
			if !p.keep(ch) {
				continue
			}
			switch ch.Kind {
			case herald.NodeChange:
				id := nodeOf(ch).ID
				if _, ok := p.nlast[id]; !ok {
					p.nodes[id] = ch.NodeBefore
				}
				p.nlast[id] = cs.Seq
			case herald.EdgeChange:
				k := edgeOf(ch).Key()
				if _, ok := p.elast[k]; !ok {
					p.edges[k] = ch.EdgeBefore
				}
				p.elast[k] = cs.Seq
			default:
				continue
			}
			kept = append(kept, ch)
		}
		if len(kept) > 0 {
			p.sets = append(p.sets, pastSet{seq: cs.Seq, changes: kept})
		}
		p.known = cs.Seq
	}
	n := len(p.nlast) + len(p.elast)
	if n > 1024 {
		p.big = true
	}
	if n > maxPast {
		return herald.Errorf(herald.CodeCompacted, "the watch is %d commits behind the graph, which changed %d nodes and edges it reads meanwhile; more than it replays", p.known-p.pos, n)
	}
	return nil
}

// advance moves the view to position seq: through the taken-in change sets up to it,
// and past everything when seq is beyond them.
func (p *past) advance(seq uint64) {
	for len(p.sets) > 0 && p.sets[0].seq <= seq {
		ps := p.sets[0]
		p.sets[0] = pastSet{}
		p.sets = p.sets[1:]
		for _, ch := range ps.changes {
			switch ch.Kind {
			case herald.NodeChange:
				id := nodeOf(ch).ID
				if p.nlast[id] == ps.seq {
					// Nothing later changes it: the graph holds its image.
					delete(p.nlast, id)
					delete(p.nodes, id)
				} else {
					p.nodes[id] = ch.NodeAfter
				}
			case herald.EdgeChange:
				k := edgeOf(ch).Key()
				if p.elast[k] == ps.seq {
					delete(p.elast, k)
					delete(p.edges, k)
				} else {
					p.edges[k] = ch.EdgeAfter
				}
			}
		}
	}
	if seq > p.pos {
		p.pos = seq
	}
	if seq >= p.known {
		p.known = seq
	}
	if p.big && len(p.nlast) == 0 && len(p.elast) == 0 {
		p.renew() // give back the memory of a burst
	}
}

// view is the graph g as of pos; it is valid until the next take or advance.
func (p *past) view(g *graph.Graph) *graph.Tx { return g.ViewAs(p.nodes, p.edges) }

func nodeOf(ch herald.Change) *herald.Node {
	if ch.NodeBefore != nil {
		return ch.NodeBefore
	}
	return ch.NodeAfter
}

func edgeOf(ch herald.Change) *herald.Edge {
	if ch.EdgeBefore != nil {
		return ch.EdgeBefore
	}
	return ch.EdgeAfter
}

// withPast runs fn under a read view of the engine after taking in every change set
// between p's known position and the graph's: from the engine's memory when it still
// holds them, else from the durable change log first. fn gets the graph; p.view(g)
// reads it at p's position.
func (w *watcher) withPast(p *past, fn func(g *graph.Graph) error) error {
	for {
		ok, err := w.svc.eng.ViewSince(p.known, func(tx *graph.Tx, _, _ uint64, sets []*herald.ChangeSet) error {
			if err := p.take(sets); err != nil {
				return err
			}
			return fn(tx.Graph())
		})
		if ok || err != nil {
			return err
		}
		// The engine no longer holds what follows p.known: read on from the log.
		sets, err := w.svc.eng.Changes(context.Background(), p.known, logPage)
		if err != nil {
			return err
		}
		if len(sets) == 0 {
			// What follows is still syncing.
			if err := w.svc.eng.WaitDurable(context.Background(), p.known+1); err != nil {
				return err
			}
			continue
		}
		if err := p.take(sets); err != nil {
			return err
		}
	}
}

// String describes p for debugging.
func (p *past) String() string {
	return fmt.Sprintf("past{pos %d, known %d, %d sets, %d nodes, %d edges}", p.pos, p.known, len(p.sets), len(p.nodes), len(p.edges))
}
