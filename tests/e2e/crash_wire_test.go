package e2e

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
)

// The crash test's load over the Go client's binary wire: the publish stream and the
// subscribe stream (settlements on the stream), beside the HTTP publishers and SSE
// consumers, against the same killed and restarted server.

// wireClient is a client of whichever server runs, dialled again after a restart.
type wireClient struct {
	c   *crashCluster
	url string
	cl  *client.Client
}

func (w *wireClient) get() *client.Client {
	u := w.c.current()
	if u == "" {
		return nil
	}
	if w.cl != nil && u == w.url {
		return w.cl
	}
	w.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, u, client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return nil
	}
	w.url, w.cl = u, cl
	return cl
}

func (w *wireClient) close() {
	if w.cl != nil {
		_ = w.cl.Close()
		w.cl = nil
	}
}

// wirePublisher publishes messages with Client.Publish until stop is closed, recording
// every one the server acknowledged as durable.
func wirePublisher(c *crashCluster, l *crashLedger, next *atomic.Int64, stop <-chan struct{}) {
	w := &wireClient{c: c}
	defer w.close()
	for {
		select {
		case <-stop:
			return
		default:
		}
		cl := w.get()
		if cl == nil || l.publishes.Load() >= crashMaxPublishes {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		k := next.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		id, err := cl.Publish(ctx, "Msg", map[string]any{"k": k})
		cancel()
		if err != nil {
			// Maybe committed, maybe not: not acknowledged, so not owed.
			l.lostAnswers.Add(1)
			w.close()
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if id == "" {
			l.problem("wire publish k=%d: acknowledged without an id", k)
			continue
		}
		l.recordPublish(id, k)
		l.wirePublishes.Add(1)
	}
}

// wireConsumer subscribes to the crash watch with Client.Subscribe, resubscribing to
// whichever server runs, and settles every delivery per verdict until ctx is done.
func wireConsumer(ctx context.Context, c *crashCluster, l *crashLedger, verdict func(int64, int) string) {
	w := &wireClient{c: c}
	defer w.close()
	for ctx.Err() == nil {
		cl := w.get()
		if cl == nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		sub, err := cl.Subscribe(ctx, crashWatch, func(hctx context.Context, m *client.Message) error {
			settleOnWire(hctx, l, m, verdict)
			return nil
		}, client.WithPolicy(client.Manual), client.WithConcurrency(4), client.WithPrefetch(16))
		if err != nil {
			w.close()
			time.Sleep(10 * time.Millisecond)
			continue
		}
		select {
		case <-sub.Done():
		case <-ctx.Done():
		}
		closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = sub.Close(closeCtx)
		cancel()
		w.close()
	}
}

// settleOnWire settles m as verdict says and records the server's answer.
func settleOnWire(ctx context.Context, l *crashLedger, m *client.Message, verdict func(int64, int) string) {
	l.deliveries.Add(1)
	id, _ := m.Match["id"].(string)
	typ, _ := m.Match["_type"].(string)
	k, ok := m.Match["k"].(int64)
	if id == "" || typ != "Msg" || !ok {
		l.problem("wire delivery %s: match %v", m.DeliveryID, m.Match)
		return
	}
	how := verdict(k, m.Attempt)
	var err error
	switch how {
	case `ACK %q`:
		err = m.Ack(context.WithoutCancel(ctx))
	case `NACK %q`:
		err = m.Nack(context.WithoutCancel(ctx))
	default:
		err = m.Reject(context.WithoutCancel(ctx))
	}
	switch {
	case err == nil:
		l.recordSettled(how, id, m.DeliveryID)
		if how == `ACK %q` {
			l.wireAcks.Add(1)
		}
	case herald.CodeOf(err) == herald.CodeInvalidDeliveryID || herald.CodeOf(err) == herald.CodeAckTimeout:
		l.stale.Add(1) // the lease ran out first: allowed, changes nothing
	default:
		// The stream or the server went away: the settlement may have committed.
		l.recordLost(how, id, m.DeliveryID)
	}
}
