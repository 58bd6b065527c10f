package delivery

import "github.com/herald-mq/herald/engine"

// Transactional settlement: `BEGIN; ACK $d; SPAWN r: Result {…}; COMMIT` settles the
// delivery and applies the writes in one commit, or does neither. The ACK (or NACK)
// joins the session's transaction as an engine.TxPart; COMMIT claims the lease then,
// writes the settlement's effect into the transaction, and finishes the settlement in
// memory once the commit is durable. A lease that is no longer current at COMMIT
// (expired, settled, released) fails the whole commit with E8004. Until COMMIT nothing
// is claimed: the lease keeps its deadline, and ROLLBACK leaves it as it was.

// inTx checks that the delivery is current now (so a wrong id fails at once, with its
// statement's error) and joins its settlement to the open transaction.
func (s *Service) inTx(env engine.StmtEnv, it Settle) error {
	h := HandleOf(it.DeliveryID)
	s.mu.Lock()
	l := s.leases[h]
	current := l != nil && l.sent && !l.settling && l.deadline.After(s.clock.Now())
	s.mu.Unlock()
	if !current {
		return invalidDelivery(it.DeliveryID)
	}
	env.Enlist(&txSettlement{s: s, it: it})
	return nil
}

// txSettlement is one ACK or NACK of an explicit transaction (engine.TxPart).
type txSettlement struct {
	s  *Service
	it Settle
	st *settlement // claimed by Prepare
}

// Prepare claims the lease, as a settlement on its own does; E8004 when it is not
// current any more.
func (t *txSettlement) Prepare() error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	st, err := t.s.prepareLocked(t.it)
	if err != nil {
		return err
	}
	t.st = st
	return nil
}

// Apply writes the settlement into the committing transaction.
func (t *txSettlement) Apply(tx *engine.SysTx) { t.st.write(tx) }

// Done finishes the settlement once the commit is durable, or gives the lease back
// unsettled when the commit failed.
func (t *txSettlement) Done(err error) {
	s := t.s
	if err != nil {
		s.abort(t.st.l)
		return
	}
	s.mu.Lock()
	aerr := t.st.committed()
	s.mu.Unlock()
	if aerr != nil {
		// The transaction committed; what went wrong is the dead letter's destination
		// (E8007, the letter is recorded without it) or reading the subject's body.
		s.log.Warn("consume: a settlement committed with its transaction reported a problem", "delivery", t.it.DeliveryID, "err", aerr)
	}
}

var _ engine.TxPart = (*txSettlement)(nil)
