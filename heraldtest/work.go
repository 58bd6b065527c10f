package heraldtest

import (
	"context"
	"testing"

	"github.com/herald-mq/herald/client"
)

// WorkOption configures Work.
type WorkOption func(*workConfig)

type workConfig struct {
	policy  client.Policy
	attempt int
	codec   client.Codec
}

// WithPolicy settles the message under p instead of client.NackOnError.
func WithPolicy(p client.Policy) WorkOption { return func(c *workConfig) { c.policy = p } }

// WithAttempt gives the message this attempt number (1 by default), as a redelivery
// has.
func WithAttempt(n int) WorkOption { return func(c *workConfig) { c.attempt = n } }

// WithCodec encodes the payload with c instead of client.JSON.
func WithCodec(c client.Codec) WorkOption { return func(w *workConfig) { w.codec = c } }

// Work runs w once on payload as a subscription would, without a server: the payload
// goes through the codec into a message's match and back (so a field the codec cannot
// carry shows here), the worker runs, and the message is settled under the policy.
// It returns the message, whose Settlement says what became of it ("ack", "nack",
// "reject", or "" if nothing settled it), and the worker's error.
func Work[T any](tb testing.TB, w client.Worker[T], payload T, opts ...WorkOption) (*client.Message, error) {
	tb.Helper()
	cfg := workConfig{policy: client.NackOnError, attempt: 1, codec: client.JSON}
	for _, opt := range opts {
		opt(&cfg)
	}
	attrs, err := cfg.codec.Marshal(payload)
	if err != nil {
		tb.Fatalf("heraldtest: Work: %v", err)
	}
	match := make(map[string]any, len(attrs))
	for k, v := range attrs {
		match[k] = v.Interface()
	}
	m := &client.Message{Match: match, DeliveryID: "d-heraldtest", Attempt: cfg.attempt, Codec: cfg.codec}
	ctx := context.Background()
	werr := client.Typed(client.WorkFunc[T](func(ctx context.Context, j *client.Job[T]) error {
		return w.Work(ctx, j)
	}))(ctx, m)
	if err := cfg.policy.Settle(ctx, m, werr); err != nil {
		tb.Fatalf("heraldtest: Work: settling: %v", err)
	}
	return m, werr
}
