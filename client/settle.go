package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/herald-mq/herald"
)

// Settlements of a client's messages are coalesced: every Ack, Nack, Reject and Extend
// made while a settlement request is on its way goes into the next POST /v1/settle, so
// that many concurrent handlers cost a few requests (and one server commit each)
// rather than one request per message. Each call still returns only once the server
// has answered for its own message.

// Bounds of the coalescer.
const (
	settleInFlight = 4    // requests on their way at once
	settleBatch    = 1000 // settlements in one request
)

// settleItem is one settlement as POST /v1/settle takes it.
type settleItem struct {
	DeliveryID string `json:"delivery_id"`
	Action     string `json:"action"`
	Delay      string `json:"delay,omitempty"`
	By         string `json:"by,omitempty"`
}

type settleRequest struct {
	Settlements []settleItem `json:"settlements"`
}

type settleAnswer struct {
	Results []struct {
		DeliveryID string `json:"delivery_id"`
		OK         bool   `json:"ok"`
		Deadline   string `json:"deadline"`
		Error      *struct {
			Code    herald.Code `json:"code"`
			Message string      `json:"message"`
		} `json:"error"`
	} `json:"results"`
}

// settleOutcome is what the server said about one settlement.
type settleOutcome struct {
	err      error
	deadline time.Time
}

type pendingSettle struct {
	item settleItem
	stmt string // the same settlement as a statement, for servers without /v1/settle
	done chan settleOutcome
}

// settler is a client's coalescer. Its sender goroutines live while there is something
// to send; Client.Close waits for them.
type settler struct {
	c        *Client
	mu       sync.Mutex
	queue    []*pendingSettle
	inflight int
	legacy   bool // the server has no /v1/settle: settle with statements
	wg       sync.WaitGroup
}

// submit queues a settlement and waits for its outcome, or for ctx. A settlement whose
// caller stopped waiting is still sent.
func (s *settler) submit(ctx context.Context, item settleItem, stmt string) settleOutcome {
	p := &pendingSettle{item: item, stmt: stmt, done: make(chan settleOutcome, 1)}
	s.mu.Lock()
	s.queue = append(s.queue, p)
	if s.inflight < settleInFlight {
		s.inflight++
		s.wg.Add(1)
		go s.send()
	}
	s.mu.Unlock()
	select {
	case out := <-p.done:
		return out
	case <-ctx.Done():
		return settleOutcome{err: ctx.Err()}
	}
}

// send sends batches until the queue is empty.
func (s *settler) send() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		n := min(len(s.queue), settleBatch)
		if n == 0 {
			s.inflight--
			s.mu.Unlock()
			return
		}
		batch := s.queue[:n:n]
		s.queue = s.queue[n:]
		legacy := s.legacy
		s.mu.Unlock()
		if legacy {
			s.sendStatements(batch)
			continue
		}
		s.sendBatch(batch)
	}
}

func (s *settler) sendBatch(batch []*pendingSettle) {
	req := settleRequest{Settlements: make([]settleItem, len(batch))}
	for i, p := range batch {
		req.Settlements[i] = p.item
	}
	ctx, cancel := s.c.bound(context.Background())
	defer cancel()
	var ans settleAnswer
	err := s.c.tr.settle(ctx, req, &ans)
	if errors.Is(err, errNoSettle) {
		// A server from before POST /v1/settle: settle one statement at a time.
		s.mu.Lock()
		s.legacy = true
		s.mu.Unlock()
		s.sendStatements(batch)
		return
	}
	if err == nil && len(ans.Results) != len(batch) {
		err = herald.Errorf(herald.CodeInternal, "the server answered %d settlements for %d", len(ans.Results), len(batch))
	}
	for i, p := range batch {
		if err != nil {
			p.done <- settleOutcome{err: err}
			continue
		}
		r := ans.Results[i]
		var out settleOutcome
		switch {
		case r.Error != nil:
			out.err = &herald.Error{Code: r.Error.Code, Message: r.Error.Message}
		case !r.OK:
			out.err = herald.Errorf(herald.CodeInternal, "the server did not settle delivery %q", p.item.DeliveryID)
		}
		if r.Deadline != "" {
			out.deadline, _ = time.Parse(time.RFC3339Nano, r.Deadline)
		}
		p.done <- out
	}
}

func (s *settler) sendStatements(batch []*pendingSettle) {
	for _, p := range batch {
		ctx, cancel := s.c.bound(context.Background())
		_, err := s.c.tr.query(ctx, queryRequest{Query: p.stmt})
		cancel()
		p.done <- settleOutcome{err: err}
	}
}

// wait waits for the sender goroutines (Client.Close).
func (s *settler) wait() { s.wg.Wait() }

// settleText writes a settlement as a query statement.
func settleText(item settleItem, d time.Duration) string {
	id := quoteID(item.DeliveryID)
	switch item.Action {
	case "ack":
		return "ACK " + id
	case "reject":
		return "NACK " + id + " [no_retry]"
	case "extend":
		if d > 0 {
			return "EXTEND " + id + " [by: " + durationLit(d) + "]"
		}
		return "EXTEND " + id
	}
	if d > 0 {
		return fmt.Sprintf("NACK %s [delay: %s]", id, durationLit(d))
	}
	return "NACK " + id
}
