// Package broker declares the one interface through which every surface (the JSON API,
// the RPC API, a follower forwarding to its leader) reaches a Herald node, and the
// values that cross it. It imports only the root package, so a surface built on it
// depends on no engine, standing-query, delivery, queue or store code.
package broker

import (
	"context"
	"errors"
	"time"

	"github.com/herald-mq/herald"
)

// Broker is a Herald node as its surfaces see it. server.Server implements it; brokertest
// has a fake for the surfaces' own tests. A part the node does not serve answers
// E4006 NOT_IMPLEMENTED.
type Broker interface {
	Statements
	Streams
	Settlement
	LockQueues
	NamedQueues
	Cluster
}

// Cluster reports a node's place among the nodes sharing its store.
type Cluster interface {
	Status(ctx context.Context) (Status, error)
}

// Roles a node can have among the nodes sharing its store: the leader commits, the
// followers serve reads and watch-mode streams from its change log.
const (
	RoleLeader   = "leader"
	RoleFollower = "follower"
)

// Status is a node's view of itself and of the nodes sharing its store. A node on a
// store of its own (Pebble) is its leader, alone.
type Status struct {
	Name    string       `json:"name"`
	Role    string       `json:"role"` // RoleLeader or RoleFollower
	Address string       `json:"address"`
	Leader  string       `json:"leader"` // the leader's address; "" when no node leads
	Term    uint64       `json:"term"`   // the leadership term it knows of (0 on a store of its own)
	Seq     uint64       `json:"seq"`    // the position it has applied
	Store   string       `json:"store"`  // "pebble", "postgres", or "memory" (tests)
	Nodes   []NodeStatus `json:"nodes"`
}

// NodeStatus is one node sharing the store, as it last reported itself.
type NodeStatus struct {
	Name    string  `json:"name"`
	Address string  `json:"address"`
	Role    string  `json:"role"`
	Seq     uint64  `json:"seq"`
	Behind  float64 `json:"behind_seconds"` // how far its graph was behind the newest commit it knew of
	Age     float64 `json:"age_seconds"`    // since it last reported
}

// Statements run the query language: sessions, one-off and prepared statements, and
// publishing.
type Statements interface {
	OpenSession(ctx context.Context) (string, error)
	CloseSession(ctx context.Context, id string) error
	// Exec runs the statements of query (none of them a WATCH: E4009) in a session, or
	// in a transaction of their own when sessionID is "".
	Exec(ctx context.Context, sessionID, query string, params map[string]herald.Value) (*herald.Response, error)
	// Prepare parses query once and keeps it under a name derived from its text.
	Prepare(ctx context.Context, query string) (Prepared, error)
	// ExecPrepared runs the statement prepared under name (E4010 when there is none).
	ExecPrepared(ctx context.Context, sessionID, name string, params map[string]herald.Value) (*herald.Response, error)
	// Unprepare drops a prepared statement; false when none has that name.
	Unprepare(ctx context.Context, name string) bool
	// PublishAsync creates msgs' nodes in one commit, answering each at once (its id, or
	// why it was refused); durable waits until that commit is on disk.
	PublishAsync(ctx context.Context, sessionID string, msgs []herald.Publication) (out []herald.Published, durable func(context.Context) error, err error)
	// Position is the node's current (seq, tick).
	Position() (seq, tick uint64)
}

// Prepared names a prepared statement.
type Prepared struct {
	Name   string   // derived from the text: preparing the same text again gives it back
	Query  string   // the text
	Params []string // the parameters it uses, sorted
}

// Mode is how a WATCH runs: watch mode streams changes to every subscriber; consume
// mode leases each match to one consumer.
type Mode int

// The two modes.
const (
	ModeWatch Mode = iota + 1
	ModeConsume
)

func (m Mode) String() string {
	switch m {
	case ModeWatch:
		return "watch"
	case ModeConsume:
		return "consume"
	}
	return "unknown"
}

// StreamRequest opens a stream on a WATCH statement. Which mode runs is the statement's
// to say ([mode=consume]); Open decides it once.
type StreamRequest struct {
	SessionID string
	Query     string
	Params    map[string]herald.Value
	// After resumes a watch-mode stream after this position (0: from a snapshot).
	// Consume mode ignores it: a group's progress is its own.
	After uint64
	// Credit bounds a consume-mode stream's unsettled deliveries (0: the statement's
	// buffer); Stream.SetCredit changes it, up to MaxCredit (0: Credit). Watch mode
	// ignores both.
	Credit, MaxCredit int
	// Only, when set, refuses a statement of the other mode (E1004): for a surface
	// whose stream serves one mode.
	Only Mode
}

// Streams opens standing queries.
type Streams interface {
	// Open runs req's WATCH in its mode and returns its stream.
	Open(ctx context.Context, req StreamRequest) (Stream, error)
	// FrameBudget waits for room in the watch-mode fan-out budget before a surface
	// builds a frame of watch events; finish counts the frame's time against it. ok is
	// false when done closed first. A node without a budget returns at once.
	FrameBudget(done <-chan struct{}) (finish func(), ok bool)
}

// Stream is one open standing query. Every stream has every method; what a method does
// on a stream of the other mode is said with it.
type Stream interface {
	herald.Stream
	// Mode is the mode the statement runs in.
	Mode() Mode
	// Take appends to dst, up to max events in all, what the stream has ready without
	// waiting, and reports closed once its event channel is closed.
	Take(dst []herald.Event, max int) (events []herald.Event, closed bool)
	// SetNotify asks the stream to call fn (which must not block) whenever it has put
	// events in its channel or has ended, so a surface carrying many streams needs no
	// goroutine per stream. Set it once, before reading.
	SetNotify(fn func())
	// SetCredit changes a consume-mode stream's credit, from 1 up to its MaxCredit;
	// watch-mode streams answer E4001.
	SetCredit(n int) error
}

// Action is what a settlement does with a lease.
type Action int

// Settlement actions.
const (
	ActAck    Action = iota + 1 // ACK
	ActNack                     // NACK, with Delay
	ActReject                   // NACK [no_retry]: dead-letter at once
	ActExtend                   // EXTEND, with By
)

// Settle is one settlement of a batch.
type Settle struct {
	DeliveryID string
	Action     Action
	Delay      time.Duration // ActNack: redeliver no earlier than this (0: the watch's backoff)
	By         time.Duration // ActExtend: the new deadline is now + By (0: the watch's ack_timeout)
}

// SettleResult is the outcome of one settlement of a batch.
type SettleResult struct {
	Err      error     // nil, E8004 (unknown, settled or expired), E8007 (letter kept without its destination), …
	Deadline time.Time // ActExtend: the new deadline
}

// Settlement settles consume-mode leases by delivery id.
type Settlement interface {
	// Settle settles a batch in one commit (a claim that fails answers on its own and
	// changes nothing); seq and tick are the commit's position (zero when nothing
	// committed). The principal of ctx needs the settle grant on each subject's type.
	Settle(ctx context.Context, items []Settle) (results []SettleResult, seq, tick uint64)
	// SettleAsync settles as Settle does and calls done (which must not block) once the
	// outcome is known, instead of waiting for it.
	SettleAsync(ctx context.Context, items []Settle, done func(results []SettleResult, seq, tick uint64))
}

// MaxSettlements caps the settlements of one batch (POST /v1/settle, the Settle RPC, a
// Subscribe frame).
const MaxSettlements = 10000

// CheckBatch refuses a batch of n settlements that is empty or too long (E4001).
func CheckBatch(n int) error {
	switch {
	case n == 0:
		return herald.Errorf(herald.CodeMalformedRequest, "no settlements; give at least one delivery id and action")
	case n > MaxSettlements:
		return herald.Errorf(herald.CodeMalformedRequest, "%d settlements in one batch; at most %d", n, MaxSettlements)
	}
	return nil
}

// CheckSettle refuses settlement i of a batch when it has no delivery id, or a delay
// (NACK only) or a by (EXTEND only) where its action takes none, or a negative one
// (E4001). delayGiven and byGiven say whether the request carried them at all.
func CheckSettle(i int, it Settle, delayGiven, byGiven bool) error {
	switch {
	case it.DeliveryID == "":
		return herald.Errorf(herald.CodeMalformedRequest, "settlement %d: delivery_id is missing", i)
	case delayGiven && it.Action != ActNack:
		return herald.Errorf(herald.CodeMalformedRequest, "settlement %d: a delay applies to NACK only", i)
	case byGiven && it.Action != ActExtend:
		return herald.Errorf(herald.CodeMalformedRequest, "settlement %d: by applies to EXTEND only", i)
	case it.Delay < 0 || it.By < 0:
		return herald.Errorf(herald.CodeMalformedRequest, "settlement %d: durations must not be negative", i)
	}
	return nil
}

// TakeReady appends to dst, up to max events in all, what events holds without
// waiting, and reports closed once events is closed: Take for a stream whose channel is
// all it has.
func TakeReady(events <-chan herald.Event, dst []herald.Event, max int) ([]herald.Event, bool) {
	for len(dst) < max {
		select {
		case ev, ok := <-events:
			if !ok {
				return dst, true
			}
			dst = append(dst, ev)
		default:
			return dst, false
		}
	}
	return dst, false
}

// NotLeader is the detail of E5006 NOT_LEADER: where the leader serves clients, ""
// when no node leads at the moment.
type NotLeader struct{ Leader string }

func (n *NotLeader) Error() string {
	if n.Leader == "" {
		return "no node leads at the moment"
	}
	return "the leader is at " + n.Leader
}

// NotLeaderError refuses what only the leader does (what names it) on a follower,
// naming the leader.
func NotLeaderError(leader, what string) error {
	msg := what + " goes to the leader"
	if leader != "" {
		msg += ", at " + leader
	} else {
		msg += "; no node leads at the moment, retry shortly"
	}
	return &herald.Error{Code: herald.CodeNotLeader, Message: msg, Err: &NotLeader{Leader: leader}}
}

// LeaderOf returns the leader's address an E5006 error names, or "".
func LeaderOf(err error) string {
	var nl *NotLeader
	if herald.CodeOf(err) == herald.CodeNotLeader && errors.As(err, &nl) {
		return nl.Leader
	}
	return ""
}
