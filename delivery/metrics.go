package delivery

import (
	"sync/atomic"

	"github.com/herald-mq/herald"
)

// counters are the consume engine's running totals since start.
type counters struct {
	delivered    atomic.Uint64 // leases handed to consumers
	acked        atomic.Uint64
	nacked       atomic.Uint64 // explicit NACKs, dead-lettering ones included
	expired      atomic.Uint64 // leases that reached their deadline unsettled
	released     atomic.Uint64 // leases given back because their consumer left
	deadLettered atomic.Uint64
	extended     atomic.Uint64
}

// Metrics reports the consume engine's levels and totals (herald.MetricSource).
func (s *Service) Metrics() []herald.Metric {
	s.mu.Lock()
	consumers, groups, leases := len(s.consumers), len(s.groups), len(s.leases)
	ready, delayed := 0, 0
	for _, g := range s.groups {
		ready += g.ready.len()
		delayed += g.delayed.len()
	}
	s.mu.Unlock()
	c := &s.count
	gauge := func(name, help string, v int) herald.Metric {
		return herald.Metric{Name: name, Help: help, Value: float64(v)}
	}
	total := func(name, help string, v *atomic.Uint64) herald.Metric {
		return herald.Metric{Name: name, Help: help, Counter: true, Value: float64(v.Load())}
	}
	return []herald.Metric{
		gauge("herald_consume_consumers", "Open consume-mode streams.", consumers),
		gauge("herald_consume_groups", "Consume groups with at least one member.", groups),
		gauge("herald_consume_leases", "Deliveries leased and not settled yet.", leases),
		gauge("herald_consume_ready", "Messages ready for delivery, summed over the groups that match them.", ready),
		gauge("herald_consume_delayed", "Messages waiting for a NACK delay, backoff or available_at, summed over groups.", delayed),
		total("herald_consume_delivered_total", "Deliveries leased to consumers.", &c.delivered),
		total("herald_consume_acked_total", "Deliveries settled with ACK.", &c.acked),
		total("herald_consume_nacked_total", "Deliveries settled with NACK.", &c.nacked),
		total("herald_consume_expired_total", "Leases that reached their ack timeout unsettled (implicit NACKs).", &c.expired),
		total("herald_consume_released_total", "Leases given back at once because their consumer disconnected.", &c.released),
		total("herald_consume_dead_lettered_total", "Messages moved to a _DeadLetter.", &c.deadLettered),
		total("herald_consume_extended_total", "Lease extensions (EXTEND).", &c.extended),
	}
}
