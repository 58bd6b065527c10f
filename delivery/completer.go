package delivery

import "context"

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
