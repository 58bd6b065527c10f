package delivery

// ConsumerLeases counts the leases a consumer holds, sent to it or still committing.
func ConsumerLeases(c Consumer) int {
	cc := c.(*consumer)
	cc.svc.mu.Lock()
	defer cc.svc.mu.Unlock()
	return len(cc.leases)
}

// ConsumerChanCap is the room of a consumer's channel.
func ConsumerChanCap(c Consumer) int { return cap(c.(*consumer).events) }

// ConsumerOverflow counts the events waiting for room in a consumer's channel.
func ConsumerOverflow(c Consumer) int {
	cc := c.(*consumer)
	cc.svc.mu.Lock()
	defer cc.svc.mu.Unlock()
	return len(cc.over)
}
