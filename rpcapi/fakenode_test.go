package rpcapi

import (
	"context"
	"strings"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/broker/brokertest"
)

// watcher is what the tests' watch-mode fakes answer.
type watcher interface {
	Open(ctx context.Context, sessionID, query string, params map[string]herald.Value, after uint64) (herald.Stream, error)
}

// consumeMode decides a test statement's mode as the node would for the statements
// these tests use: [mode: consume], or text that is no complete WATCH (its error is
// consume mode's to give).
func consumeMode(query string) bool {
	return strings.Contains(query, "consume") || !strings.Contains(query, "RETURN")
}

// fakeNode returns the seam's fake over the service tests' recording fakes: eng for
// statements, sessions and publishing, del (may be nil) for consume mode and
// settlement, wat (may be nil) for watch mode; what has no fake answers E4006.
func fakeNode(eng *fakeEngine, del *fakeDelivery, wat watcher) *brokertest.Broker {
	b := &brokertest.Broker{
		ExecFunc:         eng.Exec,
		OpenSessionFunc:  eng.OpenSession,
		CloseSessionFunc: eng.CloseSession,
		PositionFunc:     eng.Position,
		PrepareFunc:      eng.Prepare,
		ExecPreparedFunc: eng.ExecPrepared,
		UnprepareFunc:    eng.Unprepare,
		PublishAsyncFunc: eng.PublishAsync,
	}
	if del != nil {
		b.SettleFunc = del.SettleMany
	}
	b.OpenFunc = func(ctx context.Context, req broker.StreamRequest) (broker.Stream, error) {
		mode := broker.ModeWatch
		if consumeMode(req.Query) {
			mode = broker.ModeConsume
		}
		if req.Only != 0 && req.Only != mode {
			return nil, herald.Errorf(herald.CodeInvalidQuery, "this stream serves %s mode", req.Only)
		}
		var st herald.Stream
		var err error
		switch {
		case mode == broker.ModeWatch && wat != nil:
			st, err = wat.Open(ctx, req.SessionID, req.Query, req.Params, req.After)
		case mode == broker.ModeConsume && del != nil:
			st, err = del.Consume(ctx, req.SessionID, req.Query, req.Params)
		default:
			return nil, herald.Errorf(herald.CodeNotImplemented, "no %s mode here", mode)
		}
		if err != nil {
			return nil, err
		}
		return &modeStream{Stream: st, mode: mode}, nil
	}
	return b
}

// modeStream gives a test's herald.Stream the rest of broker.Stream, using what the
// stream has of its own (Take, SetNotify, SetCredit).
type modeStream struct {
	herald.Stream
	mode broker.Mode
}

func (m *modeStream) Mode() broker.Mode { return m.mode }

func (m *modeStream) SetNotify(fn func()) {
	if n, ok := m.Stream.(interface{ SetNotify(func()) }); ok {
		n.SetNotify(fn)
	}
}

func (m *modeStream) SetCredit(n int) error {
	if c, ok := m.Stream.(interface{ SetCredit(int) error }); ok {
		return c.SetCredit(n)
	}
	return herald.Errorf(herald.CodeMalformedRequest, "no credit")
}

func (m *modeStream) Take(dst []herald.Event, max int) ([]herald.Event, bool) {
	if t, ok := m.Stream.(interface {
		Take([]herald.Event, int) ([]herald.Event, bool)
	}); ok {
		return t.Take(dst, max)
	}
	return broker.TakeReady(m.Events(), dst, max)
}
