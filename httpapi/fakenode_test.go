package httpapi

import (
	"context"
	"strings"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/broker/brokertest"
)

// fakeNode returns the seam's fake over the handler tests' recording fakes: eng for
// statements and sessions, and any *fakeDelivery, *fakeWatcher or *fakeQueue among
// others. A stream goes to the watcher when there is one and the statement does not
// say consume, otherwise to the delivery fake; what has no fake answers E4006.
func fakeNode(eng *fakeEngine, others ...any) *brokertest.Broker {
	b := &brokertest.Broker{
		ExecFunc:         eng.Exec,
		OpenSessionFunc:  eng.OpenSession,
		CloseSessionFunc: eng.CloseSession,
		PositionFunc:     eng.Position,
	}
	var del *fakeDelivery
	var wat interface {
		Open(ctx context.Context, sessionID, query string, params map[string]herald.Value, after uint64) (herald.Stream, error)
	}
	for _, o := range others {
		switch f := o.(type) {
		case *fakeDelivery:
			del = f
			b.SettleFunc = f.SettleMany
		case *fakeWatcher:
			wat = f
		case *listWatcher:
			wat = f
		case *fakeQueue:
			b.PushFunc, b.PopFunc, b.AcknowledgeFunc, b.ReleaseFunc = f.Push, f.Pop, f.Acknowledge, f.Release
		}
	}
	b.OpenFunc = func(ctx context.Context, req broker.StreamRequest) (broker.Stream, error) {
		if wat != nil && !strings.Contains(req.Query, "consume") {
			st, err := wat.Open(ctx, req.SessionID, req.Query, req.Params, req.After)
			if err != nil {
				return nil, err
			}
			return &modeStream{st, broker.ModeWatch}, nil
		}
		if del == nil {
			return nil, herald.Errorf(herald.CodeNotImplemented, "no consume mode here")
		}
		st, err := del.Consume(ctx, req.SessionID, req.Query, req.Params)
		if err != nil {
			return nil, err
		}
		return &modeStream{st, broker.ModeConsume}, nil
	}
	return b
}

// modeStream gives a test's herald.Stream the rest of broker.Stream.
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
func (m *modeStream) SetCredit(int) error {
	return herald.Errorf(herald.CodeMalformedRequest, "no credit")
}

func (m *modeStream) Take(dst []herald.Event, max int) ([]herald.Event, bool) {
	return broker.TakeReady(m.Events(), dst, max)
}
