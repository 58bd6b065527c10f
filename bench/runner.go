package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Scenario names.
const (
	S1 = "s1" // publish N with confirmation, then consume with explicit ack
	S2 = "s2" // a fixed offered rate for a fixed time; end-to-end latency
	S3 = "s3" // NACK every message once, ACK on redelivery; exactly-once check
)

// Scenarios lists every scenario in the order they run.
var Scenarios = []string{S1, S2, S3}

// Config is the workload. Every loop it starts is bounded by a message count and by
// Timeout.
type Config struct {
	Messages    int           // messages published in S1 and S3
	PayloadSize int           // bytes per message
	InFlight    int           // S1, S3: confirmed publishes in flight at once
	Consumers   int           // competing consumers in every scenario
	Prefetch    int           // unsettled deliveries each consumer may hold
	Rate        int           // offered messages per second in S2
	Duration    time.Duration // how long S2 offers load
	// MaxPending bounds S2's publishes awaiting confirmation; past it the schedule
	// slips, which the latencies show (they count from the scheduled time).
	MaxPending int
	Timeout    time.Duration // bound on each scenario, from Setup to the last ack
	// Drain is how long S3 keeps consuming after the last ack to catch late
	// duplicates.
	Drain time.Duration
	// ProbeDir, when set, is where S2 runs a disk probe beside the broker: a 4 KB
	// write and sync every ProbeEvery, into a file of its own (Result.DiskSync).
	ProbeDir   string
	ProbeEvery time.Duration
	// Progress, when set, is called about ten times a second while a phase runs, and
	// once when it ends. Calls come from one goroutine at a time.
	Progress func(Progress)
}

// DefaultConfig returns the standard workload: 256-byte messages, 64 confirmed
// publishes in flight, 4 consumers with a prefetch of 100, 20,000 messages in S1 and
// S3, and 5,000 msg/s for 10 s in S2.
func DefaultConfig() Config {
	return Config{
		Messages:    20000,
		PayloadSize: 256,
		InFlight:    64,
		Consumers:   4,
		Prefetch:    100,
		Rate:        5000,
		Duration:    10 * time.Second,
		MaxPending:  4096,
		Timeout:     2 * time.Minute,
		Drain:       300 * time.Millisecond,
		ProbeEvery:  20 * time.Millisecond,
	}
}

func (c Config) validate() error {
	switch {
	case c.Messages <= 0:
		return errors.New("bench: Messages must be positive")
	case c.InFlight <= 0 || c.Consumers <= 0 || c.Prefetch <= 0:
		return errors.New("bench: InFlight, Consumers and Prefetch must be positive")
	case c.Rate <= 0 || c.Duration <= 0:
		return errors.New("bench: Rate and Duration must be positive")
	case c.Timeout <= 0:
		return errors.New("bench: Timeout must be positive")
	case c.ProbeDir != "" && c.ProbeEvery <= 0:
		return errors.New("bench: ProbeEvery must be positive when ProbeDir is set")
	}
	return nil
}

// Progress is a snapshot of the phase that is running.
type Progress struct {
	Broker   string
	Scenario string
	Phase    string // "publish", "consume", "offer"
	Done     int
	Total    int
	Final    bool // the phase has ended
}

// Result is what one scenario measured on one broker. Rates are messages per second;
// durations are in nanoseconds when encoded as JSON.
type Result struct {
	Scenario string `json:"scenario"`
	Messages int    `json:"messages"`
	// S1 and S3.
	PublishRate float64       `json:"publish_rate,omitempty"`
	ConsumeRate float64       `json:"consume_rate,omitempty"`
	PublishTime time.Duration `json:"publish_ns,omitempty"`
	ConsumeTime time.Duration `json:"consume_ns,omitempty"`
	// S2.
	OfferedRate float64       `json:"offered_rate,omitempty"`
	SentRate    float64       `json:"sent_rate,omitempty"`
	Received    int           `json:"received,omitempty"`
	P50         time.Duration `json:"p50_ns,omitempty"`
	P99         time.Duration `json:"p99_ns,omitempty"`
	Max         time.Duration `json:"max_ns,omitempty"`
	// DiskSync is what the disk probe saw while S2 ran (Config.ProbeDir).
	DiskSync *DiskSync `json:"disk_sync,omitempty"`
	// S3: every message must be NACKed once, redelivered, and ACKed once.
	Violations []string `json:"violations,omitempty"`
	// Duplicates counts deliveries of a message that was already acked (S1, S2, S3).
	Duplicates int `json:"duplicates,omitempty"`
	// Err says why the scenario did not complete; the figures are then partial.
	Err string `json:"error,omitempty"`
	// Store is what the broker wrote to its store per message over the scenario, for
	// brokers that report it (StoreMeter).
	Store *StoreUse `json:"store,omitempty"`
	// PublishUse and ConsumeUse are what the process spent over S1's two phases, for a
	// broker that runs in the process (a StoreMeter): its server and the bench's
	// clients together.
	PublishUse *Use `json:"publish_use,omitempty"`
	ConsumeUse *Use `json:"consume_use,omitempty"`
}

// StoreMeter is a Broker that can tell what it wrote to its store: Herald in-process.
type StoreMeter interface {
	// StoreCounters returns the syncs made and the bytes written so far, to the
	// write-ahead log and to tables (flushes and compactions). Flush first makes the
	// store write out what it buffers, so the bytes of the last messages are counted.
	StoreCounters(flush bool) (syncs, walBytes, tableBytes uint64)
}

// StoreUse is a scenario's store work per message.
type StoreUse struct {
	SyncsPerMessage      float64 `json:"syncs_per_message"`
	WALBytesPerMessage   float64 `json:"wal_bytes_per_message"`
	TableBytesPerMessage float64 `json:"table_bytes_per_message"`
}

// Run runs one scenario against b: Setup, then the scenario's phases, bounded by
// cfg.Timeout. A failure is reported in Result.Err rather than returned, so that one
// broker's trouble does not stop a comparison.
func Run(ctx context.Context, b Broker, scenario string, cfg Config) Result {
	res := Result{Scenario: scenario}
	if err := cfg.validate(); err != nil {
		res.Err = err.Error()
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if err := b.Setup(ctx); err != nil {
		res.Err = "setup: " + err.Error()
		return res
	}
	meter, _ := b.(StoreMeter)
	r := &runner{b: b, cfg: cfg, scenario: scenario, inProcess: meter != nil}
	var syncs0, wal0, tab0 uint64
	if meter != nil {
		syncs0, wal0, tab0 = meter.StoreCounters(true)
	}
	var err error
	switch scenario {
	case S1:
		err = r.s1(ctx, &res)
	case S2:
		err = r.s2(ctx, &res)
	case S3:
		err = r.s3(ctx, &res)
	default:
		err = fmt.Errorf("unknown scenario %q", scenario)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("timed out after %v: %w", cfg.Timeout, err)
		}
		res.Err = err.Error()
	}
	if meter != nil && res.Messages > 0 {
		syncs, wal, tab := meter.StoreCounters(true)
		n := float64(res.Messages)
		res.Store = &StoreUse{SyncsPerMessage: float64(syncs-syncs0) / n, WALBytesPerMessage: float64(wal-wal0) / n, TableBytesPerMessage: float64(tab-tab0) / n}
	}
	return res
}

type runner struct {
	b         Broker
	cfg       Config
	scenario  string
	inProcess bool // the broker runs in this process: its CPU time is the process's
}

// Use is what the process spent over a phase: CPU time, and heap allocations (objects
// and bytes, from runtime/metrics).
type Use struct {
	CPU        time.Duration `json:"cpu_ns"`
	Allocs     uint64        `json:"allocs"`
	AllocBytes uint64        `json:"alloc_bytes"`
}

var allocMetrics = []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}

func heapAllocs() (objects, bytes uint64) {
	s := slices.Clone(allocMetrics)
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// phaseUse returns a function that reports what the process has spent since phaseUse
// was called, or nil when the broker does not run in the process or the system cannot
// tell its CPU time.
func (r *runner) phaseUse() func() *Use {
	start, ok := processCPU()
	objs, bytes := heapAllocs()
	return func() *Use {
		end, ok2 := processCPU()
		objs2, bytes2 := heapAllocs()
		if !r.inProcess || !ok || !ok2 {
			return nil
		}
		return &Use{CPU: end - start, Allocs: objs2 - objs, AllocBytes: bytes2 - bytes}
	}
}

// track reports the progress of one phase until the returned stop is called.
func (r *runner) track(phase string, total int, done *atomic.Int64) (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	report := func(final bool) {
		r.cfg.Progress(Progress{Broker: r.b.Name(), Scenario: r.scenario, Phase: phase,
			Done: int(done.Load()), Total: total, Final: final})
	}
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		report(false)
		for {
			select {
			case <-t.C:
				report(false)
			case <-quit:
				report(true)
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-finished }) }
}

// publishAll publishes n messages with ids 0..n-1, cfg.InFlight at a time (each
// goroutine waits for its confirmation before the next), and returns how long it took.
func (r *runner) publishAll(ctx context.Context, n int) (time.Duration, error) {
	var next, done atomic.Int64
	stop := r.track("publish", n, &done)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	var wg sync.WaitGroup
	for range r.cfg.InFlight {
		wg.Go(func() {
			for {
				id := next.Add(1) - 1
				if id >= int64(n) || ctx.Err() != nil {
					return
				}
				if err := r.b.Publish(ctx, NewPayload(uint64(id), time.Now(), r.cfg.PayloadSize)); err != nil {
					cancel(fmt.Errorf("publish: %w", err))
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return elapsed, err
	}
	return elapsed, nil
}

// consumeUntil runs Consume with handle until handle reports the phase complete (by
// closing complete), ctx ends, or Consume fails. It returns the time from the start of
// Consume to completion.
func (r *runner) consumeUntil(ctx context.Context, complete <-chan struct{}, linger time.Duration,
	handle func(ctx context.Context, m Msg) error) (time.Duration, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, 1)
	start := time.Now()
	go func() { failed <- r.b.Consume(cctx, r.cfg.Consumers, r.cfg.Prefetch, handle) }()
	select {
	case <-complete:
		elapsed := time.Since(start)
		if linger > 0 {
			select {
			case <-time.After(linger):
			case <-ctx.Done():
			}
		}
		cancel()
		if err := <-failed; err != nil && !errors.Is(err, context.Canceled) {
			return elapsed, fmt.Errorf("consume: %w", err)
		}
		return elapsed, nil
	case err := <-failed:
		if err == nil {
			err = errors.New("consumers stopped early")
		}
		return time.Since(start), fmt.Errorf("consume: %w", err)
	case <-ctx.Done():
		elapsed := time.Since(start)
		cancel()
		<-failed
		return elapsed, ctx.Err()
	}
}

// ledger records, per message id, what the consumers saw.
type ledger struct {
	mu    sync.Mutex
	nacks []int32 // NACKs sent
	acks  []int32 // ACKs that succeeded
	dup   int
}

func newLedger(n int) *ledger { return &ledger{nacks: make([]int32, n), acks: make([]int32, n)} }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func (r *runner) s1(ctx context.Context, res *Result) error {
	n := r.cfg.Messages
	res.Messages = n
	use := r.phaseUse()
	pt, err := r.publishAll(ctx, n)
	res.PublishTime, res.PublishRate, res.PublishUse = pt, rate(n, pt), use()
	if err != nil {
		return err
	}
	led := newLedger(n)
	var acked atomic.Int64
	complete := make(chan struct{})
	stop := r.track("consume", n, &acked)
	use = r.phaseUse()
	ct, err := r.consumeUntil(ctx, complete, 0, func(ctx context.Context, m Msg) error {
		id, _, err := ParsePayload(m.Payload())
		if err != nil || id >= uint64(n) {
			return fmt.Errorf("%w: %.40q", ErrPayload, m.Payload())
		}
		if err := m.Ack(ctx); err != nil {
			return ackErr(ctx, err)
		}
		led.mu.Lock()
		led.acks[id]++
		first := led.acks[id] == 1
		if !first {
			led.dup++
		}
		led.mu.Unlock()
		if first && acked.Add(1) == int64(n) {
			close(complete)
		}
		return nil
	})
	res.ConsumeUse = use()
	stop()
	res.ConsumeTime, res.ConsumeRate = ct, rate(int(acked.Load()), ct)
	res.Duplicates = led.dup
	return err
}

// ackErr keeps a settlement failure caused by the end of the phase from counting as
// a broker failure.
func ackErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("settle: %w", err)
}

func (r *runner) s2(ctx context.Context, res *Result) error {
	total := int(math.Round(float64(r.cfg.Rate) * r.cfg.Duration.Seconds()))
	total = max(total, 1)
	res.Messages = total
	res.OfferedRate = float64(r.cfg.Rate)

	var (
		mu        sync.Mutex
		lat       = make([]time.Duration, 0, total)
		seen      = make([]bool, total)
		dup       int
		received  atomic.Int64
		published atomic.Int64
		sent      = make(chan struct{}) // closed when the producer has finished
		complete  = make(chan struct{})
	)
	// complete closes once the producer is done and every published message arrived.
	var completeOnce sync.Once
	check := func() {
		select {
		case <-sent:
			if received.Load() >= published.Load() {
				completeOnce.Do(func() { close(complete) })
			}
		default:
		}
	}
	handle := func(ctx context.Context, m Msg) error {
		now := time.Now()
		id, at, err := ParsePayload(m.Payload())
		if err != nil || id >= uint64(total) {
			return fmt.Errorf("%w: %.40q", ErrPayload, m.Payload())
		}
		mu.Lock()
		first := !seen[id]
		if first {
			seen[id] = true
			lat = append(lat, now.Sub(at))
		} else {
			dup++
		}
		mu.Unlock()
		if err := m.Ack(ctx); err != nil {
			return ackErr(ctx, err)
		}
		if first {
			received.Add(1)
			check()
		}
		return nil
	}

	pctx, pcancel := context.WithCancelCause(ctx)
	defer pcancel(nil)
	var sentTime time.Duration
	var err error
	res.DiskSync, err = Probed(r.cfg.ProbeDir, r.cfg.ProbeEvery, func() error {
		go func() {
			sentTime = r.offer(pctx, total, &published, pcancel)
			close(sent)
			if cause := context.Cause(pctx); cause != nil {
				// The producer failed: stop waiting for messages that were never sent.
				completeOnce.Do(func() { close(complete) })
			}
			check()
		}()
		_, err := r.consumeUntil(ctx, complete, 0, handle)
		pcancel(nil)
		<-sent
		if perr := context.Cause(pctx); perr != nil && !errors.Is(perr, context.Canceled) && err == nil {
			err = perr
		}
		return err
	})

	mu.Lock()
	defer mu.Unlock()
	res.Received = len(lat)
	res.SentRate = rate(int(published.Load()), sentTime)
	res.Duplicates = dup
	res.P50, res.P99, res.Max = Percentiles(lat)
	if err == nil && res.Received < total {
		err = fmt.Errorf("received %d of %d messages", res.Received, total)
	}
	return err
}

// offer publishes total messages at cfg.Rate from one producer, open loop: message i
// is due at start + i/rate and carries that scheduled time (so latency counts from
// it, whatever held the send back), and up to cfg.MaxPending publishes may await
// confirmation at once.
func (r *runner) offer(ctx context.Context, total int, published *atomic.Int64, fail context.CancelCauseFunc) time.Duration {
	stop := r.track("offer", total, published)
	defer stop()
	inflight := make(chan struct{}, max(r.cfg.MaxPending, 1))
	interval := time.Duration(float64(time.Second) / float64(r.cfg.Rate))
	var wg sync.WaitGroup
	start := time.Now()
	for i := range total {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		select {
		case inflight <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-inflight }()
			if err := r.b.Publish(ctx, NewPayload(uint64(i), due, r.cfg.PayloadSize)); err != nil {
				fail(fmt.Errorf("publish: %w", err))
				return
			}
			published.Add(1)
		})
	}
	wg.Wait()
	return time.Since(start)
}

// Percentiles returns the 50th and 99th percentile (nearest rank) and the maximum of
// d, or zeros when d is empty. It sorts d.
func Percentiles(d []time.Duration) (p50, p99, maxd time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(d)))) - 1
		return d[min(max(i, 0), len(d)-1)]
	}
	return rank(0.50), rank(0.99), d[len(d)-1]
}

func (r *runner) s3(ctx context.Context, res *Result) error {
	n := r.cfg.Messages
	res.Messages = n
	pt, err := r.publishAll(ctx, n)
	res.PublishTime, res.PublishRate = pt, rate(n, pt)
	if err != nil {
		return err
	}
	led := newLedger(n)
	var acked atomic.Int64
	complete := make(chan struct{})
	stop := r.track("consume", n, &acked)
	ct, err := r.consumeUntil(ctx, complete, r.cfg.Drain, func(ctx context.Context, m Msg) error {
		id, _, err := ParsePayload(m.Payload())
		if err != nil || id >= uint64(n) {
			return fmt.Errorf("%w: %.40q", ErrPayload, m.Payload())
		}
		led.mu.Lock()
		nack := led.nacks[id] == 0 && led.acks[id] == 0
		if nack {
			led.nacks[id]++
		}
		led.mu.Unlock()
		if nack {
			if err := m.Nack(ctx); err != nil {
				return ackErr(ctx, err)
			}
			return nil
		}
		if err := m.Ack(ctx); err != nil {
			return ackErr(ctx, err)
		}
		led.mu.Lock()
		led.acks[id]++
		first := led.acks[id] == 1
		led.mu.Unlock()
		if first && acked.Add(1) == int64(n) {
			close(complete)
		}
		return nil
	})
	stop()
	res.ConsumeTime, res.ConsumeRate = ct, rate(int(acked.Load()), ct)
	res.Violations, res.Duplicates = led.check()
	return err
}

// maxViolations caps the violations listed in a Result; the count is always exact.
const maxViolations = 10

// check returns the S3 violations: a message never acked, acked more than once, or
// nacked other than once.
func (l *ledger) check() (violations []string, duplicates int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var missing, extra, badNack int
	add := func(format string, args ...any) {
		if len(violations) < maxViolations {
			violations = append(violations, fmt.Sprintf(format, args...))
		}
	}
	for id := range l.acks {
		switch a := l.acks[id]; {
		case a == 0:
			missing++
			add("message %d never acked", id)
		case a > 1:
			extra++
			duplicates += int(a) - 1
			add("message %d acked %d times", id, a)
		}
		if l.nacks[id] != 1 {
			badNack++
			add("message %d nacked %d times", id, l.nacks[id])
		}
	}
	if total := missing + extra + badNack; total > len(violations) {
		violations = append(violations, fmt.Sprintf("%d violations in all: %d never acked, %d acked twice or more, %d not nacked exactly once",
			total, missing, extra, badNack))
	}
	return violations, duplicates
}
