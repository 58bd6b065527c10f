package delivery

import (
	"cmp"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/graph"
	"github.com/herald-mq/herald/standing"
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

// tally is one group's totals, under the service's lock.
type tally struct {
	delivered, acked, nacked, deadLettered uint64
}

func (t *tally) add(u tally) {
	t.delivered += u.delivered
	t.acked += u.acked
	t.nacked += u.nacked
	t.deadLettered += u.deadLettered
}

// DefaultMaxGroupSeries is how many consume groups get series of their own on /metrics
// when Config.MaxGroupSeries is 0.
const DefaultMaxGroupSeries = 1000

// The group labels of the series that sum groups: the groups past Config.MaxGroupSeries
// (and any group whose own name is one of these), and the groups without a name (a
// consumer's own group, a pull statement's), of which there may be one per stream.
const (
	SeriesOther   = "_other"
	SeriesUnnamed = "_unnamed"
)

// seriesLocked gives a new group the group label of its series. A named group has
// series of its own while fewer than MaxGroupSeries groups have them; it keeps the label
// it got for as long as it lives, so that a group's series never move.
func (s *Service) seriesLocked(g *group) string {
	name := g.q.Opts.Group
	switch {
	case name == "":
		return SeriesUnnamed
	case name == SeriesOther || name == SeriesUnnamed || s.labelled >= s.cfg.MaxGroupSeries:
		return SeriesOther
	}
	s.labelled++
	return name
}

// endSeriesLocked is a group's end for its series: its own series go, and a shared
// series keeps its totals, so that a sum never falls.
func (s *Service) endSeriesLocked(g *group) {
	switch g.series {
	case SeriesOther, SeriesUnnamed:
		t := s.endedTally[g.series]
		t.add(g.tally)
		s.endedTally[g.series] = t
	case "":
	default:
		s.labelled--
	}
}

// groupOfLocked returns the group a lease belongs to: its own, or for a lease recovered
// after a restart the group of its _Watch node, if that group exists now.
func (s *Service) groupOfLocked(l *lease) *group {
	if l.grp != nil || l.watch == "" {
		return l.grp
	}
	for _, g := range s.groups {
		if g.watch == l.watch {
			return g
		}
	}
	return nil
}

// tallyLeasesLocked counts leases handed out in their groups' totals.
func (s *Service) tallyLeasesLocked(ls []*lease) {
	for _, l := range ls {
		if g := s.groupOfLocked(l); g != nil {
			g.tally.delivered++
		}
	}
}

// letterLogRate is how many dead letters a second get a log record each; the rest are
// counted in the next record's "unlogged".
const letterLogRate = 10

// letteredLocked counts a dead letter in its group's totals and logs it.
func (s *Service) letteredLocked(g *group, id herald.NodeID, reason string) {
	group, typ := "", ""
	if g != nil {
		g.tally.deadLettered++
		group, typ = g.q.Opts.Group, g.typ
	}
	now := s.clock.Now()
	ll := &s.letterLog
	if now.Sub(ll.window) >= time.Second {
		ll.window, ll.logged = now, 0
	}
	if ll.logged >= letterLogRate {
		ll.unlogged++
		return
	}
	ll.logged++
	attrs := []any{"group", group, "type", typ, "message", id, "reason", reason}
	if ll.unlogged > 0 {
		attrs = append(attrs, "unlogged", ll.unlogged)
		ll.unlogged = 0
	}
	s.log.Info("consume: message dead-lettered", attrs...)
}

// letterLog bounds the dead-letter records (letteredLocked).
type letterLog struct {
	window   time.Time
	logged   int
	unlogged int
}

// arrivals remembers when commits happened, so that the age of a message can be told
// from the seq that created it: at most one sample a second, and when arrivalSamples
// are held every other one goes, so that they span the service's life, coarser as it
// runs on. The first is the service's start: older messages count from it.
type arrivals struct {
	seqs  []uint64
	times []time.Time
}

const arrivalSamples = 4096

func (a *arrivals) note(seq uint64, t time.Time) {
	if seq == 0 || t.IsZero() {
		return
	}
	if n := len(a.seqs); n > 0 && (seq <= a.seqs[n-1] || t.Sub(a.times[n-1]) < time.Second) {
		return
	}
	if len(a.seqs) == arrivalSamples {
		// Keep the first (the start) and every other one after it.
		k := 1
		for i := 2; i < len(a.seqs); i += 2 {
			a.seqs[k], a.times[k] = a.seqs[i], a.times[i]
			k++
		}
		a.seqs, a.times = a.seqs[:k], a.times[:k]
	}
	a.seqs = append(a.seqs, seq)
	a.times = append(a.times, t)
}

// at returns when the commit seq happened: the time of the last sample at or before it
// (the oldest sample's for an older one); false when there is no sample.
func (a *arrivals) at(seq uint64) (time.Time, bool) {
	if len(a.seqs) == 0 {
		return time.Time{}, false
	}
	i := sort.Search(len(a.seqs), func(i int) bool { return a.seqs[i] > seq })
	if i == 0 {
		return a.times[0], true
	}
	return a.times[i-1], true
}

// groupFigures is one series' levels and totals as of a reading.
type groupFigures struct {
	group, typ, queue      string
	ready, leased, delayed int
	letters                int    // _DeadLetter nodes its groups hold
	oldest                 uint64 // the seq that created its oldest ready message (0: none)
	tally                  tally
}

// graphRead is what a reading takes from the graph for one group, outside the
// service's lock: a lazy group's backlog ahead of its cursor, and its dead letters.
type graphRead struct {
	f      *groupFigures
	lazy   bool
	typ    string
	cursor graph.Pos
	watch  herald.NodeID
}

// Metrics reports the consume engine's levels and totals (herald.MetricSource), and each
// group's series (see groupMetrics).
func (s *Service) Metrics() []herald.Metric {
	s.mu.Lock()
	consumers, groups, leases := len(s.consumers), len(s.groups), len(s.leases)
	figs, reads := s.groupFiguresLocked()
	arr := arrivals{seqs: slices.Clone(s.arrivals.seqs), times: slices.Clone(s.arrivals.times)}
	now := s.clock.Now()
	s.mu.Unlock()
	s.readGraph(reads)
	ready, delayed := 0, 0
	for _, f := range figs {
		ready += f.ready
		delayed += f.delayed
	}
	c := &s.count
	gauge := func(name, help string, v int) herald.Metric {
		return herald.Metric{Name: name, Help: help, Value: float64(v)}
	}
	total := func(name, help string, v *atomic.Uint64) herald.Metric {
		return herald.Metric{Name: name, Help: help, Counter: true, Value: float64(v.Load())}
	}
	out := []herald.Metric{
		gauge("herald_consume_consumers", "Open consume-mode streams.", consumers),
		gauge("herald_consume_groups", "Consume groups kept: those with members, and named and pull groups without any for their idle period.", groups),
		gauge("herald_consume_leases", "Deliveries leased and not settled yet.", leases),
		gauge("herald_consume_ready", "Messages ready for delivery, summed over the groups that match them (a lazy group's backlog ahead of its cursor included).", ready),
		gauge("herald_consume_delayed", "Messages waiting for a NACK delay, backoff or available_at, summed over groups.", delayed),
		total("herald_consume_delivered_total", "Deliveries leased to consumers.", &c.delivered),
		total("herald_consume_acked_total", "Deliveries settled with ACK.", &c.acked),
		total("herald_consume_nacked_total", "Deliveries settled with NACK.", &c.nacked),
		total("herald_consume_expired_total", "Leases that reached their ack timeout unsettled (implicit NACKs).", &c.expired),
		total("herald_consume_released_total", "Leases given back at once because their consumer disconnected.", &c.released),
		total("herald_consume_dead_lettered_total", "Messages moved to a _DeadLetter.", &c.deadLettered),
		total("herald_consume_extended_total", "Lease extensions (EXTEND).", &c.extended),
	}
	return append(out, groupMetrics(figs, &arr, now)...)
}

// groupFiguresLocked reads every group's levels and totals, one entry per series (a
// group with series of its own, or the sum of the groups that share one), sorted by
// group label; and what is left to read from the graph.
func (s *Service) groupFiguresLocked() ([]*groupFigures, []graphRead) {
	leased := map[*group]int{}
	held := map[string][]graph.Pos{} // leased subjects by type, for lazy groups' backlogs
	byWatch := map[herald.NodeID]*group{}
	for _, g := range s.groups {
		byWatch[g.watch] = g
	}
	for _, l := range s.leases {
		g := l.grp
		if g == nil {
			g = byWatch[l.watch] // recovered after a restart
		}
		if g != nil {
			leased[g]++
		}
		held[l.subj.typ] = append(held[l.subj.typ], l.subj.pos())
	}
	for _, ps := range held {
		slices.SortFunc(ps, func(a, b graph.Pos) int {
			if a.Less(b) {
				return -1
			}
			if b.Less(a) {
				return 1
			}
			return 0
		})
	}
	var out []*groupFigures
	var reads []graphRead
	shared := map[string]*groupFigures{}
	for name, t := range s.endedTally {
		shared[name] = &groupFigures{group: name, tally: t}
	}
	for _, g := range s.groups {
		var f *groupFigures
		switch g.series {
		case SeriesOther, SeriesUnnamed:
			f = shared[g.series]
			if f == nil {
				f = &groupFigures{group: g.series}
				shared[g.series] = f
			}
		default:
			f = &groupFigures{group: g.series, typ: g.typ}
			if s.cfg.QueueOf != nil {
				f.queue = s.cfg.QueueOf(g.series)
			}
			out = append(out, f)
		}
		f.ready += g.ready.len()
		f.delayed += g.delayed.len()
		f.leased += leased[g]
		f.tally.add(g.tally)
		g.ready.each(func(e *entry) {
			if f.oldest == 0 || e.subj.created < f.oldest {
				f.oldest = e.subj.created
			}
		})
		if g.lazy {
			// Messages ahead of the cursor that other groups hold leased are not ready
			// for this one: the graph read counts them, and they are taken off here.
			ps := held[g.typ]
			f.ready -= len(ps) - sort.Search(len(ps), func(i int) bool { return g.cursor.Less(ps[i]) })
		}
		reads = append(reads, graphRead{f: f, lazy: g.lazy, typ: g.typ, cursor: g.cursor, watch: g.watch})
	}
	for _, f := range shared {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *groupFigures) int { return cmp.Compare(a.group, b.group) })
	return out, reads
}

// backlogReadLimit bounds the nodes one reading walks to count lazy groups' backlogs:
// past it a lazy group's backlog counts as its type's size.
const backlogReadLimit = 4 << 20

// readGraph adds to the figures what the graph holds: a lazy group keeps its backlog
// in the type's arrival index rather than in memory, so every node of its type ahead of
// its cursor is ready (its WHERE, if it has one, is decided only when the cursor reaches
// the node); and each group's _DeadLetter nodes. It reads a snapshot, without holding
// up the service or commits.
func (s *Service) readGraph(reads []graphRead) {
	if len(reads) == 0 {
		return
	}
	_ = s.eng.ViewSnapshot(func(tx *graph.Tx, _, _ uint64) error {
		budget := backlogReadLimit
		for _, r := range reads {
			if r.lazy {
				g := tx.Graph()
				// Past the reading's budget a backlog counts as the type's size, which
				// bounds it from above, in constant time; a walk once begun goes on.
				whole := budget <= 0
				if whole {
					r.f.ready += g.TypeCount(r.typ)
				}
				first := true
				g.AscendType(r.typ, r.cursor, func(n *herald.Node) bool {
					if first && (r.f.oldest == 0 || n.Created < r.f.oldest) {
						r.f.oldest = n.Created
					}
					first = false
					if whole {
						return false
					}
					r.f.ready++
					budget--
					return true
				})
			}
			for _, k := range tx.Incident(r.watch) {
				if e := tx.Edge(k); e != nil && e.Type == standing.EdgeDeadLetter && len(e.Endpoints) > 0 && e.Endpoints[0] == r.watch {
					r.f.letters++
				}
			}
		}
		return nil
	})
}

// groupMetrics turns the figures into labelled series: group (its name, or _other or
// _unnamed for the series that sum groups), type (the subject's type; "" on a sum) and
// queue (the queue a queue API's group serves, else "").
func groupMetrics(figs []*groupFigures, arr *arrivals, now time.Time) []herald.Metric {
	type family struct {
		name, help string
		counter    bool
		value      func(f *groupFigures) float64
	}
	families := []family{
		{"herald_consume_group_ready", "Messages ready for delivery in the group (a lazy group's backlog ahead of its cursor included).", false, func(f *groupFigures) float64 { return float64(f.ready) }},
		{"herald_consume_group_leased", "The group's deliveries leased and not settled yet (in flight).", false, func(f *groupFigures) float64 { return float64(f.leased) }},
		{"herald_consume_group_delayed", "The group's messages waiting for a NACK delay, backoff or available_at.", false, func(f *groupFigures) float64 { return float64(f.delayed) }},
		{"herald_consume_group_dead_letters", "_DeadLetter nodes the group's watch holds.", false, func(f *groupFigures) float64 { return float64(f.letters) }},
		{"herald_consume_group_oldest_ready_seconds", "Age of the group's oldest ready message, from the commit that created it (0 when none is ready).", false, func(f *groupFigures) float64 {
			if f.oldest == 0 {
				return 0
			}
			t, ok := arr.at(f.oldest)
			if !ok || !now.After(t) {
				return 0
			}
			return now.Sub(t).Seconds()
		}},
		{"herald_consume_group_delivered_total", "Deliveries the group leased to consumers.", true, func(f *groupFigures) float64 { return float64(f.tally.delivered) }},
		{"herald_consume_group_acked_total", "The group's deliveries settled with ACK.", true, func(f *groupFigures) float64 { return float64(f.tally.acked) }},
		{"herald_consume_group_nacked_total", "The group's deliveries settled with NACK.", true, func(f *groupFigures) float64 { return float64(f.tally.nacked) }},
		{"herald_consume_group_dead_lettered_total", "The group's messages moved to a _DeadLetter.", true, func(f *groupFigures) float64 { return float64(f.tally.deadLettered) }},
	}
	out := make([]herald.Metric, 0, len(families)*len(figs))
	for _, fam := range families {
		for _, f := range figs {
			out = append(out, herald.Metric{Name: fam.name, Help: fam.help, Counter: fam.counter, Value: fam.value(f),
				Labels: []herald.Label{{Name: "group", Value: f.group}, {Name: "type", Value: f.typ}, {Name: "queue", Value: f.queue}}})
		}
	}
	return out
}
