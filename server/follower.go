package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/watch"
)

// followerNode is the seam on a follower: MATCH and watch-mode streams run on its own
// graph, which follows the leader's change log; everything that writes — statements
// that commit, sessions (they carry transactions), publishing, consume streams,
// settlement, both queue contracts — answers E5006 NOT_LEADER naming the leader, so a
// client sends it there. With no engine (a node between roles) everything answers so.
type followerNode struct {
	eng    *engine.Engine // nil between roles
	wat    *watch.Service
	leader func() string // the leader's address, "" when unknown
	status func(ctx context.Context) (broker.Status, error)
}

var _ broker.Broker = (*followerNode)(nil)

func (f *followerNode) refuse(what string) error { return broker.NotLeaderError(f.leader(), what) }

// local maps the engine's own refusal of a commit to one that names the leader.
func (f *followerNode) local(err error) error {
	if herald.CodeOf(err) == herald.CodeNotLeader {
		return f.refuse("a statement that writes")
	}
	return err
}

func (f *followerNode) OpenSession(context.Context) (string, error) {
	return "", f.refuse("a session")
}

func (f *followerNode) CloseSession(context.Context, string) error { return f.refuse("a session") }

// Exec runs a statement on the follower's graph; one that commits is refused there
// (the engine of a follower commits nothing) and sent to the leader.
func (f *followerNode) Exec(ctx context.Context, sessionID, query string, params map[string]herald.Value) (*herald.Response, error) {
	if f.eng == nil || sessionID != "" {
		return nil, f.refuse("a statement in a session")
	}
	resp, err := f.eng.Exec(ctx, "", query, params)
	return resp, f.local(err)
}

func (f *followerNode) Prepare(_ context.Context, query string) (broker.Prepared, error) {
	if f.eng == nil {
		return broker.Prepared{}, f.refuse("preparing a statement")
	}
	p, err := f.eng.Prepare(query)
	if err != nil {
		return broker.Prepared{}, err
	}
	return broker.Prepared{Name: p.Name, Query: p.Query, Params: p.Params}, nil
}

func (f *followerNode) ExecPrepared(ctx context.Context, sessionID, name string, params map[string]herald.Value) (*herald.Response, error) {
	if f.eng == nil || sessionID != "" {
		return nil, f.refuse("a statement in a session")
	}
	p, err := f.eng.Lookup(name)
	if err != nil {
		return nil, err
	}
	resp, err := f.eng.ExecPrepared(ctx, "", p, params)
	return resp, f.local(err)
}

func (f *followerNode) Unprepare(_ context.Context, name string) bool {
	return f.eng != nil && f.eng.Unprepare(name)
}

func (f *followerNode) PublishAsync(context.Context, string, []herald.Publication) ([]herald.Published, func(context.Context) error, error) {
	return nil, nil, f.refuse("publishing")
}

func (f *followerNode) Position() (uint64, uint64) {
	if f.eng == nil {
		return 0, 0
	}
	return f.eng.Position()
}

// Open serves watch mode from the follower's graph; consume mode is the leader's.
func (f *followerNode) Open(ctx context.Context, req broker.StreamRequest) (broker.Stream, error) {
	mode := modeOf(req.Query)
	if req.Only != 0 && req.Only != mode {
		return nil, herald.Errorf(herald.CodeInvalidQuery, "this stream serves %s mode, and the WATCH asks for %s mode: open it on a %s stream", req.Only, mode, mode)
	}
	if mode == broker.ModeConsume || f.wat == nil {
		return nil, f.refuse("a consume stream")
	}
	st, err := f.wat.Open(ctx, req.SessionID, req.Query, req.Params, req.After)
	if err != nil {
		return nil, f.local(err)
	}
	return &watchStream{st.(watchCaps)}, nil
}

func (f *followerNode) FrameBudget(done <-chan struct{}) (func(), bool) {
	if f.wat == nil {
		return func() {}, true
	}
	return f.wat.FrameBudget(done)
}

func (f *followerNode) Settle(_ context.Context, items []broker.Settle) ([]broker.SettleResult, uint64, uint64) {
	out := make([]broker.SettleResult, len(items))
	for i := range out {
		out[i].Err = f.refuse("settlement")
	}
	return out, 0, 0
}

func (f *followerNode) SettleAsync(ctx context.Context, items []broker.Settle, done func([]broker.SettleResult, uint64, uint64)) {
	done(f.Settle(ctx, items))
}

func (f *followerNode) Push(context.Context, string, json.RawMessage, int64) (broker.PushResult, error) {
	return broker.PushResult{}, f.refuse("the queue API")
}

func (f *followerNode) Pop(context.Context, string, broker.PopOptions) (broker.PopResult, error) {
	return broker.PopResult{}, f.refuse("the queue API")
}

func (f *followerNode) Acknowledge(context.Context, string, string) (broker.AckResult, error) {
	return broker.AckResult{}, f.refuse("the queue API")
}

func (f *followerNode) Release(context.Context, string, string) (int, error) {
	return 0, f.refuse("the queue API")
}

func (f *followerNode) CreateQueue(context.Context, broker.QueueConfig) (broker.QueueConfig, error) {
	return broker.QueueConfig{}, f.refuse("the queue RPC")
}

func (f *followerNode) DeleteQueue(context.Context, string) (int, error) {
	return 0, f.refuse("the queue RPC")
}

func (f *followerNode) Enqueue(context.Context, string, broker.QueueMessage) (herald.NodeID, error) {
	return "", f.refuse("the queue RPC")
}

func (f *followerNode) ConsumeQueue(context.Context, string) (broker.Subscription, error) {
	return nil, f.refuse("the queue RPC")
}

func (f *followerNode) AckMessage(context.Context, string, herald.NodeID) error {
	return f.refuse("the queue RPC")
}

func (f *followerNode) NackMessage(context.Context, string, herald.NodeID, broker.QueueNack) error {
	return f.refuse("the queue RPC")
}

func (f *followerNode) ExtendMessage(context.Context, string, herald.NodeID, time.Duration) (time.Time, error) {
	return time.Time{}, f.refuse("the queue RPC")
}

func (f *followerNode) RedriveDeadLetters(context.Context, string) (int, error) {
	return 0, f.refuse("the queue RPC")
}

func (f *followerNode) Status(ctx context.Context) (broker.Status, error) { return f.status(ctx) }

// Backoff of a follower's reads of the change log after one failed.
const (
	followRetryMin = 100 * time.Millisecond
	followRetryMax = 2 * time.Second
)

// follow applies the leader's change log to eng until ctx ends. A read of the log that
// fails (PostgreSQL restarted or failed over, the connection cut) is retried, after
// followRetryMin doubling up to followRetryMax, so that the follower catches up by
// itself once the store answers again; meanwhile it serves what it has, and its lag
// grows. Only a log truncated past the follower's position ends the loop, since the
// graph must then be loaded again: failed is called with why, the node reports itself
// not ready, and the roles loop opens the follower again.
func follow(ctx context.Context, eng *engine.Engine, wait func(context.Context, uint64) error, clk herald.Clock, log *slog.Logger, failed func(error)) {
	delay := followRetryMin
	for {
		err := eng.Follow(ctx, wait)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrCompacted) {
			log.Error("following the leader's change log stopped: the graph must be loaded again", "err", err)
			failed(err)
			return
		}
		seq, _ := eng.Position()
		log.Warn("reading the leader's change log failed; retrying", "seq", seq, "retry_in", delay, "err", err)
		t := clk.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		delay = min(delay*2, followRetryMax)
	}
}
