package delivery

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/standing"
	"github.com/herald-mq/herald/store"
)

// Layer 0 types written by consume mode (its _Watch nodes are the standing core's).
const (
	typeDeadLetter  = "_DeadLetter"
	edgeWatchLetter = standing.EdgeDeadLetter    // (_Watch, _DeadLetter)
	edgeLetterDest  = "_dead_letter_destination" // (_DeadLetter, destination node)
	// typeOldDelivery is how delivery state was kept before it moved out of the graph;
	// Start converts such nodes.
	typeOldDelivery = "_Delivery"
)

// Delivery state lives outside the graph, in one auxiliary record per subject that has
// any (engine.SysTx.PutAux): its attempts, when it may be delivered again, and its lease
// — the hash of the delivery id, never the id, with the deadline, the watch and the
// consumer. Nothing a client can read holds a delivery id.

// stateKey is the auxiliary record of a subject's delivery state.
// stateKey returns the key of sub's delivery record, made once: the record's writes
// and its deletion share it (the store copies keys, never changes them).
func (sub *subject) stateKey() []byte {
	if sub.key == nil {
		sub.key = stateKey(sub.id)
	}
	return sub.key
}

func stateKey(subject herald.NodeID) []byte {
	return append(append(make([]byte, 0, 2+len(subject)), "d/"...), subject...)
}

// stateVersion is the first byte of an encoded state. Version 1 had no releases.
const (
	stateVersion1 = 1
	stateVersion  = 2
)

// deliveryState is a subject's durable delivery state: a copy taken under Service.mu,
// so that a transaction can write it after the lock is released while the dispatcher
// and consumers keep changing the live subject and lease.
type deliveryState struct {
	subject   herald.NodeID
	key       []byte // stateKey(subject), when the subject had it made already
	attempts  int
	releases  int
	notBefore time.Time
	// Set while the subject is leased:
	leased   bool
	handle   Handle
	deadline time.Time
	watch    herald.NodeID
	consumer string // empty for a lease whose consumer is gone
}

// stateLocked copies sub's delivery state, leased by l (nil: not leased), and counts the
// record's write.
func stateLocked(sub *subject, l *lease) deliveryState {
	st := deliveryState{subject: sub.id, key: sub.stateKey(), attempts: sub.attempts, releases: sub.releases, notBefore: sub.notBefore}
	if l != nil {
		st.attempts = l.attempt
		st.leased, st.handle, st.deadline, st.watch = true, l.key, l.deadline, l.watch
		if l.cons != nil {
			st.consumer = l.cons.id
		}
	}
	if sub.writes >= 0 {
		sub.writes++
	}
	sub.stored = true
	return st
}

// dropLocked returns the deletion of sub's record, which was written since the last
// deletion if stored; once tells whether it was written exactly once.
func dropLocked(sub *subject) recordDrop {
	d := sub.recordDrop()
	sub.stored, sub.writes = false, 0
	return d
}

// recordDrop is the deletion of sub's record as it stands: once when it was written
// exactly once.
func (sub *subject) recordDrop() recordDrop {
	return recordDrop{subject: sub.id, key: sub.stateKey(), once: sub.writes == 1}
}

// recordDrop deletes a subject's delivery record.
type recordDrop struct {
	subject herald.NodeID
	key     []byte // stateKey(subject), when the subject had it made already
	once    bool
}

func (d recordDrop) apply(tx *engine.SysTx) {
	if d.key == nil {
		d.key = stateKey(d.subject)
	}
	tx.DeleteAux(d.key, d.once)
}

func (st deliveryState) encode() []byte {
	// Sized once: a version byte, four varints of at most ten bytes each, the leased
	// flag, the handle and two length-prefixed strings.
	size := 1 + 4*binary.MaxVarintLen64 + 1 + len(st.handle) +
		2*binary.MaxVarintLen64 + len(st.watch) + len(st.consumer)
	b := append(make([]byte, 0, size), stateVersion)
	b = binary.AppendUvarint(b, uint64(st.attempts))
	b = binary.AppendUvarint(b, uint64(st.releases))
	b = appendTime(b, st.notBefore)
	if !st.leased {
		return append(b, 0)
	}
	b = append(b, 1)
	b = append(b, st.handle[:]...)
	b = appendTime(b, st.deadline)
	b = herald.AppendString(b, string(st.watch))
	return herald.AppendString(b, st.consumer)
}

func decodeState(subject herald.NodeID, b []byte) (deliveryState, error) {
	st := deliveryState{subject: subject}
	if len(b) == 0 || (b[0] != stateVersion && b[0] != stateVersion1) {
		return st, herald.ErrCorrupt
	}
	version := b[0]
	b = b[1:]
	n, m := binary.Uvarint(b)
	if m <= 0 || n > 1<<31 {
		return st, herald.ErrCorrupt
	}
	st.attempts, b = int(n), b[m:]
	if version >= stateVersion {
		if n, m = binary.Uvarint(b); m <= 0 || n > 1<<31 {
			return st, herald.ErrCorrupt
		}
		st.releases, b = int(n), b[m:]
	}
	var err error
	if st.notBefore, b, err = decodeTime(b); err != nil {
		return st, err
	}
	if len(b) == 0 || b[0] > 1 {
		return st, herald.ErrCorrupt
	}
	if b[0] == 0 {
		if len(b) != 1 {
			return st, herald.ErrCorrupt
		}
		return st, nil
	}
	b = b[1:]
	if len(b) < len(st.handle) {
		return st, herald.ErrCorrupt
	}
	st.leased = true
	copy(st.handle[:], b)
	b = b[len(st.handle):]
	if st.deadline, b, err = decodeTime(b); err != nil {
		return st, err
	}
	var watch string
	if watch, b, err = herald.DecodeString(b); err != nil {
		return st, err
	}
	st.watch = herald.NodeID(watch)
	if st.consumer, b, err = herald.DecodeString(b); err != nil {
		return st, err
	}
	if len(b) != 0 {
		return st, herald.ErrCorrupt
	}
	return st, nil
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return binary.AppendVarint(b, 0)
	}
	return binary.AppendVarint(b, t.UnixNano())
}

func decodeTime(b []byte) (time.Time, []byte, error) {
	ns, m := binary.Varint(b)
	if m <= 0 {
		return time.Time{}, nil, herald.ErrCorrupt
	}
	if ns == 0 {
		return time.Time{}, b[m:], nil
	}
	return time.Unix(0, ns).UTC(), b[m:], nil
}

// put writes the state as the subject's record.
func (st deliveryState) put(tx *engine.SysTx) {
	if st.key == nil {
		st.key = stateKey(st.subject)
	}
	tx.PutAux(st.key, st.encode())
}

// recoverAll rebuilds the delivery state of every subject from its record at start:
// leases keep their deadlines (those that expired while the server was down are
// redelivered by the first round); records of subjects that are gone are cleaned up.
// Delivery state kept as _Delivery nodes by earlier versions is converted first.
func (s *Service) recoverAll(ctx context.Context) error {
	if err := s.convertOldState(ctx); err != nil {
		return err
	}
	var states []deliveryState
	err := s.eng.LoadAux(func(key, value []byte) error {
		id, ok := bytesCut(key, "d/")
		if !ok {
			return nil
		}
		st, err := decodeState(herald.NodeID(id), value)
		if err != nil {
			s.log.Error("consume: an unreadable delivery record is ignored", "subject", id, "err", err)
			return nil
		}
		states = append(states, st)
		return nil
	})
	if err != nil {
		return err
	}
	return s.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		for _, st := range states {
			s.recover(tx, st)
		}
		return nil
	})
}

func bytesCut(b []byte, prefix string) (string, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return "", false
	}
	return string(b[len(prefix):]), true
}

// recover rebuilds one subject's delivery state from its record.
func (s *Service) recover(tx *graph.Tx, st deliveryState) {
	n := tx.Node(st.subject)
	if n == nil {
		s.cleanup[st.subject] = recordDrop{subject: st.subject} // the message is gone
		return
	}
	sub := s.subjectLocked(n)
	sub.stored, sub.writes = true, -1
	sub.attempts, sub.releases, sub.notBefore = st.attempts, st.releases, st.notBefore
	if !st.leased {
		return
	}
	l := &lease{
		key:      st.handle,
		subj:     sub,
		watch:    st.watch,
		q:        s.recoveredQuery(tx, st.watch),
		deadline: st.deadline,
		attempt:  st.attempts,
		releases: st.releases,
		index:    -1,
		sent:     true, // it went out before the restart
	}
	sub.lease = l
	s.leases[l.key] = l
	s.pushDeadlineLocked(l)
}

// convertOldState moves delivery state kept in _Delivery nodes (before delivery state
// left the graph) into records, in one commit.
func (s *Service) convertOldState(ctx context.Context) error {
	var found bool
	_ = s.eng.View(func(tx *graph.Tx, _, _ uint64) error {
		found = tx.CountOfType(typeOldDelivery) > 0
		return nil
	})
	if !found {
		return nil
	}
	_, _, err := s.eng.System(ctx, func(tx *engine.SysTx) error {
		for _, id := range tx.NodesOfType(typeOldDelivery) {
			d := tx.Node(id)
			a := d.Attrs
			st := deliveryState{subject: herald.NodeID(a.Get("subject").AsString()), attempts: int(a.Get("attempts").AsInt())}
			if nb := a.Get("not_before"); nb.Kind() == herald.KindTimestamp {
				st.notBefore = nb.AsTime()
			}
			if did := a.Get("delivery_id"); did.Kind() == herald.KindString {
				st.leased, st.handle = true, HandleOf(did.AsString())
				st.deadline = a.Get("deadline").AsTime()
				st.watch = herald.NodeID(a.Get("watch").AsString())
				st.consumer = a.Get("consumer").AsString()
			}
			if st.subject != "" && tx.Node(st.subject) != nil {
				st.put(tx)
			}
			tx.DeleteNode(id)
		}
		return nil
	})
	if err == nil {
		s.log.Info("consume: delivery state moved out of _Delivery nodes")
	}
	return err
}

// recoveredQuery compiles the statement recorded on a _Watch node again, so a lease
// that survived a restart keeps its watch's ack timeout, redelivery limit, backoff and
// dead letter. A statement that needs parameters cannot be compiled again; nil (the
// defaults) is returned then.
func (s *Service) recoveredQuery(tx *graph.Tx, watch herald.NodeID) *standing.Query {
	if q, ok := s.recovered[watch]; ok {
		return q
	}
	var q *standing.Query
	if w := tx.Node(watch); w != nil && w.Type == standing.TypeWatch {
		stmt, file, err := standing.Parse(w.Attrs.Get("pattern").AsString(), nil)
		if err == nil {
			q, err = standing.Compile(standing.Source{Stmt: stmt, File: file, Mode: option.Consume, Clock: s.clock})
		}
		if err != nil {
			q = nil
			s.log.Warn("consume: a recovered lease's watch cannot be compiled again; it uses the default options", "watch", watch, "err", err)
		}
	}
	s.recovered[watch] = q
	return q
}

// deadLetter moves a subject to a _DeadLetter node in tx (the caller forgets the
// subject's tracking state under the lock): the letter keeps the match and the whole
// node (for REDRIVE), is linked from the watch and, when configured, to the
// destination. It reports E8007 when the destination is missing; the letter is recorded
// all the same. A body that cannot be read fails the transaction: the message stays.
func (s *Service) deadLetter(tx *engine.SysTx, drop recordDrop, watch herald.NodeID, dest herald.NodeID, reason string, attempts int, match herald.Value, now time.Time) (herald.NodeID, *herald.Error, error) {
	drop.apply(tx)
	n := tx.Node(drop.subject)
	if n == nil {
		return "", nil, nil // already gone (killed or acked meanwhile): nothing to keep
	}
	all, err := n.AllAttrs()
	if err != nil {
		return "", nil, err
	}
	whole := &herald.Node{ID: n.ID, Type: n.Type, Created: n.Created, Attrs: all}
	if match.IsNull() {
		match, _ = eval.NodeValue(whole)
	}
	mj, _ := json.Marshal(match)
	letterID := herald.NewID("dl")
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
		// The group the message was consumed by, and the queue it belonged to (the
		// REST queues' items and the queue RPC's messages name theirs): what an operator
		// selects letters by (`MATCH d: _DeadLetter WHERE d.queue = "emails" …`).
		if w := tx.Node(watch); w != nil {
			if g := w.Attrs.Get("group"); g.Kind() == herald.KindString && g.AsString() != "" {
				attrs["group"] = g
			}
		}
	}
	if q := all.Get("queue"); q.Kind() == herald.KindString && q.AsString() != "" {
		attrs["queue"] = q
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
	return letterID, failed, nil
}

// Redrive re-spawns the node a dead letter holds (under its original id when that is
// free, else a new one) and deletes the letter. It returns the node's id.
func (s *Service) Redrive(ctx context.Context, letter herald.NodeID) (herald.NodeID, error) {
	var id herald.NodeID
	_, _, err := s.eng.System(ctx, func(tx *engine.SysTx) error {
		var err error
		id, err = redriveIn(tx.Tx, letter)
		return err
	})
	return id, err
}

// RedriveLetter puts back what letter holds inside a statement's transaction: each
// letter `MATCH d: _DeadLetter … REDRIVE d` binds (engine.LetterRedriver).
func (s *Service) RedriveLetter(tx *graph.Tx, letter herald.NodeID) (herald.NodeID, error) {
	return redriveIn(tx, letter)
}

// redriveIn re-spawns the node letter holds in tx and deletes the letter (and its
// links to the watch and the destination).
func redriveIn(tx *graph.Tx, letter herald.NodeID) (herald.NodeID, error) {
	l := tx.Node(letter)
	if l == nil || l.Type != typeDeadLetter {
		return "", herald.Errorf(herald.CodeNodeNotFound, "no dead letter #%s", letter)
	}
	raw, err := base64.StdEncoding.DecodeString(l.Attrs.Get("original_node").AsString())
	if err != nil {
		return "", herald.Errorf(herald.CodeInternal, "dead letter #%s is unreadable: %v", letter, err)
	}
	n, err := store.DecodeNode(raw, nil)
	if err != nil {
		return "", herald.Errorf(herald.CodeInternal, "dead letter #%s is unreadable: %v", letter, err)
	}
	if tx.Node(n.ID) != nil {
		n.ID = herald.NewID("n")
	}
	tx.PutNode(&herald.Node{ID: n.ID, Type: n.Type, Attrs: n.Attrs})
	tx.DeleteNode(letter)
	retireWatch(tx, l)
	return n.ID, nil
}

// LetterKilled removes, in tx, the watch a purged letter hung from when that watch
// was kept only for its letters (engine.LetterRedriver).
func (s *Service) LetterKilled(tx *graph.Tx, letter *herald.Node) { retireWatch(tx, letter) }

// retireWatch deletes the _Watch node of a consume group of one that has ended
// (status cancelled) once its last letter is gone: RetireIn kept it for the letters.
func retireWatch(tx *graph.Tx, letter *herald.Node) {
	w := letter.Attrs.Get("watch")
	if w.Kind() != herald.KindString {
		return
	}
	n := tx.Node(herald.NodeID(w.AsString()))
	if n == nil || n.Type != standing.TypeWatch || n.Attrs.Get("mode").AsString() != "consume" || n.Attrs.Get("status").AsString() != "cancelled" {
		return
	}
	standing.RetireIn(tx, n.ID)
}

// Record is a subject's durable delivery state, as stored: for operators' tools and
// tests. It holds the lease's handle, never its delivery id.
type Record struct {
	Subject   herald.NodeID
	Attempts  int       // failed deliveries (NACK, timeout); while leased, the lease's attempt
	Releases  int       // deliveries given back because their consumer left
	NotBefore time.Time // zero: none
	Leased    bool
	Handle    Handle
	Deadline  time.Time
	Watch     herald.NodeID
	Consumer  string
}

// Records reads every delivery record as durably stored by eng, in subject order.
func Records(eng *engine.Engine) ([]Record, error) {
	var out []Record
	err := eng.LoadAux(func(key, value []byte) error {
		id, ok := bytesCut(key, "d/")
		if !ok {
			return nil
		}
		st, err := decodeState(herald.NodeID(id), value)
		if err != nil {
			return err
		}
		out = append(out, Record{Subject: st.subject, Attempts: st.attempts, Releases: st.releases, NotBefore: st.notBefore, Leased: st.leased,
			Handle: st.handle, Deadline: st.deadline, Watch: st.watch, Consumer: st.consumer})
		return nil
	})
	return out, err
}
