package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	hid "github.com/herald-mq/herald/internal/id"
	"github.com/herald-mq/herald/internal/indexheap"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/standing"
)

// Config configures a Service.
type Config struct {
	Engine *engine.Engine // required
	Logger *slog.Logger
	// MaxConsumers caps consumers server-wide (0: 10,000); beyond it Consume answers E8006.
	MaxConsumers int
	// Policy refuses patterns with E8001 (consume mode never takes a system type).
	Policy herald.WatchPolicy
	// GroupIdle is how long a named group (and a pull statement's group) is kept without
	// members, so that its queue need not be built again (0: 10 minutes).
	GroupIdle time.Duration
	// MaxGroupSeries is how many consume groups get series of their own on /metrics
	// (0: 1,000; negative: none). Groups beyond it are summed under group="_other".
	MaxGroupSeries int
	// QueueOf names the queue a group serves ("" for none): the queue REST API's and the
	// queue RPC's groups carry it as their metrics' queue label.
	QueueOf func(group string) string
}

// subject is a message with delivery state: leased, delivered before, held back, or
// queued by a group that keeps every match (see group).
type subject struct {
	id        herald.NodeID
	typ       string
	created   uint64
	attempts  int // failed deliveries so far (NACK, timeout), durable in its record
	releases  int // deliveries given back because their consumer left; not failures
	lease     *lease
	notBefore time.Time
	entries   map[*group]*entry
	stored    bool   // its delivery record exists
	writes    int    // writes of its record since it last did not exist; -1 unknown
	gone      bool   // deleted while a settlement of its lease was committing
	key       []byte // its delivery record's key, once made (stateKey)
}

func (sub *subject) pos() graph.Pos { return graph.Pos{Created: sub.created, ID: sub.id} }

// lease is one delivery attempt in flight.
type lease struct {
	key      Handle // the hash of the delivery id
	id       string // the delivery id; "" for a lease recovered after a restart
	subj     *subject
	cons     *consumer // nil for a pull lease, or one recovered after a restart
	watch    herald.NodeID
	grp      *group          // nil for a recovered lease, or when its group is gone
	q        *standing.Query // the options it was leased under (recovered from its _Watch; nil: the defaults)
	deadline time.Time
	attempt  int
	releases int  // the subject's releases when it was leased (shown on the delivery)
	settling bool // an ACK, NACK or EXTEND is committing it
	ending   bool // an ACK is committing it: it no longer counts against its consumer's credit
	// sent: its consumed event has gone to the consumer (or it was recovered after a
	// restart, when it had been). Until then its delivery id is known to nobody: it
	// cannot be settled, and if it ends unsent its attempt does not count.
	sent  bool
	index int // in the deadline heap
	match herald.Value
	stats *standing.Stats // its group's counters, while the lease is out
	// holder is the principal the lease was made for ("" without one): surfaces that
	// settle by message id rather than by delivery id settle only their own leases.
	holder string
}

// spent is the number of deliveries of the subject that count once l ends: l's attempt,
// or the one before it when l never reached its consumer.
func (l *lease) spent() int {
	if l.sent {
		return l.attempt
	}
	return l.attempt - 1
}

// consumer is one stream.
type consumer struct {
	id      string
	svc     *Service
	grp     *group
	session string
	events  chan Event
	gone    <-chan struct{} // the stream's context is done: nobody reads events any more
	// The overflow (outbox.go), under Service.mu: events waiting for room in events, the
	// mover handing them on, and the event that ends the stream once they are out.
	over      []Event
	moving    bool
	endEv     *Event
	leases    map[Handle]*lease
	capacity  int
	reserved  int // picked for a lease in the round under way
	ending    int // leases whose ACK is committing (see setEndingLocked)
	maxCredit int
	closed    bool
	done      chan struct{}
	unctx     func() bool       // stops closing the consumer when its context ends
	slot      *engine.WatchSlot // its place in its session's watches
	handle    string            // `h = WATCH …`, bound to its group ("" when unbound)
	principal string            // who opened it ("" without authentication)
}

// Service is the consume-mode engine. Surfaces (HTTP, RPC, the query language) call
// Consume, Ack, Nack, Extend and Redrive; none keeps queue state of its own.
type Service struct {
	cfg   Config
	eng   *engine.Engine
	clock herald.Clock
	log   *slog.Logger

	mu        sync.Mutex
	core      *standing.Core // the engine's standing queries (attached while started)
	unext     func()         // removes the service's statement extension
	subjects  map[herald.NodeID]*subject
	leases    map[Handle]*lease
	deadlines indexheap.Heap[lease]
	groups    map[string]*group
	consumers map[string]*consumer
	index     *standing.Index[*group] // groups by the types their patterns mention
	cleanup   map[herald.NodeID]recordDrop
	recovered map[herald.NodeID]*standing.Query // recovered watches' options, by _Watch id
	released  []*lease                          // leases whose consumer left: requeued, not yet persisted
	retired   []herald.NodeID                   // _Watch nodes of ended groups of one
	// lettering holds the subjects a round dead-lettered (their lease ran out for the
	// last time) until the commit that deletes them applies: untracked but still in the
	// graph meanwhile, they must not be leased again. redecide holds those whose letter
	// did not commit: the next round decides them again.
	lettering map[herald.NodeID]bool
	redecide  []herald.NodeID
	// picks is dispatchLocked's scratch, kept between rounds; picking holds the
	// messages picked by a round or a pull that is reading their bodies (pick.go).
	picks   []pick
	picking map[herald.NodeID]bool

	pendMu  sync.Mutex
	pending []*herald.ChangeSet

	// The settler's queue (settler.go).
	setMu      sync.Mutex
	setQueue   []*settlement
	setStopped bool
	setWake    chan struct{}
	setDone    chan struct{}

	jobs     chan job   // to the completer (completer.go)
	commitMu sync.Mutex // commit and queue its job together (commitAsync)
	compDone chan struct{}

	count counters
	// The groups' metrics (metrics.go), under mu: how many groups have series of their
	// own, the totals of ended groups that were summed into a shared series, and when
	// recent commits happened (for the age of the oldest ready message).
	labelled   int
	endedTally map[string]tally
	arrivals   arrivals
	letterLog  letterLog

	wake     chan struct{}
	flush    chan chan struct{}
	movers   sync.WaitGroup // consumers' overflow movers (outbox.go)
	stop     chan struct{}
	done     chan struct{}
	unlisten func()
	started  bool
	stopped  bool
}

// New returns a service; Start begins its work.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxConsumers <= 0 {
		cfg.MaxConsumers = 10000
	}
	if cfg.GroupIdle <= 0 {
		cfg.GroupIdle = 10 * time.Minute
	}
	if cfg.MaxGroupSeries == 0 {
		cfg.MaxGroupSeries = DefaultMaxGroupSeries
	}
	return &Service{
		cfg:        cfg,
		eng:        cfg.Engine,
		clock:      cfg.Engine.Clock(),
		log:        cfg.Logger,
		subjects:   map[herald.NodeID]*subject{},
		leases:     map[Handle]*lease{},
		deadlines:  indexheap.New(byDeadline, func(l *lease) *int { return &l.index }),
		groups:     map[string]*group{},
		consumers:  map[string]*consumer{},
		index:      standing.NewIndex[*group](),
		cleanup:    map[herald.NodeID]recordDrop{},
		recovered:  map[herald.NodeID]*standing.Query{},
		lettering:  map[herald.NodeID]bool{},
		endedTally: map[string]tally{},
		picking:    map[herald.NodeID]bool{},
		wake:       make(chan struct{}, 1),
		setWake:    make(chan struct{}, 1),
		setDone:    make(chan struct{}),
		jobs:       make(chan job, 1024),
		compDone:   make(chan struct{}),
		flush:      make(chan chan struct{}),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
}

// Start recovers durable delivery state (leases keep their deadlines; those that expired
// while the server was down are redelivered), installs the service as the engine's
// statement extension, and starts the dispatcher. It reads the delivery records only,
// never the backlog: groups read their backlog when they start.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil
	}
	if err := s.recoverAll(ctx); err != nil {
		return err
	}
	s.core = standing.Attach(s.eng)
	seq, _ := s.eng.Position()
	s.arrivals.note(seq, s.clock.Now()) // messages from before the start count from it
	s.unlisten = s.eng.ListenApplied(s.onCommit)
	s.unext = s.eng.AddExtension(s)
	s.started = true
	go s.loop()
	go s.settler()
	go s.completer()
	s.log.Info("delivery started", "leases", len(s.leases), "subjects", len(s.subjects))
	return nil
}

// Stop ends every consumer and the dispatcher. Leases stay durable and keep their
// deadlines. It is idempotent and safe before Start.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.started || s.stopped {
		s.stopped = true
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	for _, c := range s.consumers {
		s.endConsumerLocked(c, nil, false)
	}
	for _, g := range s.groups {
		s.core.Unregister(g) // the core no longer reaches the groups of a stopped service
	}
	s.mu.Unlock()
	s.unext()
	s.unlisten()
	close(s.stop)
	defer s.core.Detach()
	s.movers.Wait() // each gives up on its transport at the stop, and closes its channel
	for _, done := range []chan struct{}{s.done, s.setDone} {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// Nothing queues jobs any more: let the completer finish what is queued.
	close(s.jobs)
	select {
	case <-s.compDone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Service) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// onCommit queues change sets for the dispatcher as the engine applies them, before
// they are durable (engine.ListenApplied): a new message can then be leased in the very
// next group commit, often sharing its creator's sync. Nothing reaches a consumer before
// it is durable: consumed events wait for the lease's commit, which the pipeline makes
// durable only after the commit that created the message.
func (s *Service) onCommit(sets []*herald.ChangeSet) {
	s.pendMu.Lock()
	s.pending = append(s.pending, sets...)
	s.pendMu.Unlock()
	s.kick()
}

// Consume registers a consumer for one `WATCH … [mode: consume]` statement, with the
// statement's buffer as its credit. With a session id, `#self` and `current_actor()` in
// the statement are the session's actor (`BEGIN SESSION AS #actor`).
func (s *Service) Consume(ctx context.Context, sessionID, query string, params map[string]herald.Value) (Stream, error) {
	return s.Subscribe(ctx, sessionID, query, params, 0, 0)
}

// Subscribe is Consume with credit-based flow control: at most credit unsettled
// deliveries are out to the consumer at once (0: the statement's buffer), and
// SetCredit may later change that up to maxCredit (0: the initial credit).
func (s *Service) Subscribe(ctx context.Context, sessionID, query string, params map[string]herald.Value, credit, maxCredit int) (Consumer, error) {
	op, err := s.open(ctx, sessionID, query, params)
	if err != nil {
		return nil, err
	}
	q := op.Query
	if credit < 0 || maxCredit < 0 {
		op.Release()
		return nil, herald.Errorf(herald.CodeMalformedRequest, "credit must not be negative")
	}
	if credit == 0 {
		credit = q.Opts.Buffer
	}
	maxCredit = max(maxCredit, credit)
	if maxCredit > MaxCredit {
		op.Release()
		return nil, herald.Errorf(herald.CodeMalformedRequest, "credit %d is larger than the most a stream may have, %d", maxCredit, MaxCredit)
	}
	cid := hid.Token(12)
	key := "c:" + cid
	if q.Opts.Group != "" {
		key = "g:" + q.Opts.Group
	}
	// The session's limit counts watches of both modes (E8006).
	slot, err := s.eng.AttachWatch(ctx, sessionID)
	if err != nil {
		op.Release()
		return nil, err
	}
	warning, handle := op.Warning, op.Handle
	g, err := s.group(ctx, key, op, slot)
	if err != nil {
		slot.Release()
		return nil, err
	}
	c := &consumer{
		id: cid, svc: s, grp: g, session: sessionID, slot: slot, principal: principalName(ctx),
		events:    make(chan Event, chanCapFor(credit, maxCredit)),
		gone:      ctx.Done(),
		leases:    map[Handle]*lease{},
		capacity:  credit,
		maxCredit: maxCredit,
		done:      make(chan struct{}),
	}
	s.mu.Lock()
	switch {
	case s.stopped:
		err = herald.Errorf(herald.CodeShuttingDown, "the delivery service is not running")
	case len(s.consumers) >= s.cfg.MaxConsumers:
		err = herald.Errorf(herald.CodeWatchLimitExceeded, "the server already has %d consumers", len(s.consumers))
	case s.groups[key] != g:
		// The group was dropped while this consumer was being set up.
		s.mu.Unlock()
		slot.Release()
		return s.Subscribe(ctx, sessionID, query, params, credit, maxCredit)
	case handle != "":
		if err = s.core.Bind(sessionID, handle, g); err == nil {
			c.handle = handle
		}
	}
	if err != nil {
		s.mu.Unlock()
		slot.Release()
		return nil, err
	}
	g.members = append(g.members, c)
	g.idleSince = time.Time{}
	if warning != nil {
		// Before anything the dispatcher may lease to it: it runs under s.mu too.
		c.send(Event{Type: EventWarning, Code: warning.Code, Message: warning.Message})
	}
	s.consumers[c.id] = c
	s.mu.Unlock()
	s.kick()
	// The consumer ends with ctx; the registration is released when it ends first.
	stop := context.AfterFunc(ctx, c.Close)
	s.mu.Lock()
	if c.closed {
		stop()
	} else {
		c.unctx = stop
	}
	s.mu.Unlock()
	return c, nil
}

// principalName is the name of the principal ctx carries ("" when none).
func principalName(ctx context.Context) string {
	if p := herald.PrincipalFrom(ctx); p != nil {
		return p.Name
	}
	return ""
}

// MaxCredit is the largest credit a consume stream may have.
const MaxCredit = 100000

// open runs the open-time checks of a consume statement for a session and the
// principal ctx carries (standing.Core.Open).
func (s *Service) open(ctx context.Context, sessionID, query string, params map[string]herald.Value) (*standing.Opened, error) {
	s.mu.Lock()
	core := s.core
	s.mu.Unlock()
	if core == nil {
		return nil, herald.Errorf(herald.CodeShuttingDown, "the delivery service is not running")
	}
	return core.Open(ctx, standing.OpenRequest{Session: sessionID, Query: query, Params: params, Mode: option.Consume, Policy: s.cfg.Policy})
}

// group returns the group key, creating it (with its _Watch node) when it does not
// exist; it takes op over, and gives it back when it joins a group that has its own.
// Members of a named group must all use the same statement with the same $params
// (E1004 otherwise) while any is connected; a statement that differs, once none is,
// takes the group over (see takeOver). The stream's session (slot) is linked to the
// group's _Watch node.
func (s *Service) group(ctx context.Context, key string, op *standing.Opened, slot *engine.WatchSlot) (*group, error) {
	s.mu.Lock()
	if !s.started || s.stopped {
		s.mu.Unlock()
		op.Release()
		return nil, herald.Errorf(herald.CodeShuttingDown, "the delivery service is not running")
	}
	g := s.groups[key]
	s.mu.Unlock()
	q, p := op.Query, herald.PrincipalFrom(ctx)
	if g != nil {
		if err := g.joinable(p); err != nil {
			op.Release()
			return nil, err
		}
		if g.ident == q.Ident {
			op.Release()
			slot.Link(g.watch)
			return g, nil
		}
		if err := s.takeOver(g, q); err != nil {
			op.Release()
			return nil, err
		}
	}
	watchID := herald.NewID("w")
	if named := key[:2] != "c:"; named {
		sum := sha256.Sum256([]byte(key[2:]))
		watchID = herald.NodeID("w" + key[:1] + hex.EncodeToString(sum[:10]))
	}
	rec := standing.Record{ID: watchID, Query: q, Status: "active"}
	if slot != nil {
		rec.Link = func(tx *engine.SysTx) { slot.LinkIn(tx, watchID) }
	}
	if err := s.core.Save(ctx, rec); err != nil {
		op.Release()
		return nil, err
	}
	g, err := s.addGroup(key, op, watchID, func() bool { return ctx.Err() != nil })
	if err != nil && key[:2] == "c:" {
		_, _, _ = s.eng.System(ctx, func(tx *engine.SysTx) error { standing.RetireIn(tx.Tx, watchID); return nil })
	}
	return g, err
}

// takeOver lets q take group g over when g has no member connected: g is forgotten,
// and the caller makes the group again under the same name and _Watch node with the new
// statement. Its messages are nodes of the graph, so the new statement finds those it
// selects; leases out (pulls, or recovered after a restart) keep their deadlines and
// settle as before; a message's attempts and delay stay with it. With a member
// connected the group keeps its statement and q is refused with E1004.
func (s *Service) takeOver(g *group, q *standing.Query) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups[g.key] != g {
		return nil // dropped meanwhile: the caller makes it anew
	}
	if len(g.members) > 0 {
		return g.differs(q)
	}
	s.log.Info("consume: a new statement takes an idle group over", "group", q.Opts.Group, "type", g.typ, "watch", g.watch, "was", g.text, "now", q.Describe())
	s.dropGroupLocked(g)
	return nil
}

// differs is the E1004 a statement gets that differs from a group's with members.
func (g *group) differs(q *standing.Query) error {
	return herald.Errorf(herald.CodeInvalidQuery, "group %q is consuming %s; it has %d connected member(s), and its members must all open the same statement with the same $params (once none is connected, a new statement takes the group over)", q.Opts.Group, g.text, len(g.members))
}

// addGroup creates the group of op's statement, owned by op's principal, which holds
// op from now on. A lazy group starts with its cursor before the type's first node and
// reads its backlog as it delivers; any other reads its whole backlog now, within the
// principal's statement limits, and stops when gone reports its client gone.
func (s *Service) addGroup(key string, op *standing.Opened, watchID herald.NodeID, gone func() bool) (*group, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := op.Query
	if g := s.groups[key]; g != nil {
		op.Release()
		if err := g.joinable(op.Principal); err != nil {
			return nil, err
		}
		if g.ident != q.Ident {
			return nil, g.differs(q)
		}
		return g, nil
	}
	g := newGroup(s, key, op, watchID)
	g.stats = s.core.Track(watchID, nil)
	err := s.eng.View(func(tx *graph.Tx, seq, _ uint64) error {
		if g.lazy {
			if q.Opts.Initial == "none" {
				// Skip what exists now: start after the type's newest node.
				if last := lastOfType(tx, g.typ); last != nil {
					g.cursor = graph.PosOf(last)
				}
			}
			return nil
		}
		return s.runLocked(tx, g, gone, func(n *herald.Node, info *standing.Info) {
			e := s.setEntryLocked(g, n, info)
			e.skip = q.Opts.Initial == "none"
			if e.skip {
				s.unqueueLocked(e)
			}
		})
	})
	if err != nil {
		s.core.Untrack(g.stats)
		op.Release()
		return nil, err
	}
	s.groups[key] = g
	g.series = s.seriesLocked(g)
	s.index.Add(q, g)
	s.core.Register(g)
	if q.Opts.Group != "" {
		s.log.Info("consume: group created", "group", q.Opts.Group, "type", g.typ, "watch", watchID, "statement", g.text)
	}
	return g, nil
}

// lastOfType returns the type's newest node, or nil.
func lastOfType(tx *graph.Tx, typ string) *herald.Node {
	ids := tx.NodesOfType(typ)
	if len(ids) == 0 {
		return nil
	}
	return tx.Node(ids[len(ids)-1])
}

// subjectLocked returns (creating) the tracking record of node n.
func (s *Service) subjectLocked(n *herald.Node) *subject {
	sub := s.subjects[n.ID]
	if sub == nil {
		sub = &subject{id: n.ID, typ: n.Type, created: n.Created}
		s.subjects[n.ID] = sub
	}
	if sub.created == 0 {
		sub.created = n.Created
	}
	return sub
}

// forgetLocked drops a subject nobody tracks any more.
func (s *Service) forgetLocked(sub *subject) {
	if len(sub.entries) == 0 && sub.lease == nil && !sub.stored {
		delete(s.subjects, sub.id)
	}
}

// Close ends the consumer and releases its leases at once.
func (c *consumer) Close() {
	c.svc.mu.Lock()
	c.svc.endConsumerLocked(c, nil, true)
	c.svc.mu.Unlock()
	c.svc.kick()
}

// ID returns the consumer's id.
func (c *consumer) ID() string { return c.id }

// Events returns the consumer's event stream; it is closed when the consumer ends.
func (c *consumer) Events() <-chan Event { return c.events }

// Done is closed when the consumer has ended.
func (c *consumer) Done() <-chan struct{} { return c.done }

// SetCredit changes how many unsettled deliveries the consumer may hold.
func (c *consumer) SetCredit(n int) error {
	if n < 1 || n > c.maxCredit {
		return herald.Errorf(herald.CodeMalformedRequest, "credit %d: want 1 to %d, the stream's largest credit", n, c.maxCredit)
	}
	c.svc.mu.Lock()
	c.capacity = n
	c.svc.mu.Unlock()
	c.svc.kick()
	return nil
}

// endConsumerLocked removes c; with release its leases return to the queue at once.
func (s *Service) endConsumerLocked(c *consumer, cause *herald.Error, release bool) {
	if c.closed {
		return
	}
	c.closed = true
	if c.unctx != nil {
		c.unctx()
	}
	var ending *Event
	if cause != nil {
		ending = &Event{Type: EventError, Error: cause, Code: cause.Code, Message: cause.Message}
	}
	c.endEventsLocked(ending)
	close(c.done)
	delete(s.consumers, c.id)
	if c.handle != "" {
		s.core.Unbind(c.session, c.handle, c.grp)
	}
	c.slot.Release()
	g := c.grp
	for i, m := range g.members {
		if m == c {
			g.members = append(g.members[:i], g.members[i+1:]...)
			break
		}
	}
	for _, l := range c.leases {
		l.cons = nil
		if release && !l.settling {
			s.releaseLocked(l)
		}
	}
	c.leases = nil
	if len(g.members) == 0 {
		if g.q.Opts.Group == "" {
			s.dropGroupLocked(g) // a group of one ends with its consumer
		} else {
			g.idleSince = s.clock.Now()
		}
	}
}

// releaseLocked returns a lease whose consumer left: the subject is ready again at once,
// for the group's other members. A release is not a failed attempt (the consumer did not
// NACK it, nor let it time out while connected): the attempt is not counted, the
// subject's releases are, and the dispatcher persists that (see pendingLocked).
func (s *Service) releaseLocked(l *lease) {
	s.count.released.Add(1)
	s.removeLeaseLocked(l)
	l.subj.attempts = l.attempt - 1
	if l.sent {
		l.subj.releases++
	}
	s.released = append(s.released, l)
	s.requeueLocked(l.subj)
}

// dropGroupLocked forgets a group: one of one whose consumer left, or a named one idle
// for too long.
func (s *Service) dropGroupLocked(g *group) {
	delete(s.groups, g.key)
	s.endSeriesLocked(g)
	if g.q.Opts.Group == "" && g.key[:2] == "c:" && !g.cancelled {
		s.retired = append(s.retired, g.watch)
	}
	s.core.Untrack(g.stats)
	s.index.Remove(g.q, g)
	s.core.Unregister(g)
	g.opened.Release()
	for id := range g.matches {
		s.dropEntryLocked(g, id)
	}
	for _, l := range s.leases {
		if l.grp == g {
			l.grp = nil
		}
	}
}

// removeLeaseLocked forgets l everywhere (not its subject's attempt count).
func (s *Service) removeLeaseLocked(l *lease) {
	delete(s.leases, l.key)
	l.stats.AddPending(-1)
	l.stats = nil
	s.deadlines.Remove(l)
	s.setEndingLocked(l, false)
	if l.cons != nil {
		delete(l.cons.leases, l.key)
	}
	if l.subj.lease == l {
		l.subj.lease = nil
	}
}

// requeueLocked makes a subject without a lease deliverable again in every group that
// matches it, at its original position: groups that queue it already put it back; lazy
// groups whose cursor has passed it decide again on their next round.
func (s *Service) requeueLocked(sub *subject) {
	for _, e := range sub.entries {
		s.queueLocked(e)
	}
	s.index.OfType(sub.typ, func(g *group) {
		if g.lazy && sub.entries[g] == nil && !g.cursor.Less(sub.pos()) {
			g.recheck = append(g.recheck, sub.id)
		}
	})
	s.forgetLocked(sub)
	s.kick()
}

// invalidDelivery is the E8004 answer.
func invalidDelivery(id string) error {
	return herald.Errorf(herald.CodeInvalidDeliveryID, "delivery %q is unknown, already settled, or expired", id)
}

var errStopped = errors.New("delivery: stopped")

// byDeadline orders leases by deadline, in the deadline heap.
func byDeadline(a, b *lease) bool { return a.deadline.Before(b.deadline) }

func (s *Service) pushDeadlineLocked(l *lease) { s.deadlines.Push(l) }

func (s *Service) fixDeadlineLocked(l *lease) { s.deadlines.Fix(l) }
