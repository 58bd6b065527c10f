package delivery

// ConsumerLeases counts the leases a consumer holds, sent to it or still committing.
func ConsumerLeases(c Consumer) int {
	cc := c.(*consumer)
	cc.svc.mu.Lock()
	defer cc.svc.mu.Unlock()
	return len(cc.leases)
}
