package delivery

// A consumer's events reach its transport through its channel. The channel holds what
// the consumer's initial credit needs (chanCapFor), not what its largest credit could:
// a Go client asks for a largest credit of 10,000 so that it may raise its prefetch
// later, and a channel of 20,002 events of 232 bytes was 4.6 MB per stream, zeroed and
// so resident. When a send finds the channel full (the credit was raised, or the
// transport is slow), the event waits in the consumer's overflow, and a mover goroutine
// of the service hands the overflow on as the transport makes room. While the mover
// runs it owns the channel: every send queues behind it, and it closes the channel
// when the consumer has ended. Sends keep the channel's last slot for the event that
// ends the stream; a mover may fill it, and then hands the ending on itself.

// chanCapFor is the channel of a consumer that starts with credit: room for a
// delivery and a timeout per unit of credit (at least minChan), within what its largest
// credit allows, plus the slot for the ending event.
func chanCapFor(credit, maxCredit int) int {
	return min(2*maxCredit, max(2*credit, minChan)) + 1
}

// minChan is the smallest channel share of a consumer.
const minChan = 64

// send delivers ev to c, straight into its channel when it has room and nothing waits
// before it, else through the overflow. It reports whether the event went out (false
// once the consumer has ended). Called under Service.mu.
func (c *consumer) send(ev Event) bool {
	if c.closed {
		return false
	}
	if !c.moving && len(c.over) == 0 && len(c.events) < cap(c.events)-1 {
		c.events <- ev // cannot block: only sends under Service.mu fill the channel
		return true
	}
	c.over = append(c.over, ev)
	c.startMoverLocked()
	return true
}

// startMoverLocked starts the mover unless it runs. Called under Service.mu.
func (c *consumer) startMoverLocked() {
	if c.moving {
		return
	}
	c.moving = true
	c.svc.movers.Add(1)
	go c.move()
}

// endEventsLocked ends c's channel: the ending event (ending, when set) goes last, and
// the channel closes. Undelivered overflow is dropped: the consumer has ended, and its
// leases run out or were given back. It never waits for the transport: when a mover
// runs, or filled the slot kept for the ending, the mover sends the ending and closes
// the channel. Called under Service.mu, with c.closed set.
func (c *consumer) endEventsLocked(ending *Event) {
	c.over = nil
	if !c.moving {
		if ending == nil {
			close(c.events)
			return
		}
		select {
		case c.events <- *ending:
			close(c.events)
			return
		default:
			c.startMoverLocked()
		}
	}
	c.endEv = ending
}

// move hands the overflow on in order, waiting for room in the channel without the
// service's lock, until the overflow is empty. If the consumer ended meanwhile, it sends
// the ending event and closes the channel. It gives up waiting for a transport that
// reads no more once the stream's context or the service has stopped.
func (c *consumer) move() {
	s := c.svc
	defer s.movers.Done()
	for {
		s.mu.Lock()
		if len(c.over) == 0 {
			if c.closed {
				ending := c.endEv
				c.endEv = nil
				s.mu.Unlock()
				if ending != nil {
					c.put(*ending)
				}
				s.mu.Lock()
				close(c.events)
			}
			c.moving = false
			s.mu.Unlock()
			return
		}
		ev := c.over[0]
		s.mu.Unlock()
		sent := c.put(ev)
		s.mu.Lock()
		if len(c.over) > 0 && sent {
			c.over[0] = Event{}
			c.over = c.over[1:]
		} else if !sent {
			c.over = nil // nobody reads any more: what is left goes nowhere
		}
		s.mu.Unlock()
	}
}

// put sends ev to c's channel, waiting for room; false when nobody will read it (the
// stream's context ended, or the service stopped).
func (c *consumer) put(ev Event) bool {
	select {
	case c.events <- ev:
		return true
	case <-c.gone:
		return false
	case <-c.svc.stop:
		return false
	}
}
