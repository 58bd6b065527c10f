package delivery

import (
	"context"

	"github.com/herald-mq/herald/engine"
)

// The completer: the dispatcher and the settler commit without waiting for the sync
// (engine.SystemAsync) and go on with their next batch; what depends on a commit being
// durable — sending its consumed events, applying a settlement to memory and answering
// it — is queued here and done once the commit is durable, in commit order. It is a
// goroutine of the Service, started and stopped with it.

// job is a commit's consequences, to be done once durable says how the commit went.
type job struct {
	durable func(context.Context) error
	done    func(err error)
}

// commitAsync commits write without waiting for its sync and queues then(seq, tick,
// err) for the completer, to run once the commit is durable (or failed). The commit and
// the queueing happen under one lock, so the completer's jobs are in commit order: a
// settlement is never answered before an earlier round's events went out.
func (s *Service) commitAsync(write func(tx *engine.SysTx), then func(seq, tick uint64, err error)) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	seq, tick, durable, err := s.eng.SystemAsync(func(tx *engine.SysTx) error {
		write(tx)
		return nil
	})
	if err != nil {
		return err
	}
	s.jobs <- job{durable: durable, done: func(err error) { then(seq, tick, err) }}
	return nil
}

// marker queues a job that runs done once every job queued before has run.
func (s *Service) marker(done func()) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.jobs <- job{done: func(error) { done() }}
}

// completer runs jobs in order until the queue is closed (by Stop, once the dispatcher
// and the settler have ended).
func (s *Service) completer() {
	defer close(s.compDone)
	for j := range s.jobs {
		var err error
		if j.durable != nil {
			err = j.durable(context.Background())
		}
		j.done(err)
	}
}
