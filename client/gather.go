package client

import (
	"runtime"
	"sync"
)

// gather lets a queue grow before a frame is cut from it while earlier frames are still
// unanswered (busy): the goroutines that an answer just released are about to add to
// it, and one frame for all of them costs the client and the server one write and one
// read instead of one each. It yields while the queue keeps growing, at most
// maxGatherYields times; yielding costs no latency when nothing else is ready to run,
// and none is spent when nothing is in flight. state reports under mu whether the
// stream is busy and how long the queue is; limit is the size of a full frame.
func gather(mu *sync.Mutex, limit int, state func() (busy bool, queued int)) {
	for range maxGatherYields {
		mu.Lock()
		busy, before := state()
		mu.Unlock()
		if !busy || before >= limit {
			return
		}
		runtime.Gosched()
		mu.Lock()
		_, after := state()
		mu.Unlock()
		if after == before {
			return
		}
	}
}

// maxGatherYields bounds the yields of one gather.
const maxGatherYields = 4
