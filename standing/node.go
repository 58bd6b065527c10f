package standing

import (
	"context"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/option"
)

// The _Watch nodes: one a watch-mode stream, one a consume group (however many members
// it has), showing the statement, its options, its status and its counters. The core is
// their only writer: the services hand it Records, and its counter flusher (stats.go)
// writes the counters in between.

const (
	// TypeWatch is the Layer 0 type of a watch's node.
	TypeWatch = "_Watch"
	// EdgeDeadLetter links a consume watch's _Watch node to each of its _DeadLetter
	// nodes.
	EdgeDeadLetter = "_watch_dead_letter"
)

// Record is what a _Watch node is to show.
type Record struct {
	ID     herald.NodeID
	Query  *Query // the statement (Query.Text) and its options
	Status string // active, paused, cancelled
	// Watch mode: the stream's handle and counters, written with the node, and the
	// position of its last event. (A consume group's counters are the flusher's alone.)
	Handle             string
	Delivered, Pending int64
	Last               time.Time
	Position           uint64
	// Link, when set, runs in the commit that writes the node (a session's link to it).
	Link func(tx *engine.SysTx)
}

// A follower's engine (engine.IsFollower) commits nothing: the watch-mode streams it
// serves have no _Watch node (they are this node's alone, and end with it), so Save,
// Drop and CleanStale do nothing there, and their counters are not flushed.

// Save writes r's node and waits until it is durable.
func (c *Core) Save(ctx context.Context, r Record) error {
	if c.eng.IsFollower() {
		return nil
	}
	_, _, err := c.eng.System(ctx, func(tx *engine.SysTx) error {
		if r.Query.Mode == option.Consume {
			saveGroup(tx, r, c.clock.Now())
		} else {
			saveStream(tx, r, c.clock.Now())
		}
		if r.Link != nil {
			r.Link(tx)
		}
		return nil
	})
	return err
}

// saveStream writes a watch-mode stream's node.
func saveStream(tx *engine.SysTx, r Record, now time.Time) {
	q := r.Query
	created := herald.Timestamp(now)
	if old := tx.Node(r.ID); old != nil {
		created = old.Attrs.Get("created_at")
	}
	delivery, ordering := "best_effort", "arrival"
	if q.Opts.Reliable {
		delivery = "reliable"
	}
	if q.Ordered() {
		ordering = "attribute"
	}
	// Built in name order (what AttrsOf would sort a map into), without a map.
	n := 12 // the attributes every stream has; the node keeps this array
	if r.Handle != "" {
		n++
	}
	if !r.Last.IsZero() {
		n++
	}
	attrs := make(herald.Attrs, 0, n)
	add := func(name string, v herald.Value) {
		if !v.IsNull() {
			attrs = append(attrs, herald.Attr{Name: name, Value: v})
		}
	}
	add("buffer_size", herald.Int(int64(q.Opts.Buffer)))
	add("created_at", created)
	add("delivery", herald.String(delivery))
	add("events_delivered", herald.Int(r.Delivered))
	add("events_pending", herald.Int(r.Pending))
	if r.Handle != "" {
		add("handle", herald.String(r.Handle))
	}
	if !r.Last.IsZero() {
		add("last_event_at", herald.Timestamp(r.Last))
	}
	add("mode", herald.String("watch"))
	add("on_full", herald.String(q.Opts.OnFull))
	add("ordering", herald.String(ordering))
	add("pattern", herald.String(q.Text))
	add("position", herald.Int(int64(r.Position)))
	add("status", herald.String(r.Status))
	add("visibility", herald.String("committed"))
	tx.PutNode(&herald.Node{ID: r.ID, Type: TypeWatch, Attrs: attrs})
}

// saveGroup writes a consume group's node; its creation time and counters stay as
// they were.
func saveGroup(tx *engine.SysTx, r Record, now time.Time) {
	q := r.Query
	old := tx.Node(r.ID)
	attrs := map[string]herald.Value{
		"pattern":          herald.String(q.Text),
		"mode":             herald.String("consume"),
		"status":           herald.String(r.Status),
		"ordering":         herald.String(q.Opts.Ordering),
		"delivery":         herald.String("reliable"),
		"visibility":       herald.String("committed"),
		"buffer_size":      herald.Int(int64(q.Opts.Buffer)),
		"on_full":          herald.String("block"),
		"ack_timeout":      herald.Duration(q.Opts.AckTimeout),
		"max_redeliveries": herald.Int(int64(q.Opts.MaxRedeliveries)),
	}
	if q.Opts.Group != "" {
		attrs["group"] = herald.String(q.Opts.Group)
	}
	if q.Opts.DeadLetter != "" {
		attrs["dead_letter"] = herald.String(q.Opts.DeadLetter)
	}
	if old == nil {
		attrs["created_at"] = herald.Timestamp(now)
	} else {
		attrs["created_at"] = old.Attrs.Get("created_at")
		for _, k := range []string{"events_delivered", "events_pending", "last_event_at"} {
			if v := old.Attrs.Get(k); !v.IsNull() {
				attrs[k] = v // the counters are the flusher's
			}
		}
		if old.Attrs.Equal(herald.AttrsOf(attrs)) {
			return
		}
	}
	tx.PutNode(&herald.Node{ID: r.ID, Type: TypeWatch, Attrs: herald.AttrsOf(attrs)})
}

// Drop removes a watch's node, if it is there, and waits until that is durable.
func (c *Core) Drop(ctx context.Context, id herald.NodeID) error {
	if c.eng.IsFollower() {
		return nil
	}
	_, _, err := c.eng.System(ctx, func(tx *engine.SysTx) error {
		if tx.Node(id) != nil {
			tx.DeleteNode(id)
		}
		return nil
	})
	return err
}

// RetireIn ends, in tx, the node of a consume group of one whose consumer left: it is
// deleted, or, when dead letters hang from it, kept with status "cancelled" so they
// stay linked.
func RetireIn(tx *graph.Tx, id herald.NodeID) {
	w := tx.Node(id)
	if w == nil || w.Type != TypeWatch {
		return
	}
	for _, k := range tx.Incident(id) {
		if e := tx.Edge(k); e != nil && e.Type == EdgeDeadLetter {
			tx.PutNode(&herald.Node{ID: w.ID, Type: w.Type, Attrs: w.Attrs.With("status", herald.String("cancelled"))})
			return
		}
	}
	tx.DeleteNode(id)
}

// CleanStale removes the nodes of watch-mode streams from before a restart: their
// connections are gone (a reliable client resumes by position, not by node).
func (c *Core) CleanStale(ctx context.Context) error {
	if c.eng.IsFollower() {
		return nil
	}
	_, _, err := c.eng.System(ctx, func(tx *engine.SysTx) error {
		for _, id := range tx.NodesByAttr(TypeWatch, "mode", herald.String("watch")) {
			tx.DeleteNode(id)
		}
		return nil
	})
	return err
}
