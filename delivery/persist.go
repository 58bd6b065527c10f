package delivery

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/store"
)

// Layer 0 types written by consume mode.
const (
	typeWatch       = "_Watch"
	typeDelivery    = "_Delivery"
	typeDeadLetter  = "_DeadLetter"
	edgeWatchLetter = "_watch_dead_letter"       // (_Watch, _DeadLetter)
	edgeLetterDest  = "_dead_letter_destination" // (_DeadLetter, destination node)
)

// deliveryNodeID names the _Delivery node of a subject. `.` cannot appear in `#ids`
// written by users, so these ids never collide with theirs.
func deliveryNodeID(subject herald.NodeID) herald.NodeID {
	return herald.NodeID("_d." + string(subject))
}

// saveWatch records the group's _Watch node (kept across restarts for named groups).
func (s *Service) saveWatch(ctx context.Context, id herald.NodeID, sp *spec) error {
	_, _, err := s.eng.System(ctx, func(tx *engine.SysTx) error {
		old := tx.Node(id)
		attrs := map[string]herald.Value{
			"pattern":          herald.String(sp.text),
			"mode":             herald.String("consume"),
			"status":           herald.String("active"),
			"ordering":         herald.String(sp.ordering),
			"delivery":         herald.String("reliable"),
			"visibility":       herald.String("committed"),
			"buffer_size":      herald.Int(int64(sp.buffer)),
			"on_full":          herald.String("block"),
			"ack_timeout":      herald.Duration(sp.ackTimeout),
			"max_redeliveries": herald.Int(int64(sp.maxRedeliveries)),
		}
		if sp.group != "" {
			attrs["group"] = herald.String(sp.group)
		}
		if sp.deadLetter != "" {
			attrs["dead_letter"] = herald.String(string(sp.deadLetter))
		}
		if old != nil {
			attrs["created_at"] = old.Attrs.Get("created_at")
			if old.Attrs.Equal(herald.AttrsOf(attrs)) {
				return nil
			}
		} else {
			attrs["created_at"] = herald.Timestamp(s.clock.Now())
		}
		tx.PutNode(&herald.Node{ID: id, Type: typeWatch, Attrs: herald.AttrsOf(attrs)})
		return nil
	})
	return err
}

// deliveryState is a subject's durable delivery state: a copy taken under Service.mu,
// so that a transaction can write it after the lock is released while the dispatcher
// and consumers keep changing the live subject and lease.
type deliveryState struct {
	subject   herald.NodeID
	attempts  int
	notBefore time.Time
	// Set while the subject is leased:
	leaseID  string
	deadline time.Time
	watch    herald.NodeID
	consumer string // empty for a lease whose consumer is gone
}

// stateLocked copies sub's delivery state, leased by l (nil: not leased).
func stateLocked(sub *subject, l *lease) deliveryState {
	st := deliveryState{subject: sub.id, attempts: sub.attempts, notBefore: sub.notBefore}
	if l != nil {
		st.attempts = l.attempt
		st.leaseID = l.id
		st.deadline = l.deadline
		st.watch = l.watch
		if l.cons != nil {
			st.consumer = l.cons.id
		}
	}
	return st
}

// put writes the state as the subject's _Delivery node.
func (st deliveryState) put(tx *graph.Tx) {
	attrs := map[string]herald.Value{
		"subject":  herald.String(string(st.subject)),
		"attempts": herald.Int(int64(st.attempts)),
	}
	if !st.notBefore.IsZero() {
		attrs["not_before"] = herald.Timestamp(st.notBefore)
	}
	if st.leaseID != "" {
		attrs["delivery_id"] = herald.String(st.leaseID)
		attrs["deadline"] = herald.Timestamp(st.deadline)
		attrs["watch"] = herald.String(string(st.watch))
		if st.consumer != "" {
			attrs["consumer"] = herald.String(st.consumer)
		}
	}
	tx.PutNode(&herald.Node{ID: deliveryNodeID(st.subject), Type: typeDelivery, Attrs: herald.AttrsOf(attrs)})
}

// recover rebuilds a subject's delivery state from its _Delivery node at start.
func (s *Service) recover(tx *graph.Tx, d *herald.Node) {
	if d == nil {
		return
	}
	subjID := herald.NodeID(d.Attrs.Get("subject").AsString())
	n := tx.Node(subjID)
	if n == nil {
		s.cleanup[d.ID] = true // the message is gone; its state is garbage
		return
	}
	sub := s.subjectLocked(n)
	sub.stored = true
	sub.attempts = int(d.Attrs.Get("attempts").AsInt())
	if nb := d.Attrs.Get("not_before"); nb.Kind() == herald.KindTimestamp {
		sub.notBefore = nb.AsTime()
	}
	id := d.Attrs.Get("delivery_id")
	if id.Kind() != herald.KindString {
		return
	}
	watch := herald.NodeID(d.Attrs.Get("watch").AsString())
	l := &lease{
		id:       id.AsString(),
		subj:     sub,
		watch:    watch,
		sp:       s.recoveredSpec(tx, watch),
		deadline: d.Attrs.Get("deadline").AsTime(),
		attempt:  sub.attempts,
		index:    -1,
		match:    nodeMatch(n),
	}
	l.sent = true // it went out before the restart
	sub.lease = l
	s.leases[l.id] = l
	s.pushDeadlineLocked(l)
}

// recoveredSpec compiles the statement recorded on a _Watch node again, so a lease that
// survived a restart keeps its watch's ack timeout, redelivery limit, backoff and dead
// letter. A statement that needs parameters cannot be compiled again; nil (the defaults)
// is returned then.
func (s *Service) recoveredSpec(tx *graph.Tx, watch herald.NodeID) *spec {
	if sp, ok := s.specs[watch]; ok {
		return sp
	}
	var sp *spec
	if w := tx.Node(watch); w != nil && w.Type == typeWatch {
		if c, err := compileSpec(s.eng, w.Attrs.Get("pattern").AsString(), nil, "", ""); err == nil {
			sp = c
		} else {
			s.log.Warn("consume: a recovered lease's watch cannot be compiled again; it uses the default options", "watch", watch, "err", err)
		}
	}
	s.specs[watch] = sp
	return sp
}

// nodeMatch is the match value of a recovered lease (its group, and so its RETURN, may
// be unknown after a restart).
func nodeMatch(n *herald.Node) herald.Value {
	v, _ := eval.NodeValue(n)
	return v
}

// deadLetter moves a subject to a _DeadLetter node in tx (the caller forgets the
// subject's tracking state under the lock): the letter keeps the match and
// the whole node (for REDRIVE), is linked from the watch and, when configured, to the
// destination. It reports E8007 when the destination is missing; the letter is recorded
// all the same.
func (s *Service) deadLetter(tx *graph.Tx, subj herald.NodeID, watch herald.NodeID, dest herald.NodeID, reason string, attempts int, match herald.Value, now time.Time) (herald.NodeID, *herald.Error) {
	n := tx.Node(subj)
	if d := deliveryNodeID(subj); tx.Node(d) != nil {
		tx.DeleteNode(d)
	}
	if n == nil {
		return "", nil // already gone (killed or acked meanwhile): nothing to keep
	}
	if match.IsNull() {
		match = nodeMatch(n)
	}
	mj, _ := json.Marshal(match)
	whole := n
	if all, err := n.AllAttrs(); err == nil {
		whole = &herald.Node{ID: n.ID, Type: n.Type, Created: n.Created, Attrs: all}
	} else {
		s.log.Error("consume: a dead letter keeps the node without its body, which cannot be read", "node", n.ID, "err", err)
	}
	letterID := newNodeID("dl")
	attrs := map[string]herald.Value{
		"original_match":    herald.String(string(mj)),
		"failure_reason":    herald.String(reason),
		"delivery_attempts": herald.Int(int64(attempts)),
		"created_at":        herald.Timestamp(now),
		"subject_id":        herald.String(string(n.ID)),
		"subject_type":      herald.String(n.Type),
		"original_node":     herald.String(base64.StdEncoding.EncodeToString(store.AppendNode(nil, whole))),
	}
	if watch != "" {
		attrs["watch"] = herald.String(string(watch))
	}
	var failed *herald.Error
	if dest != "" {
		attrs["dead_letter"] = herald.String(string(dest))
		if tx.Node(dest) == nil {
			failed = herald.Errorf(herald.CodeDeadLetterFailed, "dead letter destination #%s does not exist; the letter is kept as %s on its watch", dest, letterID)
		}
	}
	tx.PutNode(&herald.Node{ID: letterID, Type: typeDeadLetter, Attrs: herald.AttrsOf(attrs)})
	if watch != "" && tx.Node(watch) != nil {
		tx.PutEdge(&herald.Edge{Type: edgeWatchLetter, Endpoints: []herald.NodeID{watch, letterID}})
	}
	if dest != "" && failed == nil {
		tx.PutEdge(&herald.Edge{Type: edgeLetterDest, Endpoints: []herald.NodeID{letterID, dest}})
	}
	tx.DeleteNode(n.ID)
	return letterID, failed
}

// Redrive re-spawns the node a dead letter holds (under its original id when that is
// free, else a new one) and deletes the letter. It returns the node's id.
func (s *Service) Redrive(ctx context.Context, letter herald.NodeID) (herald.NodeID, error) {
	var id herald.NodeID
	_, _, err := s.eng.System(ctx, func(tx *engine.SysTx) error {
		l := tx.Node(letter)
		if l == nil || l.Type != typeDeadLetter {
			return herald.Errorf(herald.CodeNodeNotFound, "no dead letter #%s", letter)
		}
		raw, err := base64.StdEncoding.DecodeString(l.Attrs.Get("original_node").AsString())
		if err != nil {
			return herald.Errorf(herald.CodeInternal, "dead letter #%s is unreadable: %v", letter, err)
		}
		n, err := store.DecodeNode(raw, nil)
		if err != nil {
			return herald.Errorf(herald.CodeInternal, "dead letter #%s is unreadable: %v", letter, err)
		}
		if tx.Node(n.ID) != nil {
			n.ID = newNodeID("n")
		}
		tx.PutNode(&herald.Node{ID: n.ID, Type: n.Type, Attrs: n.Attrs})
		tx.DeleteNode(letter)
		id = n.ID
		return nil
	})
	return id, err
}

func (s *Service) pushDeadlineLocked(l *lease) { heap.Push(&s.deadlines, l) }

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newDeliveryID returns a delivery id: "d" and 128 random bits in lower-case base32. It is
// URL-safe and can be written as a string, a $param or an `#ident` in ACK and NACK.
func newDeliveryID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "d" + idEncoding.EncodeToString(b)
}

// newNodeID returns prefix followed by 80 random bits in lower-case base32, an id that can
// be written as `#id` in queries.
func newNodeID(prefix string) herald.NodeID {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return herald.NodeID(prefix + idEncoding.EncodeToString(b))
}

func (s *Service) fixDeadlineLocked(l *lease) { heap.Fix(&s.deadlines, l.index) }
