package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/herald-mq/herald"
)

// Tx is the transaction a TxHandler writes in: a server session with BEGIN open. What
// its Exec runs is applied only if the transaction commits, and it commits together
// with the message's ACK.
type Tx struct {
	sess *Session
}

// Exec runs query inside the transaction (see Client.Exec). A statement that fails ends
// the transaction on the server; return the error from the handler.
func (t *Tx) Exec(ctx context.Context, query string, params map[string]any) (*Response, error) {
	return t.sess.Exec(ctx, query, params)
}

// TxHandler processes a message inside a transaction: what it writes through tx and the
// message's ACK commit together, in one commit, or not at all.
type TxHandler func(ctx context.Context, m *Message, tx *Tx) error

// Transactional turns h into a Handler for Subscribe that consumes, transforms and
// produces exactly once: for each message it opens a server session, begins a
// transaction, runs h, and when h returns nil commits the transaction with `ACK` of the
// message in it. The server commits the writes and the settlement atomically, and
// refuses the whole commit (E8004) if the lease is no longer current — expired, or
// settled elsewhere — so the writes of a message that was redelivered meanwhile are
// never applied.
//
// When h fails, the transaction is rolled back and h's error goes to the subscription's
// policy, as for any handler; so does a failed commit (the message is unsettled, and
// the policy NACKs or rejects it, or leaves it to its lease). Do not combine it with
// AckFirst, which acks before the transaction could. Each message costs a session of
// its own: two more round trips than a plain handler.
func (c *Client) Transactional(h TxHandler) Handler {
	return func(ctx context.Context, m *Message) error {
		sess, err := c.OpenSession(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = sess.Close(context.WithoutCancel(ctx)) }()
		if _, err := sess.Exec(ctx, "BEGIN", nil); err != nil {
			return err
		}
		if err := h(ctx, m, &Tx{sess: sess}); err != nil {
			if _, rerr := sess.Exec(ctx, "ROLLBACK", nil); rerr != nil && herald.CodeOf(rerr) != herald.CodeTxState {
				return errors.Join(err, fmt.Errorf("client: rollback: %w", rerr))
			}
			return err
		}
		return m.commitWith(ctx, sess)
	}
}

// commitWith commits the session's open transaction with the message's ACK in it. The
// message counts as settled while the commit is under way; if the commit fails it is
// unsettled again, for the subscription's policy.
func (m *Message) commitWith(ctx context.Context, sess *Session) error {
	m.mu.Lock()
	switch {
	case m.expired != nil:
		m.mu.Unlock()
		_, _ = sess.Exec(ctx, "ROLLBACK", nil)
		return m.expired
	case m.settled != "":
		m.mu.Unlock()
		_, _ = sess.Exec(ctx, "ROLLBACK", nil)
		return fmt.Errorf("%w (%s)", ErrSettled, m.settledHow())
	}
	m.settled = "ack"
	m.mu.Unlock()
	if _, err := sess.Exec(ctx, "ACK $d; COMMIT", map[string]any{"d": m.DeliveryID}); err != nil {
		m.mu.Lock()
		m.settled = ""
		m.mu.Unlock()
		return fmt.Errorf("client: commit with ACK: %w", err)
	}
	m.sub.forget(m)
	return nil
}
