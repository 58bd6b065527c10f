// Package watch runs watch-mode WATCH statements: standing queries that stream initial,
// added, removed and changed events with a resumable position (the commit seq).
// Events come from durable commits only; a watch can resume after any retained position.
package watch

import (
	"cmp"
	"context"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/graph"
	hid "github.com/herald-mq/herald/internal/id"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/standing"
)

// DefaultBuffer is the buffer option's default: events a stream holds for its reader.
const DefaultBuffer = option.DefaultBuffer

// queueCap is how many change sets a watcher keeps in memory before it falls back to
// reading the durable change log.
const queueCap = 4096

// Config configures a Service.
type Config struct {
	Engine *engine.Engine // required
	Logger *slog.Logger
	// MaxWatches caps watch-mode streams server-wide (0: 10,000); beyond it Open answers E8006.
	MaxWatches int
	// MaxBufferBytes bounds what a stream holds for a client that does not read, in
	// bytes, beside its buffer option's bound in events: past either, on_full applies
	// (0: DefaultMaxBufferBytes).
	MaxBufferBytes int
	// Policy refuses patterns with E8001.
	Policy herald.WatchPolicy
	// CPUShare bounds the time streams spend turning commits into events to this share
	// of one CPU, over windows of 2 ms; past it they wait, and lag, so that fan-out
	// leaves the CPUs to writers. 0 means DefaultCPUShare(); 1 or more, no bound.
	CPUShare float64
	// Slots are the fan-out slots the streams take to apply commits, shared with the
	// transports that write their events (the send slots of httpapi and rpcapi), so
	// that fan-out as a whole runs on at most that many CPUs at once. nil means slots
	// of the service's own, half the CPUs (FanOutSlots).
	Slots chan struct{}
	// FeedLinger is the least time between two wakes of the streams that share a type's
	// feed: commits that come meanwhile reach them together at the next wake, so a
	// thousand streams on a busy type are woken tens of times a second, each taking many
	// commits at once, not once a commit each. The first commit after a quiet spell wakes
	// them at once. 0: every commit wakes them (see DefaultFeedLinger).
	FeedLinger time.Duration
}

// DefaultCPUShare returns Config.CPUShare's default on this machine: 2.5 % of the CPUs
// the process may use (GOMAXPROCS), so 0.05 of one CPU on two CPUs and 0.8 on
// thirty-two. Fan-out exists only while commits arrive, so the budget binds exactly
// when writers want the CPUs; with a larger share, 1,000 watches at 1,000 commits a
// second doubled the writers' p99 on two CPUs (see docs/benchmarks.md).
func DefaultCPUShare() float64 { return cpuSharePerCPU * float64(runtime.GOMAXPROCS(0)) }

// cpuSharePerCPU is the default fan-out budget for each CPU the process may use.
const cpuSharePerCPU = 0.025

// budgetWindow is the window over which Config.CPUShare is measured. It is short, so
// that fan-out comes in slices of a tenth of a millisecond (at the default share on two
// CPUs) between the writers' work rather than in a millisecond every 20 ms: in the
// fan-out benchmark the publishers' p99 with 1,000 watchers fell from about 5 ms to
// 3–4 ms when the window went from 20 ms to 2 ms. Overspending is carried into the
// windows after it (see budget), so the share holds however short the window.
const budgetWindow = 2 * time.Millisecond

// DefaultFeedLinger is what a server sets Config.FeedLinger to: 10 ms, within the
// transports' own linger for busy streams.
const DefaultFeedLinger = 10 * time.Millisecond

// DefaultMaxBufferBytes is Config.MaxBufferBytes's default: 16 MiB a stream.
const DefaultMaxBufferBytes = 16 << 20

// Service runs watch-mode streams.
type Service struct {
	cfg   Config
	eng   *engine.Engine
	clock herald.Clock
	log   *slog.Logger

	mu         sync.Mutex
	core       *standing.Core // the engine's standing queries (attached while started)
	watchers   map[string]*watcher
	index      *standing.Index[*watcher] // the dispatch index, but for feeds and perTick
	touchFn    func(*watcher)            // touchLocked, made once
	perTick    map[*watcher]bool
	feeds      map[string]*feed // by type: streams indexed by that type alone (feed.go)
	dirtyFeeds []*feed          // appended to since their streams were last woken
	cache      evalCache        // results shared by identical watches
	shares     map[string]*shareRef
	nextShare  uint64
	recent     recent            // the latest durable change sets, for streams that fell behind
	ending     map[*watcher]bool // closed, their goroutine still finishing
	ctxMu      sync.Mutex
	byCtx      map[<-chan struct{}]*ctxStreams // streams by their Open context (ctxclose.go)
	unlisten   func()
	started    bool
	stopped    bool
	wg         sync.WaitGroup

	dispatchCommits atomic.Uint64 // commits handed to the dispatch index
	dispatchNanos   atomic.Uint64 // time spent deciding which streams they wake

	// Durable commits wait in incoming for the dispatcher, a goroutine of the service:
	// deciding which streams a commit wakes never runs on the commit path.
	inMu     sync.Mutex
	incoming []*herald.ChangeSet
	inWake   chan struct{}
	quit     chan struct{}
	dispDone chan struct{}
	// dispSeq and dispTick (under mu) are the position of the last commit dispatched:
	// every commit up to it has reached the queues of the streams it touches.
	dispSeq, dispTick uint64
	dispMoved         chan struct{} // closed and replaced when dispSeq moves (under mu)
	// dispMark counts the change sets onCommit has handled, to mark the streams they
	// reached without a set of them (under mu; see watcher.touchMark).
	dispMark uint64
	touched  []*watcher // onCommit's scratch space (under mu)
	// A round is what one pass of the dispatcher hands out. inRound counts the streams
	// it woke that are still working on it; it wakes wakeBatch streams at a time and the
	// next few wait until none is (a stream that waits for its transport, or is paused,
	// leaves the round). So under load the commits waiting meanwhile go out together,
	// each stream wakes, frames and writes once per round instead of once per commit, and
	// the run queue holds a few streams, not thousands, ahead of the writers.
	inRound   atomic.Int64
	roundDone chan struct{}
	wakeBatch int // streams woken at once in a round
	// applySlots bounds how many streams turn change sets into events at once. A stream
	// that waits for a slot is parked, not runnable: however many streams have work,
	// the CPUs' run queues hold a few of them ahead of the writers, not thousands.
	applySlots chan struct{}
	budget     *budget       // nil: no bound on the slots' time
	budgetGate chan struct{} // one stream at a time waits for the budget (takeSlot)
	gosched    func()        // runtime.Gosched; tests make a yield take time

	parkedStreams atomic.Int64 // streams without a goroutine (park.go)
	open          atomic.Int64 // len(watchers), read on the commit path without mu
}

// Stats are a Service's counters.
type Stats struct {
	Streams         int           // open watch-mode streams
	Parked          int           // of them, idle without a goroutine (park.go)
	Commits         uint64        // commits dispatched since start
	DispatchTime    time.Duration // total time spent dispatching them
	DispatchPerCall time.Duration // DispatchTime / Commits
	FanoutTime      time.Duration // counted against the fan-out budget (0 without one)
}

// Metrics reports the watch service's streams and dispatch cost (herald.MetricSource).
func (s *Service) Metrics() []herald.Metric {
	st := s.Stats()
	out := []herald.Metric{
		{Name: "herald_watch_streams", Help: "Open watch-mode streams.", Value: float64(st.Streams)},
		{Name: "herald_watch_streams_parked", Help: "Open watch-mode streams idle without a goroutine of their own.", Value: float64(st.Parked)},
		{Name: "herald_watch_dispatched_commits_total", Help: "Commits the watch service decided which streams to wake for.", Counter: true, Value: float64(st.Commits)},
		{Name: "herald_watch_dispatch_seconds_total", Help: "Time spent deciding which streams each commit wakes.", Counter: true, Value: st.DispatchTime.Seconds()},
		{Name: "herald_watch_fanout_seconds_total", Help: "Time watch-mode streams and their transports spent turning commits into events and frames, as the fan-out budget (--watch-cpu) counts it.", Counter: true, Value: st.FanoutTime.Seconds()},
	}
	lag, fill := s.lagAndFill()
	return append(out,
		herald.Metric{Name: "herald_watch_lag_commits", Help: "Watch-mode streams by how far each is behind: commits between the last it applied and the last that concerns it.", Histogram: lag.histogram()},
		herald.Metric{Name: "herald_watch_lag_commits_max", Help: "How far the watch-mode stream furthest behind is, in commits.", Value: lag.max},
		herald.Metric{Name: "herald_watch_buffer_fill", Help: "Watch-mode streams by how full their buffer is: events waiting for the client over the statement's buffer, or bytes over --watch-buffer-bytes, whichever is fuller (1: on_full applies).", Histogram: fill.histogram()},
		herald.Metric{Name: "herald_watch_buffer_fill_max", Help: "How full the fullest watch-mode stream's buffer is (0 to 1).", Value: fill.max},
	)
}

// The bounds of the streams' distributions on /metrics.
var (
	lagBounds  = []float64{0, 1, 10, 100, 1000, 10000, 100000}
	fillBounds = []float64{0, 0.1, 0.25, 0.5, 0.75, 0.9, 1}
)

// spread is a distribution of one figure over the streams, as of one reading.
type spread struct {
	bounds []float64
	counts []uint64
	n      uint64
	sum    float64
	max    float64
}

func newSpread(bounds []float64) *spread {
	return &spread{bounds: bounds, counts: make([]uint64, len(bounds))}
}

func (d *spread) add(v float64) {
	for i, b := range d.bounds {
		if v <= b {
			d.counts[i]++
			break
		}
	}
	d.n++
	d.sum += v
	d.max = max(d.max, v)
}

func (d *spread) histogram() *herald.Histogram {
	return &herald.Histogram{Bounds: d.bounds, Counts: d.counts, Count: d.n, Sum: d.sum}
}

// lagAndFill reads, for every stream, how far it is behind — the seq of the last commit
// queued for it (or appended to its feed) less the seq of the last it applied — and how
// full its buffer is.
func (s *Service) lagAndFill() (lag, fill *spread) {
	lag, fill = newSpread(lagBounds), newSpread(fillBounds)
	s.mu.Lock()
	type reading struct {
		w      *watcher
		wanted uint64
		buffer int
	}
	rs := make([]reading, 0, len(s.watchers))
	for _, w := range s.watchers {
		want := w.pushed.Load()
		if w.feed != nil {
			want = max(want, w.feed.lastSeq)
		}
		rs = append(rs, reading{w, want, w.q.Opts.Buffer}) // w.q and w.feed change under s.mu
	}
	s.mu.Unlock()
	for _, r := range rs {
		w := r.w
		behind := 0.0
		if at := w.applied.Load(); r.wanted > at {
			behind = float64(r.wanted - at)
		}
		lag.add(behind)
		w.qmu.Lock()
		events, bytes := w.outq.len()+len(w.events)+min(w.gap, 1), w.outq.bytes
		w.qmu.Unlock()
		f := 0.0
		if b := r.buffer; b > 0 {
			f = float64(events) / float64(b)
		}
		if m := s.cfg.MaxBufferBytes; m > 0 {
			f = max(f, float64(bytes)/float64(m))
		}
		fill.add(min(f, 1))
	}
	return lag, fill
}

// Stats returns the service's counters.
func (s *Service) Stats() Stats {
	s.mu.Lock()
	n := len(s.watchers)
	s.mu.Unlock()
	st := Stats{Streams: n, Parked: int(s.parkedStreams.Load()), Commits: s.dispatchCommits.Load(), DispatchTime: time.Duration(s.dispatchNanos.Load())}
	if st.Commits > 0 {
		st.DispatchPerCall = st.DispatchTime / time.Duration(st.Commits)
	}
	if s.budget != nil {
		st.FanoutTime = s.budget.spent()
	}
	return st
}

// New returns a service; Start begins its work.
// FanOutSlots returns new fan-out slots for Config.Slots: half the CPUs, at least one,
// so that the writers always have CPUs that fan-out does not hold.
func FanOutSlots() chan struct{} { return make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)) }

func New(cfg Config) *Service {
	if cfg.MaxBufferBytes <= 0 {
		cfg.MaxBufferBytes = DefaultMaxBufferBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxWatches <= 0 {
		cfg.MaxWatches = 10000
	}
	if cfg.CPUShare <= 0 {
		cfg.CPUShare = DefaultCPUShare()
	}
	var b *budget
	if cfg.CPUShare < 1 {
		b = newBudget(cfg.Engine.Clock(), budgetWindow, cfg.CPUShare)
	}
	s := &Service{
		cfg:        cfg,
		eng:        cfg.Engine,
		clock:      cfg.Engine.Clock(),
		log:        cfg.Logger,
		watchers:   map[string]*watcher{},
		byCtx:      map[<-chan struct{}]*ctxStreams{},
		index:      standing.NewIndex[*watcher](),
		perTick:    map[*watcher]bool{},
		feeds:      map[string]*feed{},
		ending:     map[*watcher]bool{},
		shares:     map[string]*shareRef{},
		cache:      newEvalCache(),
		inWake:     make(chan struct{}, 1),
		roundDone:  make(chan struct{}, 1),
		wakeBatch:  max(1, runtime.GOMAXPROCS(0)/2),
		applySlots: cmp.Or(cfg.Slots, FanOutSlots()),
		budgetGate: make(chan struct{}, 1),
		budget:     b,
		gosched:    runtime.Gosched,
		recent:     recent{max: recentCap},
		dispMoved:  make(chan struct{}),
		quit:       make(chan struct{}),
		dispDone:   make(chan struct{}),
	}
	s.touchFn = s.touchLocked
	return s
}

// Start attaches the service to its engine's standing queries (standing.Core) and
// subscribes it to durable commits.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil
	}
	core := standing.Attach(s.eng)
	if err := core.CleanStale(ctx); err != nil {
		core.Detach()
		return err
	}
	s.core = core
	// Read before listening: every commit after this position is heard.
	s.dispSeq, s.dispTick = s.eng.Durable()
	s.recent.start(s.dispSeq)
	s.unlisten = s.eng.Listen(s.enqueue)
	go s.dispatcher()
	s.started = true
	return nil
}

// Stop ends every stream and waits for their goroutines. It is idempotent and safe
// before Start.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.started || s.stopped {
		s.stopped = true
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	ws := make([]*watcher, 0, len(s.watchers))
	for _, w := range s.watchers {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	s.unlisten()
	close(s.quit)
	<-s.dispDone
	for _, w := range ws {
		w.Close()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	// The core goes with the service either way: its statements stop being handled.
	defer s.core.Detach()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Open starts a watch-mode stream for one WATCH statement. With after > 0 the stream
// resumes after that position (the seq of the last event the client saw): it skips the
// initial snapshot and replays every change after it from the durable change log; a
// position older than the log keeps answers with a reset event, then a fresh snapshot.
func (s *Service) Open(ctx context.Context, sessionID, query string, params map[string]herald.Value, after uint64) (herald.Stream, error) {
	s.mu.Lock()
	core := s.core
	s.mu.Unlock()
	if core == nil {
		return nil, herald.Errorf(herald.CodeShuttingDown, "the watch service is not running")
	}
	op, err := core.Open(ctx, standing.OpenRequest{Session: sessionID, Query: query, Params: params, Mode: option.Watch, Policy: s.cfg.Policy})
	if err != nil {
		return nil, err
	}
	q := op.Query
	w := &watcher{
		id:        hid.Token(12),
		svc:       s,
		q:         q,
		hold:      op.Hold(),
		session:   sessionID,
		share:     q.ShareKey(op.Principal),
		handle:    op.Handle,
		principal: op.Principal,
		limits:    op.Limits,
		warning:   op.Warning,
		events:    make(chan herald.Event, chanCapFor(q.Opts.Buffer)),
		ctxDone:   ctx.Done(),
		wake:      make(chan struct{}, 1),
		room:      make(chan struct{}, 1),
		reqs:      make(chan request),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	// The session's limit counts watches of both modes (E8006).
	if w.slot, err = s.eng.AttachWatch(ctx, sessionID); err != nil {
		core.Release(w.hold)
		return nil, err
	}
	s.mu.Lock()
	switch {
	case !s.started || s.stopped:
		err = herald.Errorf(herald.CodeShuttingDown, "the watch service is not running")
	case len(s.watchers) >= s.cfg.MaxWatches:
		err = herald.Errorf(herald.CodeWatchLimitExceeded, "the server already has %d watches", len(s.watchers))
	case w.handle != "":
		err = core.Bind(sessionID, w.handle, w)
	}
	if err != nil {
		s.mu.Unlock()
		w.slot.Release()
		core.Release(w.hold)
		return nil, err
	}
	// Register before taking the snapshot, so no commit after it can be missed.
	s.watchers[w.id] = w
	s.open.Add(1)
	s.indexLocked(w, true)
	w.shareID, w.share = s.internShare(w.share)
	core.Register(w)
	s.wg.Add(1)
	s.mu.Unlock()

	if q.Opts.Immediate {
		w.shown = map[herald.NodeID]*row{}
		w.untx = s.eng.ListenSession(sessionID, w.onTx)
	}
	w.stats = core.Track(w.nodeID(), func() int64 { return int64(len(w.events)) + w.queued.Load() })
	w.saveNode(ctx, "active")
	if err := w.begin(ctx, after); err != nil {
		w.Close()
		w.exit()
		w.dropNode()
		close(w.events)
		close(w.done)
		s.wg.Done()
		return nil, err
	}
	// The stream ends with ctx; the registration is released when it ends first.
	w.unctx = s.closeWithCtx(ctx, w)
	w.startTimers()
	if w.warning == nil && w.reset == nil && len(w.initial) == 0 && w.heartTimer == nil && w.win == nil && !q.Opts.Immediate && !w.behindLog() {
		w.startParked() // nothing to do yet: no goroutine until something concerns it
	} else {
		go w.loop()
	}
	return w, nil
}

// Flush waits until every stream has turned every durable commit into events. Tests use
// it to step the service deterministically.
func (s *Service) Flush() {
	s.waitDispatched() // first every durable commit through the dispatcher
	s.mu.Lock()
	ws := make([]*watcher, 0, len(s.watchers))
	for _, w := range s.watchers {
		ws = append(ws, w)
	}
	var ending []*watcher
	for w := range s.ending {
		ending = append(ending, w)
	}
	s.mu.Unlock()
	for _, w := range ending {
		<-w.done
	}
	for _, w := range ws {
		reply := make(chan struct{})
		w.call()
		select {
		case w.reqs <- request{sync: reply}:
			select {
			case <-reply:
			case <-w.done:
			}
		case <-w.done:
			w.uncall()
		}
	}
}

func (s *Service) remove(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchers[w.id] != w {
		return
	}
	delete(s.watchers, w.id)
	s.open.Add(-1)
	s.releaseShare(w.share)
	s.core.Release(w.hold)
	w.hold = ""
	s.ending[w] = true
	go func() {
		<-w.done
		s.mu.Lock()
		delete(s.ending, w)
		s.mu.Unlock()
	}()
	if w.handle != "" {
		s.core.Unbind(w.session, w.handle, w)
	}
	s.core.Unregister(w)
	w.slot.Release()
	s.core.Untrack(w.stats)
	s.indexLocked(w, false)
}

// indexLocked adds w to (or removes it from) the dispatch index: the feed of its type
// when it reads one (feed.go), else the standing index (by the value its equality
// condition requires, by every type its pattern mentions, and by the nodes it reads by
// id); deliver_on: tick streams are woken by every tick too. s.mu must be held.
func (s *Service) indexLocked(w *watcher, add bool) {
	if w.q.Opts.PerTick {
		if add {
			s.perTick[w] = true
		} else {
			delete(s.perTick, w)
		}
	}
	if t, ok := feedType(w.q); ok {
		s.indexFeed(w, t, add)
		return
	}
	if add {
		s.index.Add(w.q, w)
	} else {
		s.index.Remove(w.q, w)
	}
}

// watcher is one watch-mode stream.
type watcher struct {
	id       string
	svc      *Service
	q        *standing.Query // the statement it runs (ALTER WATCH replaces it)
	session  string
	events   chan herald.Event
	ctxDone  <-chan struct{} // the Open context's: the transport has gone
	wake     chan struct{}
	room     chan struct{} // the transport took events (see Take)
	roomWait atomic.Bool   // the stream's goroutine waits on room, in batches (awaitRoom)
	batched  atomic.Bool   // the transport takes events in batches
	batchAck atomic.Bool   // ... and the stream's goroutine has switched to them
	busy     atomic.Bool   // in the dispatcher's current round (see Service.inRound)
	exited   atomic.Bool   // the stream's goroutine has ended, or never started (see exit)
	waiting  atomic.Int32  // the stream's goroutine waits for its transport (see waitTransport)
	// Parking (park.go): an idle stream without a goroutine.
	parked   atomic.Bool  // no goroutine runs the loop: a kick starts one
	kicked   atomic.Bool  // a signal came since the loop last looked
	parkHint atomic.Bool  // the idle check found the stream idle: park when possible
	active   atomic.Bool  // the loop did something since the last idle check
	callers  atomic.Int32 // requests on reqs not yet received
	stop     chan struct{}
	done     chan struct{}

	mu        sync.Mutex // guards queue, behind, paused, cancelled, overflow
	queue     []*herald.ChangeSet
	behind    bool // the queue overflowed: read the change log instead
	paused    bool
	cancelled bool
	overflow  bool // ended by on_full: error; its _Watch node stays, cancelled

	// The dispatcher's marks (under Service.mu): the last change set that reached the
	// stream, and whether it waits in the dispatcher's list of streams to wake.
	touchMark uint64
	inWoken   bool
	// pushed is the seq of the last change set queued for the stream (push), for
	// Metrics: with the feed's last, how far the stream has to go.
	pushed atomic.Uint64
	// A stream indexed by one type alone reads that type's feed (feed.go) instead of a
	// queue of its own: from set number fpos on, into feedBuf. The stream's goroutine
	// owns fpos and feedBuf once it runs.
	feed    *feed
	fpos    uint64
	feedBuf []*herald.ChangeSet

	// hold is its hold on the query it opened with, shared with identical watches (""
	// once given back, or once ALTER WATCH gave it one of its own); under the service's mu.
	hold     string
	share    string                 // the evaluation this stream shares with identical ones ("" none)
	shareID  uint64                 // share interned (0: none); owned by the stream's goroutine
	notifyFn atomic.Pointer[func()] // SetNotify's callback, nil: none
	handle   string
	// principal opened the stream (nil without authentication): its triggers act for
	// it, and each evaluation has its statement limits.
	principal *herald.Principal
	limits    engine.Limits
	reqs      chan request // ALTER WATCH, and Flush (see request)
	alterMu   sync.Mutex

	slot  *engine.WatchSlot // its place in its session (nil without one)
	stats *standing.Stats   // the counters its _Watch node shows, flushed periodically
	link  sync.Once         // the first _Watch write links the session to it

	statMu    sync.Mutex // guards the counters below
	delivered int
	lastAt    time.Time
	sentSeq   uint64

	closeOnce sync.Once
	unctx     func() // stops closing the stream when the Open context ends

	// Owned by the watcher's goroutine.
	applying bool            // holds one of Service.applySlots
	slotAt   time.Time       // since when
	qmu      sync.Mutex      // guards outq, gap and its position (see outbox.go)
	outq     deque           // events waiting for room in the channel (see send)
	gathered []*herald.Event // applied, not yet queued (see sendGathered)
	gap      int             // events dropped from outq, reported before its next one
	gapSeq   uint64          // the position the gap marker shows (under qmu)
	gapTick  uint64
	queued   atomic.Int64  // len(outq), for SHOW WATCHES
	cursor   uint64        // seq of the last change set applied
	applied  atomic.Uint64 // cursor, for readers on other goroutines (Metrics)
	tick     uint64
	past     *past          // join patterns: the graph as of the cursor
	initial  []row          // the snapshot still to send
	held     []herald.Event // deliver_on: tick — events of the tick that has not ended
	// visibility: immediate
	shown     map[herald.NodeID]*row // what was shown of nodes the open transaction touched
	commitSeq uint64                 // the session's transaction committed at this seq
	txq       []engine.TxEvent       // queued by the session listener (under mu)
	untx      func()
	dropped   int
	// warning, when set, goes first of all as a warning event (see
	// herald.EventWarning).
	warning *herald.Error
	// reset, when set, goes first as a reset event: the requested position was
	// compacted away, or is ahead of this server's.
	reset      *herald.Error
	win        *windows // a windowed watch's (nil for others)
	heartTimer herald.Timer
	last       time.Time // when the last event was sent
}

func (w *watcher) ID() string                  { return w.id }
func (w *watcher) Events() <-chan herald.Event { return w.events }
func (w *watcher) Done() <-chan struct{}       { return w.done }

// leaveRound tells the dispatcher this stream is done with its round: it has applied
// what it was given, or it is about to wait (for its transport, a pause, the
// dispatcher itself) and must not hold the next round up.
func (w *watcher) leaveRound() {
	if w.busy.CompareAndSwap(true, false) && w.svc.inRound.Add(-1) == 0 {
		select {
		case w.svc.roundDone <- struct{}{}:
		default:
		}
	}
}

// takeSlot waits for one of the service's apply slots (see Service.applySlots); false
// when the stream was closed meanwhile. Only the stream's goroutine calls it.
func (w *watcher) takeSlot() bool {
	if w.applying {
		return true
	}
	// Streams pass the budget one at a time, through its gate, and the one passing holds
	// the gate until it has a slot: the rest wait parked on the gate, not each on a
	// timer of its own, and at most one stream is let in that has not yet counted its
	// work. The one waiting for the budget holds no slot, so the transports that share
	// the slots (Config.Slots) write meanwhile.
	if b := w.svc.budget; b != nil {
		select {
		case w.svc.budgetGate <- struct{}{}:
		case <-w.stop:
			return false
		}
		defer func() { <-w.svc.budgetGate }()
		if !b.await(w.stop) {
			return false
		}
	}
	select {
	case w.svc.applySlots <- struct{}{}:
	case <-w.stop:
		return false
	}
	w.applying, w.slotAt = true, w.svc.clock.Now()
	return true
}

// FrameBudget puts a transport's share of fan-out, building the frames that carry the
// streams' events, under the same CPU budget as the streams' apply work (Config.CPUShare):
// it waits until the budget's window has room and returns finish, which counts the time
// since against it. ok is false when done closed first. Without it the budget bounded
// only what the frames carry: cheaper apply work meant more frames, and the writers'
// tail grew with them.
func (s *Service) FrameBudget(done <-chan struct{}) (finish func(), ok bool) {
	b := s.budget
	if b == nil {
		return func() {}, true
	}
	if !b.await(done) {
		return nil, false
	}
	start := s.clock.Now()
	return func() { b.spend(s.clock.Now().Sub(start)) }, true
}

// giveSlot hands the apply slot back: the stream has applied a share of its work, or is
// about to wait. Only the stream's goroutine calls it.
func (w *watcher) giveSlot() {
	if w.applying {
		w.applying = false
		if b := w.svc.budget; b != nil {
			b.spend(w.svc.clock.Now().Sub(w.slotAt))
		}
		<-w.svc.applySlots
	}
}

// idle is where the stream's goroutine stops working to wait (for its transport, a
// pause, the dispatcher, a commit): it leaves the round and gives its slot back.
func (w *watcher) idle() {
	w.giveSlot()
	w.leaveRound()
}

// waitTransport marks the stream's goroutine as waiting for its transport (a reader
// that does not read, under delivery: reliable or on_full: block) until the returned
// function is called, and leaves any round it is counted in. The dispatcher does not
// count such a stream in its rounds (wakeInRound): a reader that does not read holds
// up its own watch, never the others. Either the dispatcher sees the mark after it
// counted the stream, or the stream's leaving comes after the count.
func (w *watcher) waitTransport() (done func()) {
	w.waiting.Add(1) // a count: the waits nest (end drains, then waits to send)
	w.idle()
	return func() { w.waiting.Add(-1) }
}

// exit marks the stream's goroutine as gone and leaves any round it is counted in. A
// wake after this leaves the round at once (wakeInRound): the dispatcher may have picked
// the stream for a commit just before it ended, and must not wait for it.
func (w *watcher) exit() {
	w.exited.Store(true)
	w.idle()
}

// Close ends the stream.
func (w *watcher) Close() {
	w.closeOnce.Do(func() {
		close(w.stop)
		w.kick()
		if w.untx != nil {
			w.untx()
		}
		w.svc.remove(w)
	})
}

// awaitDispatched waits, on the stream's goroutine, until every commit durable now has
// reached the streams it touches, and returns the dispatched position. It leaves the
// dispatcher's round first, and again whenever the dispatcher hands it more while it
// waits, so the dispatcher never waits for it in turn.
func (w *watcher) awaitDispatched() (seq, tick uint64) {
	durable, _ := w.svc.eng.Durable()
	for {
		w.idle()
		s := w.svc
		s.mu.Lock()
		seq, tick, moved, stopped := s.dispSeq, s.dispTick, s.dispMoved, s.stopped || !s.started
		s.mu.Unlock()
		if seq >= durable || stopped {
			return seq, tick
		}
		select {
		case <-moved:
		case <-w.wake: // pushed into a new round: leave it (the queue is applied later)
		case <-w.stop:
			return seq, tick
		}
	}
}

// push queues cs for the stream; the dispatcher wakes it afterwards (wakeInRound).
func (w *watcher) push(cs *herald.ChangeSet) {
	w.pushed.Store(cs.Seq)
	w.mu.Lock()
	if !w.behind {
		if len(w.queue) >= queueCap {
			w.queue, w.behind = nil, true
		} else {
			w.queue = append(w.queue, cs)
		}
	}
	w.mu.Unlock()
}

// wakeInRound wakes the stream for what push queued, counting it in the dispatcher's
// round until it leaves (leaveRound).
func (w *watcher) wakeInRound() {
	if w.busy.CompareAndSwap(false, true) {
		w.svc.inRound.Add(1)
	}
	if w.exited.Load() {
		w.leaveRound() // nobody is left to take the wake
		return
	}
	if w.waiting.Load() > 0 {
		w.leaveRound() // it applies what was pushed once its transport reads (waitTransport)
	}
	w.signal(w.wake)
}

// begin sends the initial snapshot (or prepares a resume) before the loop starts.
func (w *watcher) begin(ctx context.Context, after uint64) error {
	q := w.q
	if seq, _ := w.svc.eng.Durable(); after > seq {
		// The client saw a position this server never reached: its data is older than
		// the client's (a restore, or another server). Say so and start afresh.
		w.reset = herald.Errorf(herald.CodePositionAhead, "the requested position %d is ahead of this server's (%d): its data is older than what the client saw; a new snapshot follows", after, seq)
		return w.snapshot(true)
	}
	if after > 0 {
		w.cursor = after
		w.applied.Store(w.cursor)
		w.setBehind() // replay from the log first
		if !q.Single() {
			w.past = newPast(after, q.Reads)
		}
		return nil
	}
	if q.Opts.Initial == "since" {
		return w.beginSince(ctx)
	}
	// A windowed watch reports what happens from now on, window by window.
	return w.snapshot(q.Opts.Initial == "full" && q.Opts.WinSize == 0)
}

// interrupt bounds one evaluation of the stream's pattern: its principal's statement
// limits, and the stream's end (its client gone, or the stream closed) stop it.
func (w *watcher) interrupt() func() error {
	return w.svc.eng.Interrupt(w.limits, func() bool {
		select {
		case <-w.ctxDone:
			return true
		case <-w.stop:
			return true
		default:
			return false
		}
	})
}

// snapshot reads the current matches at one position; with send they are streamed as
// initial events when the loop starts.
func (w *watcher) snapshot(send bool) error {
	var rows map[string]row
	if !send {
		// Only the position (initial: none, or a window). A snapshot of the graph would
		// make the next commit copy the tree nodes it changes, which is most of what
		// opening such a watch would cost.
		w.cursor, w.tick = w.svc.eng.Position()
		w.applied.Store(w.cursor)
	} else if err := w.svc.eng.ViewSnapshot(func(tx *graph.Tx, seq, tick uint64) error {
		w.cursor, w.tick = seq, tick
		w.applied.Store(w.cursor)
		var err error
		rows, err = w.q.Matches(tx, time.Time{}, w.interrupt())
		return err
	}); err != nil {
		return err
	}
	// The snapshot may include commits that are still syncing: show them only once durable.
	if err := w.svc.eng.WaitDurable(context.Background(), w.cursor); err != nil {
		return err
	}
	if !w.q.Single() {
		w.past = newPast(w.cursor, w.q.Reads)
	}
	if send {
		w.initial = w.q.Sorted(rows)
	}
	return nil
}
