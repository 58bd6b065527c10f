package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/auth"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/lockqueue"
	"github.com/herald-mq/herald/namedqueue"
	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/watch"
)

// stack is one role's services on the store: the engine, the watch engine, and on a
// leader the consume engine and the queue contracts; b is the seam over them. A node on
// a store of its own runs one leader stack for its life; a node on a shared store opens
// one for each role it takes.
type stack struct {
	role string
	eng  *engine.Engine
	del  *delivery.Service // nil on a follower
	wat  *watch.Service
	lq   *lockqueue.Service // nil on a follower
	auth *auth.Store        // principals and tokens, read from the stack's graph
	b    broker.Broker

	stopFollow func()                // a follower's: stops its follow loop and waits for it
	followErr  atomic.Pointer[error] // a follower's: why its follow loop ended for good
}

// err is why the stack cannot serve: its engine's fault, or a follower's log that it
// can no longer follow.
func (st *stack) err() error {
	if p := st.followErr.Load(); p != nil {
		return herald.Errorf(herald.CodeStorage, "this follower can no longer follow the change log (%v); it loads the graph again", *p)
	}
	return st.eng.Err()
}

// close stops the stack's services and closes its engine (which closes the store
// unless the engine was opened to keep it).
func (st *stack) close(ctx context.Context) error {
	var errs []error
	if st.stopFollow != nil {
		st.stopFollow()
	}
	if err := st.wat.Stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("server: stop watch: %w", err))
	}
	// Leases stay durable and keep their deadlines across a restart or a new leader.
	if st.del != nil {
		if err := st.del.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("server: stop delivery: %w", err))
		}
	}
	// The engine waits for its in-flight commits; give it time even if ctx is spent.
	engCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := st.eng.Close(engCtx); err != nil {
		errs = append(errs, fmt.Errorf("server: close engine: %w", err))
	}
	return errors.Join(errs...)
}

// metrics are the stack's services' own figures.
func (st *stack) metrics() []herald.Metric {
	out := append(st.eng.Metrics(), st.wat.Metrics()...)
	if st.del != nil {
		out = append(out, st.del.Metrics()...)
	}
	if st.lq != nil {
		out = append(out, st.lq.Metrics()...)
	}
	return out
}

// openLeader opens the engine on backend — taking it over unless keep — then the
// consume and watch engines and the queue contracts on it: the node the surfaces reach.
// On an error everything it opened is closed again (the backend too, unless keep).
func (s *Server) openLeader(ctx context.Context, backend store.Backend, keep bool) (_ *stack, err error) {
	eng, err := engine.Open(ctx, s.engineConfig(backend, keep, false))
	if err != nil {
		if !keep {
			_ = backend.Close() // a failed Open leaves the backend to its caller
		}
		return nil, fmt.Errorf("server: open engine: %w", err)
	}
	var cleanup undo
	defer func() {
		if err != nil {
			cleanup.run()
		}
	}()
	cleanup.add(func() { _ = eng.Close(context.Background()) })

	// The consume engine installs itself as the engine's statement extension (ACK, NACK,
	// EXTEND over /v1/query), so it starts before anything is served. Both modes share
	// the engine's standing-query core: one handle table, one _Watch writer.
	del := delivery.New(delivery.Config{
		Engine:       eng,
		Logger:       s.log.With("component", "delivery"),
		MaxConsumers: s.cfg.MaxConsumers,
		Policy:       s.cfg.WatchPolicy,
		// The queue APIs' groups carry their queue's name as a label.
		MaxGroupSeries: s.cfg.MetricsMaxGroups,
		QueueOf: func(group string) string {
			if q := lockqueue.QueueOfGroup(group); q != "" {
				return q
			}
			return namedqueue.QueueOfGroup(group)
		},
	})
	if err := del.Start(ctx); err != nil {
		return nil, fmt.Errorf("server: start delivery: %w", err)
	}
	cleanup.add(func() { _ = del.Stop(context.Background()) })
	wat := s.newWatch(eng)
	if err := wat.Start(ctx); err != nil {
		return nil, fmt.Errorf("server: start watch: %w", err)
	}
	cleanup.add(func() { _ = wat.Stop(context.Background()) })
	tokens, err := auth.Open(eng)
	if err != nil {
		return nil, fmt.Errorf("server: load principals and tokens: %w", err)
	}
	// The queue contracts translate onto the graph and the consume engine.
	nd := &node{eng: eng, del: del, wat: wat, lq: lockqueue.New(eng, del), nq: namedqueue.New(eng, del), status: s.status}
	return &stack{role: RoleLeader, eng: eng, del: del, wat: wat, lq: nd.lq, auth: tokens, b: nd}, nil
}

// openFollower opens a follower's engine on backend (which stays the caller's) and a
// watch engine on it, and starts following the leader's change log with wait.
func (s *Server) openFollower(ctx context.Context, backend store.Backend, wait func(context.Context, uint64) error, leader func() string) (*stack, error) {
	eng, err := engine.Open(ctx, s.engineConfig(backend, true, true))
	if err != nil {
		return nil, fmt.Errorf("server: open engine: %w", err)
	}
	tokens, err := auth.Open(eng)
	if err != nil {
		_ = eng.Close(context.Background())
		return nil, fmt.Errorf("server: load principals and tokens: %w", err)
	}
	wat := s.newWatch(eng)
	if err := wat.Start(ctx); err != nil {
		_ = eng.Close(context.Background())
		return nil, fmt.Errorf("server: start watch: %w", err)
	}
	fctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	st := &stack{role: RoleFollower, eng: eng, wat: wat, auth: tokens}
	go func() {
		defer close(done)
		follow(fctx, eng, wait, s.clock(), s.log, func(err error) { st.followErr.Store(&err) })
	}()
	// Principals and tokens made or revoked on the leader reach this node's with its log.
	stopAuth := tokens.Follow()
	st.stopFollow = func() { cancel(); <-done; stopAuth() }
	st.b = &followerNode{eng: eng, wat: wat, leader: leader, status: s.status}
	return st, nil
}

func (s *Server) engineConfig(backend store.Backend, keep, follower bool) engine.Config {
	return engine.Config{
		Backend:                backend,
		KeepBackend:            keep,
		Follower:               follower,
		Clock:                  s.cfg.Clock,
		Logger:                 s.log.With("component", "engine"),
		TickMode:               s.cfg.TickMode,
		TickInterval:           s.cfg.TickInterval,
		Retention:              s.cfg.Retention,
		MaxWatchesPerSession:   s.cfg.MaxWatchesPerSession,
		MaxWatchesPerPrincipal: s.cfg.MaxWatchesPerPrincipal,
		MinFreeBytes:           s.cfg.MinFreeBytes,
		Layer0Interval:         s.cfg.StatsInterval,
		StatementTimeout:       s.cfg.StatementTimeout,
		MaxRowsScanned:         s.cfg.MaxRowsScanned,
	}
}

func (s *Server) newWatch(eng *engine.Engine) *watch.Service {
	return watch.New(watch.Config{Engine: eng, Logger: s.log.With("component", "watch"), Policy: s.cfg.WatchPolicy, MaxBufferBytes: s.cfg.WatchBufferBytes, CPUShare: s.cfg.WatchCPUShare, Slots: s.fanSlots, FeedLinger: max(s.cfg.FeedLinger, 0)})
}
