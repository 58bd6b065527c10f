package delivery_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/pebblestore"
	"github.com/herald-mq/herald/watch"
)

func openService(t *testing.T, cfg delivery.Config) (*engine.Engine, *delivery.Service) {
	t.Helper()
	return openServicePerSession(t, cfg, 0)
}

// openServicePerSession is openService with the engine's cap on a session's watches
// set to perSession (0: the default).
func openServicePerSession(t *testing.T, cfg delivery.Config, perSession int) (*engine.Engine, *delivery.Service) {
	t.Helper()
	st, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(context.Background(), engine.Config{Backend: st, Clock: clock.NewManual(time.Unix(1700000000, 0)), Logger: quiet, MaxWatchesPerSession: perSession, MaxWatchesPerPrincipal: perSession})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine, cfg.Logger = eng, quiet
	svc := delivery.New(cfg)
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = svc.Stop(context.Background())
		_ = eng.Close(context.Background())
	})
	return eng, svc
}

// TestConsumerLimits: beyond the per-session and server-wide caps, Consume answers E8006;
// a closed consumer frees its place.
func TestConsumerLimits(t *testing.T) {
	eng, svc := openServicePerSession(t, delivery.Config{MaxConsumers: 3}, 2)
	ctx := context.Background()
	sid, err := eng.OpenSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const w = `WATCH j: Job [mode: consume] RETURN j`
	a, err := svc.Consume(ctx, sid, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Consume(ctx, sid, w, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Consume(ctx, sid, w, nil); herald.CodeOf(err) != herald.CodeWatchLimitExceeded {
		t.Fatalf("third consumer of the session: err = %v, want E8006", err)
	}
	if _, err := svc.Consume(ctx, "", w, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Consume(ctx, "", w, nil); herald.CodeOf(err) != herald.CodeWatchLimitExceeded {
		t.Fatalf("fourth consumer of the server: err = %v, want E8006", err)
	}
	a.Close()
	if _, err := svc.Consume(ctx, sid, w, nil); err != nil {
		t.Fatalf("after a close there is room again: %v", err)
	}
}

// TestSessionLimitCountsBothModes: a session's cap on watches counts watch-mode streams
// and consume streams together (E8006), and a closed one of either mode frees a place.
func TestSessionLimitCountsBothModes(t *testing.T) {
	eng, svc := openServicePerSession(t, delivery.Config{}, 2)
	wat := watch.New(watch.Config{Engine: eng, Logger: quiet})
	if err := wat.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wat.Stop(context.Background()) })
	ctx := context.Background()
	sid, err := eng.OpenSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := svc.Consume(ctx, sid, `WATCH j: Job [mode: consume] RETURN j`, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := wat.Open(ctx, sid, `WATCH j: Job RETURN j`, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wat.Open(ctx, sid, `WATCH j: Job RETURN j`, nil, 0); herald.CodeOf(err) != herald.CodeWatchLimitExceeded {
		t.Fatalf("a third watch (watch mode): err = %v, want E8006", err)
	}
	if _, err := svc.Consume(ctx, sid, `WATCH j: Job [mode: consume] RETURN j`, nil); herald.CodeOf(err) != herald.CodeWatchLimitExceeded {
		t.Fatalf("a third watch (consume mode): err = %v, want E8006", err)
	}
	c.Close()
	if _, err := wat.Open(ctx, sid, `WATCH j: Job RETURN j`, nil, 0); err != nil {
		t.Fatalf("after closing the consume stream: %v", err)
	}
	w.Close()
	wat.Flush()
	if _, err := svc.Consume(ctx, sid, `WATCH j: Job [mode: consume] RETURN j`, nil); err != nil {
		t.Fatalf("after closing the watch-mode stream: %v", err)
	}
}

// TestPrincipalLimitCountsBothModes: a principal's cap on watches counts its streams of
// both modes, with or without sessions; another principal has its own.
func TestPrincipalLimitCountsBothModes(t *testing.T) {
	eng, svc := openServicePerSession(t, delivery.Config{}, 2)
	wat := watch.New(watch.Config{Engine: eng, Logger: quiet})
	if err := wat.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wat.Stop(context.Background()) })
	ann := herald.WithPrincipal(context.Background(), &herald.Principal{Name: "ann", Grants: []string{"admin"}})
	bob := herald.WithPrincipal(context.Background(), &herald.Principal{Name: "bob", Grants: []string{"admin"}})
	c, err := svc.Consume(ann, "", `WATCH j: Job [mode: consume] RETURN j`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wat.Open(ann, "", `WATCH j: Job RETURN j`, nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := wat.Open(ann, "", `WATCH j: Job RETURN j`, nil, 0); herald.CodeOf(err) != herald.CodeWatchLimitExceeded {
		t.Fatalf("ann's third watch: err = %v, want E8006", err)
	}
	if _, err := svc.Consume(bob, "", `WATCH j: Job [mode: consume] RETURN j`, nil); err != nil {
		t.Fatalf("bob's first watch: %v", err)
	}
	c.Close()
	if _, err := svc.Consume(ann, "", `WATCH j: Job [mode: consume] RETURN j`, nil); err != nil {
		t.Fatalf("after ann closed one: %v", err)
	}
}

// TestConsumeAsSessionActor: a consume watch opened with a session id resolves #self,
// current_actor() and current_session() to the session's.
func TestConsumeAsSessionActor(t *testing.T) {
	eng, svc := openService(t, delivery.Config{})
	ctx := context.Background()
	if _, err := eng.Exec(ctx, "", `SPAWN #bob: Actor {} SPAWN #ann: Actor {}
		SPAWN m: Message { body = "for bob" } LINK inbox(#bob, m)
		SPAWN n: Message { body = "for ann" } LINK inbox(#ann, n)`, nil); err != nil {
		t.Fatal(err)
	}
	const w = `WATCH m: Message, inbox(#self, m) [mode: consume] RETURN m.body`
	if _, err := svc.Consume(ctx, "", w, nil); herald.CodeOf(err) != herald.CodeSession {
		t.Fatalf("without a session: err = %v, want E3003", err)
	}
	sid, _ := eng.OpenSession(context.Background())
	if _, err := eng.Exec(ctx, sid, `BEGIN SESSION AS #ann`, nil); err != nil {
		t.Fatal(err)
	}
	st, err := svc.Consume(ctx, sid, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc.Flush()
	ev := <-st.Events()
	if got := ev.Match.MapGet("m.body").AsString(); got != "for ann" {
		t.Fatalf("ann got %q", got)
	}
	select {
	case ev := <-st.Events():
		t.Fatalf("unexpected second event %+v", ev)
	default:
	}

	// current_actor() and current_session() in WHERE and filter are the session's too.
	if _, err := eng.Exec(ctx, sid, `SPAWN n: Note { to = "ann", sess = current_session(), body = "mine" }
		SPAWN n: Note { to = "ann", body = "no session" } SPAWN n: Note { to = "bob", sess = current_session(), body = "bob's" }`, nil); err != nil {
		t.Fatal(err)
	}
	notes, err := svc.Consume(ctx, sid, `WATCH n: Note WHERE n.sess = current_session() [mode: consume, filter: n.to = current_actor()] RETURN n.body`, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc.Flush()
	ev = <-notes.Events()
	if got := ev.Match.MapGet("n.body").AsString(); got != "mine" {
		t.Fatalf("the session's consumer got %q", got)
	}
	select {
	case ev := <-notes.Events():
		t.Fatalf("unexpected second note %+v", ev)
	default:
	}
}

// TestLease: a pull consumer leases up to n ready messages at once, in order; the
// leases outlive the call and settle by delivery id; expired ones come back.
func TestLease(t *testing.T) {
	eng, svc := openService(t, delivery.Config{})
	ctx := context.Background()
	if _, err := eng.Exec(ctx, "", `SPAWN #a: Item { p = 2 } SPAWN #b: Item { p = 0 } SPAWN #c: Item { p = 1 }`, nil); err != nil {
		t.Fatal(err)
	}
	const w = `WATCH i: Item [mode: consume, group: "pull", ack_timeout: 10s, ordering: attribute(i.p ASC)] RETURN i.id`
	evs, err := svc.Lease(ctx, "", w, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Match.MapGet("i.id").AsString() != "b" || evs[1].Match.MapGet("i.id").AsString() != "c" {
		t.Fatalf("first pull: %+v", evs)
	}
	more, _ := svc.Lease(ctx, "", w, nil, 5)
	if len(more) != 1 || more[0].Match.MapGet("i.id").AsString() != "a" {
		t.Fatalf("second pull: %+v", more)
	}
	if none, _ := svc.Lease(ctx, "", w, nil, 5); len(none) != 0 {
		t.Fatalf("everything is leased, got %+v", none)
	}
	if err := svc.Ack(ctx, evs[0].DeliveryID); err != nil {
		t.Fatal(err)
	}
	if err := svc.Nack(ctx, evs[1].DeliveryID, delivery.NackOptions{}); err != nil {
		t.Fatal(err)
	}
	back, _ := svc.Lease(ctx, "", w, nil, 5)
	if len(back) != 1 || back[0].Match.MapGet("i.id").AsString() != "c" || back[0].Attempt != 2 {
		t.Fatalf("after NACK: %+v", back)
	}
}

// TestLeaseOf: the current lease of a message can be found by the message's id, as a
// handle (the hash of its delivery id) that settles it.
func TestLeaseOf(t *testing.T) {
	eng, svc := openService(t, delivery.Config{})
	ctx := context.Background()
	if _, err := eng.Exec(ctx, "", `SPAWN #m: Msg {}`, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := svc.LeaseOf("m"); ok {
		t.Fatal("a message that is not leased has no delivery")
	}
	evs, err := svc.Lease(ctx, "", `WATCH m: Msg [mode: consume, group: "g"] RETURN m`, nil, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("lease: %v %v", evs, err)
	}
	h, _, ok := svc.LeaseOf("m")
	if !ok || h != delivery.HandleOf(evs[0].DeliveryID) {
		t.Fatalf("LeaseOf = %v %v, want the handle of %q", h, ok, evs[0].DeliveryID)
	}
	if r := svc.SettleHandles(ctx, []delivery.Handle{h}, delivery.Settle{Action: delivery.ActAck}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if _, _, ok := svc.LeaseOf("m"); ok {
		t.Fatal("an acked message has no delivery")
	}
}

// TestConcurrentChurn: consumers that come and go, settling what they get while others
// close mid-delivery, against a dispatcher that keeps leasing. Under -race this proves
// that the dispatcher's and settlements' writes read only state copied under the lock;
// afterwards every message is acked exactly once and nothing is left over.
func TestConcurrentChurn(t *testing.T) {
	eng, svc := openService(t, delivery.Config{})
	ctx := context.Background()
	const n = 200
	for i := range n {
		if _, err := eng.Exec(ctx, "", `SPAWN m: Churn { k = $k }`, map[string]herald.Value{"k": herald.Int(int64(i))}); err != nil {
			t.Fatal(err)
		}
	}
	const w = `WATCH m: Churn [mode: consume, group: "churn", buffer: 4, max_redeliveries: 1000] RETURN m.k`
	var mu sync.Mutex
	acked := map[int64]int{}
	worker := func(id int) error {
		for round := 0; ; round++ {
			mu.Lock()
			done := len(acked) == n
			mu.Unlock()
			if done {
				return nil
			}
			st, err := svc.Consume(ctx, "", w, nil)
			if err != nil {
				return err
			}
			// Take a few deliveries; settle some, extend or nack others, then leave with
			// the rest unsettled so that Close releases them.
			for j := 0; j < 3; j++ {
				svc.Flush()
				var ev delivery.Event
				select {
				case ev = <-st.Events():
				default:
					continue
				}
				if ev.Type != delivery.EventConsumed {
					continue
				}
				switch (id + round + j) % 4 {
				case 0, 1:
					if err := svc.Ack(ctx, ev.DeliveryID); err == nil {
						mu.Lock()
						acked[ev.Match.MapGet("m.k").AsInt()]++
						mu.Unlock()
					}
				case 2:
					_, _ = svc.Extend(ctx, ev.DeliveryID, time.Minute)
				case 3:
					_ = svc.Nack(ctx, ev.DeliveryID, delivery.NackOptions{})
				}
			}
			st.Close()
		}
	}
	// A second driver of dispatcher rounds, so that rounds overlap the workers' closes
	// and settlements.
	stop := make(chan struct{})
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		for {
			select {
			case <-stop:
				return
			default:
				svc.Flush()
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- worker(i) }()
	}
	wg.Wait()
	close(stop)
	<-flushed
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for k, c := range acked {
		if c != 1 {
			t.Errorf("message %d acked %d times", k, c)
		}
	}
	svc.Flush()
	res, err := eng.Exec(ctx, "", `MATCH m: Churn RETURN COUNT(m) MATCH l: _DeadLetter RETURN COUNT(l)`, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Results {
		if got := r.Rows[0][0].AsInt(); got != 0 {
			t.Errorf("statement %d: %d left over, want 0", i+1, got)
		}
	}
	if recs, err := delivery.Records(eng); err != nil || len(recs) != 0 {
		t.Errorf("delivery records left over: %+v %v", recs, err)
	}
}

// TestConsumePolicy: consume mode never takes a system type as its subject (an ACK would
// delete server state), and the server's policy denies the types it lists; E8001 both.
func TestConsumePolicy(t *testing.T) {
	eng, svc := openService(t, delivery.Config{Policy: herald.WatchPolicy{DenyTypes: []string{"Secret"}}})
	ctx := context.Background()
	if _, err := eng.Exec(ctx, "", `SPAWN #j: Job {}`, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`WATCH w: _Watch [mode: consume] RETURN w`,
		`WATCH d: _DeadLetter [mode: consume, group: "x"] RETURN d`,
		`WATCH s: Secret [mode: consume] RETURN s`,
		`WATCH j: Job, s: Secret, about(j, s) [mode: consume] RETURN j`,
	} {
		if _, err := svc.Consume(ctx, "", q, nil); herald.CodeOf(err) != herald.CodeWatchPatternDenied {
			t.Errorf("%s: %v, want E8001", q, err)
		}
	}
	// A user type with a system type elsewhere in the pattern is fine: only the subject
	// is deleted.
	st, err := svc.Consume(ctx, "", `WATCH j: Job [mode: consume] RETURN j`, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
}

// TestConsumeEvaluationLimits: a consume group's evaluation runs under the same limits
// as a MATCH: a join past the principal's rows-scanned limit is refused with E4012 when
// the group starts, and one whose client has gone stops with E4011 at once.
func TestConsumeEvaluationLimits(t *testing.T) {
	eng, svc := openService(t, delivery.Config{})
	var b strings.Builder
	for range 300 { // 90,000 bindings
		b.WriteString("SPAWN a: LA {} SPAWN b: LB {} ")
	}
	if _, err := eng.Exec(context.Background(), "", b.String(), nil); err != nil {
		t.Fatal(err)
	}
	const join = `WATCH a: LA, b: LB [mode: consume] RETURN a`
	p := &herald.Principal{Name: "p", Grants: []string{herald.ActAdmin}, MaxRowsScanned: 20_000}
	if _, err := svc.Consume(herald.WithPrincipal(context.Background(), p), "", join, nil); herald.CodeOf(err) != herald.CodeStatementLimit {
		t.Fatalf("a join past the principal's limit: err = %v, want E4012", err)
	}
	if _, err := svc.Consume(leftCtx{context.Background()}, "", join, nil); herald.CodeOf(err) != herald.CodeCancelled {
		t.Fatalf("a join whose client has gone: err = %v, want E4011", err)
	}
	c, err := svc.Consume(context.Background(), "", join, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestGroupBelongsToItsPrincipal: a named consume group is its creator's: another
// principal may not join it (E4013) — nor, through a handle of its own, alter or
// cancel it — while one with admin may.
func TestGroupBelongsToItsPrincipal(t *testing.T) {
	_, svc := openService(t, delivery.Config{})
	const w = `WATCH j: GJob [mode: consume, group: "gx"] RETURN j`
	alice := herald.WithPrincipal(context.Background(), &herald.Principal{Name: "alice", Grants: []string{"consume:GJob"}})
	bob := herald.WithPrincipal(context.Background(), &herald.Principal{Name: "bob", Grants: []string{"consume:GJob"}})
	root := herald.WithPrincipal(context.Background(), &herald.Principal{Name: "root", Grants: []string{herald.ActAdmin}})
	a, err := svc.Consume(alice, "", w, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := svc.Consume(bob, "", w, nil); herald.CodeOf(err) != herald.CodePermissionDenied {
		t.Fatalf("another principal joining the group: err = %v, want E4013", err)
	}
	r, err := svc.Consume(root, "", w, nil)
	if err != nil {
		t.Fatalf("admin joining the group: %v", err)
	}
	r.Close()
}

// leftCtx is the context of a client that has left by the time its group evaluates:
// Err says so, while Done — which the commit of the group's _Watch node before the
// evaluation waits on — stays open.
type leftCtx struct{ context.Context }

func (leftCtx) Err() error { return context.Canceled }
