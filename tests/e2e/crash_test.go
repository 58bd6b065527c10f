package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/testutil"
)

// crashWatch is the consume watch of the crash test. The short ack_timeout lets leases
// held when the server was killed run out quickly after the restart (they keep their
// deadline across it); max_redeliveries is high so that only a consumer's
// NACK [no_retry] dead-letters a message.
const crashWatch = `WATCH m: Msg [mode: consume] [group: "crash"] [ack_timeout: 2s] [max_redeliveries: 50] [dead_letter: #crash_dlq] [max_in_flight: 16] RETURN m`

// Load of the crash test.
const (
	crashKills      = 3
	crashPublishers = 4
	crashConsumers  = 4
	// A kill comes once the server has acknowledged this many publishes and ACKs since
	// it (re)started, or after crashPhaseMax, whichever is first.
	crashPublishesPerPhase = 600
	crashAcksPerPhase      = 300
	crashPhaseMax          = 20 * time.Second
	// Publishers stop after this many acknowledged publishes in all.
	crashMaxPublishes = 5000
)

// crashVerdict is what the consumers do with a delivery of message k: every 11th
// message is rejected (NACK [no_retry]), every 5th other one is NACKed on its first
// attempt, everything else is acked.
func crashVerdict(k int64, attempt int) string {
	switch {
	case k%11 == 0:
		return `NACK %q [no_retry]`
	case k%5 == 0 && attempt == 1:
		return `NACK %q`
	}
	return `ACK %q`
}

// crashLedger records what the server acknowledged, per message id.
type crashLedger struct {
	mu        sync.Mutex
	published map[string]int64    // message id → k, for every publish answered 200
	acks      map[string][]string // message id → delivery ids whose ACK answered 200
	rejects   map[string][]string // message id → delivery ids whose NACK [no_retry] answered 200
	// message id → delivery ids of ACKs whose answer never came because the server was
	// killed: such an ACK may have committed, and then the message is rightly gone.
	unknownAcks map[string][]string
	problems    []string // answers no run may give

	publishes, ackCount atomic.Int64 // totals, for the kill schedule
	wirePublishes       atomic.Int64 // of publishes, those acknowledged on the binary wire
	wireAcks            atomic.Int64 // of ACKs, those acknowledged on the binary wire
	nacks, stale        atomic.Int64 // NACKs answered 200; settlements answered E8004
	lostAnswers         atomic.Int64 // requests whose answer never came (the server died)
	refused             atomic.Int64 // settlements that found no server listening
	deliveries          atomic.Int64
}

func (l *crashLedger) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

// crashCluster is the one server of the test, restarted on the same data directory.
// Its URL changes with every restart (port 0); "" while it is down.
type crashCluster struct {
	t   *testing.T
	dir string
	url atomic.Pointer[string]

	mu   sync.Mutex
	all  []*testutil.Server
	live *testutil.Server
}

func (c *crashCluster) start() {
	c.t.Helper()
	s, err := testutil.StartServer(binary, c.dir, startTimeout)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.all = append(c.all, s)
	c.live = s
	c.mu.Unlock()
	u := s.URL()
	c.url.Store(&u)
}

// kill sends SIGKILL to the running server and waits for it to be gone.
func (c *crashCluster) kill() {
	c.mu.Lock()
	s := c.live
	c.live = nil
	c.mu.Unlock()
	empty := ""
	c.url.Store(&empty)
	s.Kill()
}

// current is the URL of the running server, "" while it is down.
func (c *crashCluster) current() string {
	if p := c.url.Load(); p != nil {
		return *p
	}
	return ""
}

// cleanup kills what still runs and, if the test failed, shows each run's log without
// the per-request lines.
func (c *crashCluster) cleanup() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.all {
		if !s.Exited() {
			s.Kill()
		}
		if c.t.Failed() {
			var keep []string
			for _, line := range strings.Split(s.Log(), "\n") {
				if line != "" && !strings.Contains(line, `"msg":"http request"`) {
					keep = append(keep, line)
				}
			}
			c.t.Logf("server run %d log (without requests):\n%s", i+1, strings.Join(keep, "\n"))
		}
	}
}

// publisher spawns messages until stop is closed, recording every acknowledged one.
func publisher(c *crashCluster, l *crashLedger, next *atomic.Int64, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		u := c.current()
		if u == "" || l.publishes.Load() >= crashMaxPublishes {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		k := next.Add(1)
		r, err := query(u, `SPAWN m: Msg { k = $k } RETURNING m.id`, map[string]any{"k": k})
		if err != nil {
			if !errors.Is(err, syscall.ECONNREFUSED) {
				l.lostAnswers.Add(1) // maybe committed, maybe not: not acknowledged
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if r.Status != 200 || len(r.Results) != 1 || len(r.Results[0].Rows) != 1 {
			l.problem("publish k=%d: status %d, error %+v, results %+v", k, r.Status, r.Error, r.Results)
			continue
		}
		var id string
		if err := json.Unmarshal(r.Results[0].Rows[0][0], &id); err != nil || id == "" {
			l.problem("publish k=%d: id %s: %v", k, r.Results[0].Rows[0][0], err)
			continue
		}
		l.recordPublish(id, k)
	}
}

// recordPublish records the acknowledged publish of message k as node id.
func (l *crashLedger) recordPublish(id string, k int64) {
	l.mu.Lock()
	if prev, dup := l.published[id]; dup {
		l.problems = append(l.problems, fmt.Sprintf("publishes k=%d and k=%d both answered id %s", prev, k, id))
	}
	l.published[id] = k
	l.mu.Unlock()
	l.publishes.Add(1)
}

// consumer reads the crash watch, reconnecting to whichever server runs, and settles
// every delivery per crashVerdict until ctx is done.
func consumer(ctx context.Context, c *crashCluster, l *crashLedger, verdict func(int64, int) string) {
	for ctx.Err() == nil {
		u := c.current()
		if u == "" {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		st, err := openStream(ctx, u, crashWatch)
		if err != nil {
			var se *statusError
			if errors.As(err, &se) {
				l.problem("open watch: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for ev := range st.Events {
			if ev.Type != "consumed" {
				continue // timeout events: the lease is gone, nothing to do
			}
			l.deliveries.Add(1)
			var m struct {
				ID   string `json:"id"`
				Type string `json:"_type"`
				K    int64  `json:"k"`
			}
			if err := json.Unmarshal(ev.Match, &m); err != nil || m.ID == "" || m.Type != "Msg" {
				l.problem("delivery %s: match %s (%v)", ev.DeliveryID, ev.Match, err)
				continue
			}
			how := verdict(m.K, ev.Attempt)
			stmt := fmt.Sprintf(how, ev.DeliveryID)
			// Half of the settlements go as statements, half through POST /v1/settle.
			var r *response
			if m.K%2 == 0 {
				r, err = query(u, stmt, nil)
			} else {
				r, err = settleAsBatch(u, stmt, ev.DeliveryID)
			}
			switch {
			case err != nil && errors.Is(err, syscall.ECONNREFUSED):
				// The server was already gone: the settlement never reached it.
				l.refused.Add(1)
			case err != nil:
				l.recordLost(how, m.ID, ev.DeliveryID)
			case r.Status == 200:
				l.recordSettled(how, m.ID, ev.DeliveryID)
			case r.Status == 404 && r.Error != nil && r.Error.Code == "E8004":
				l.stale.Add(1) // the lease ran out first: allowed, changes nothing
			default:
				l.problem("%s (message %s, attempt %d): status %d, error %+v", stmt, m.ID, ev.Attempt, r.Status, r.Error)
			}
		}
		st.Close()
	}
}

// recordSettled records the settlement how (a crashVerdict) of delivery did of message
// id, answered as done.
func (l *crashLedger) recordSettled(how, id, did string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch how {
	case `ACK %q`:
		l.acks[id] = append(l.acks[id], did)
		l.ackCount.Add(1)
	case `NACK %q`:
		l.nacks.Add(1)
	default:
		l.rejects[id] = append(l.rejects[id], did)
	}
}

// recordLost records a settlement whose answer never came: it may have committed.
func (l *crashLedger) recordLost(how, id, did string) {
	l.lostAnswers.Add(1)
	if how == `ACK %q` {
		l.mu.Lock()
		l.unknownAcks[id] = append(l.unknownAcks[id], did)
		l.mu.Unlock()
	}
}

// settleAsBatch sends the settlement stmt stands for (ACK, NACK, NACK [no_retry]) as a
// batch of one to POST /v1/settle, and answers in the shape of a query: 200, or the
// settlement's own error with the status of its code (404 for E8004).
func settleAsBatch(u, stmt, id string) (*response, error) {
	action := "ack"
	switch {
	case strings.HasSuffix(stmt, "[no_retry]"):
		action = "reject"
	case strings.HasPrefix(stmt, "NACK"):
		action = "nack"
	}
	body, _ := json.Marshal(map[string]any{"settlements": []map[string]string{{"delivery_id": id, "action": action}}})
	resp, err := httpClient.Post(u+"/v1/settle", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Results []struct {
			OK    bool `json:"ok"`
			Error *struct {
				Code, Name, Message string
			} `json:"error"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("settle: status %d, undecodable body: %v", resp.StatusCode, err)
	}
	r := &response{Status: resp.StatusCode}
	if resp.StatusCode == 200 && len(out.Results) == 1 && out.Results[0].Error != nil {
		e := out.Results[0].Error
		r.Status = 500
		if e.Code == "E8004" {
			r.Status = 404
		}
		r.Error = &struct {
			Code    string `json:"code"`
			Name    string `json:"name"`
			Message string `json:"message"`
			Line    int    `json:"line"`
			Column  int    `json:"column"`
		}{Code: e.Code, Name: e.Name, Message: e.Message}
	}
	return r, nil
}

// graphState is what the server holds: the Msg nodes and the dead letters by subject.
func graphState(t *testing.T, u string) (present map[string]bool, dead map[string]string) {
	t.Helper()
	present = ids(t, u, "Msg")
	dead = map[string]string{}
	r := mustQuery(t, u, `MATCH d: _DeadLetter RETURN d.subject_id, d.failure_reason`)
	for _, row := range r.Results[0].Rows {
		var id, reason string
		if json.Unmarshal(row[0], &id) != nil || json.Unmarshal(row[1], &reason) != nil {
			t.Fatalf("dead letter row %s", rowString(row))
		}
		if _, dup := dead[id]; dup {
			t.Errorf("two dead letters for message %s", id)
		}
		dead[id] = reason
	}
	return present, dead
}

// TestConsumeKillNine runs publishers and consumers against the real binary while it is
// killed with SIGKILL several times and restarted on the same data. Afterwards every
// message whose publish was acknowledged was acked by a consumer, is still a node, or is
// a dead letter — and no message was acked twice, nor both acked and dead-lettered.
func TestConsumeKillNine(t *testing.T) {
	c := &crashCluster{t: t, dir: t.TempDir()}
	t.Cleanup(c.cleanup)
	c.start()
	mustQuery(t, c.current(), `node Msg { k: Int [required] }`)
	mustQuery(t, c.current(), `SPAWN #crash_dlq: Bin {}`)

	l := &crashLedger{published: map[string]int64{}, acks: map[string][]string{}, rejects: map[string][]string{}, unknownAcks: map[string][]string{}}
	var (
		next  atomic.Int64
		stop  = make(chan struct{})
		pubWG sync.WaitGroup
		conWG sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Half of the load goes over HTTP and SSE, half over the Go client's binary wire.
	for i := range crashPublishers {
		if i%2 == 0 {
			pubWG.Go(func() { publisher(c, l, &next, stop) })
		} else {
			pubWG.Go(func() { wirePublisher(c, l, &next, stop) })
		}
	}
	for i := range crashConsumers {
		if i%2 == 0 {
			conWG.Go(func() { consumer(ctx, c, l, crashVerdict) })
		} else {
			conWG.Go(func() { wireConsumer(ctx, c, l, crashVerdict) })
		}
	}
	stopLoad := func() {
		close(stop)
		cancel()
		pubWG.Wait()
		conWG.Wait()
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("kill points seeded with %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for kill := 1; kill <= crashKills; kill++ {
		// Let the load make progress on this run, then kill at a random point of it.
		p0, a0 := l.publishes.Load(), l.ackCount.Load()
		wantP := p0 + crashPublishesPerPhase/2 + rng.Int64N(crashPublishesPerPhase)
		wantA := a0 + crashAcksPerPhase/2 + rng.Int64N(crashAcksPerPhase)
		deadline := time.Now().Add(crashPhaseMax)
		for (l.publishes.Load() < wantP || l.ackCount.Load() < wantA) && time.Now().Before(deadline) &&
			l.publishes.Load() < crashMaxPublishes {
			time.Sleep(5 * time.Millisecond)
		}
		dp, da := l.publishes.Load()-p0, l.ackCount.Load()-a0
		t.Logf("kill %d: %d publishes and %d ACKs acknowledged in this run", kill, dp, da)
		if dp == 0 || da == 0 {
			// Publishers and consumers reconnect to every restarted server.
			t.Errorf("run %d: %d publishes and %d ACKs acknowledged within %v", kill, dp, da, crashPhaseMax)
		}
		c.kill()
		if kill == crashKills {
			// The last kill ends the load: nothing runs while the final state is read.
			stopLoad()
		}
		c.start()
	}
	u := c.current()

	// The load has stopped (stopLoad waited for every worker), so the ledger is read
	// without its lock until the drain below starts a consumer again.
	t.Logf("acknowledged: %d publishes, %d ACKs, %d NACKs, %d rejects; %d deliveries, %d stale settlements (E8004), %d answers lost to kills, %d settlements refused while the server was down",
		len(l.published), l.ackCount.Load(), l.nacks.Load(), len(l.rejects), l.deliveries.Load(), l.stale.Load(), l.lostAnswers.Load(), l.refused.Load())
	t.Logf("over the binary wire: %d publishes, %d ACKs", l.wirePublishes.Load(), l.wireAcks.Load())
	if l.wirePublishes.Load() == 0 || l.wireAcks.Load() == 0 {
		t.Errorf("the binary wire carried %d acknowledged publishes and %d ACKs: half the load should go over it", l.wirePublishes.Load(), l.wireAcks.Load())
	}
	if len(l.problems) > 0 {
		t.Errorf("%d unexpected answers; the first: %s", len(l.problems), strings.Join(l.problems[:min(len(l.problems), 10)], "\n"))
	}
	if l.publishes.Load() == 0 || l.ackCount.Load() == 0 {
		t.Fatalf("no load: %d publishes, %d ACKs acknowledged", l.publishes.Load(), l.ackCount.Load())
	}

	// After the final restart: every acknowledged publish is accounted for.
	present, dead := graphState(t, u)
	check := func(phase string) {
		t.Helper()
		var violations []string
		ids := make([]string, 0, len(l.published))
		for id := range l.published {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			k := l.published[id]
			acks, rejects := l.acks[id], l.rejects[id]
			reason, isDead := dead[id]
			switch {
			case len(acks) == 0 && !present[id] && !isDead && len(l.unknownAcks[id]) == 0:
				violations = append(violations, fmt.Sprintf("message %s (k=%d) lost: never acked, not present, no dead letter", id, k))
			case len(acks) > 1:
				violations = append(violations, fmt.Sprintf("message %s (k=%d) acked twice, by deliveries %v", id, k, acks))
			case len(acks) > 0 && present[id]:
				violations = append(violations, fmt.Sprintf("message %s (k=%d) acked by %v but still present", id, k, acks))
			case len(acks) > 0 && (isDead || len(rejects) > 0):
				violations = append(violations, fmt.Sprintf("message %s (k=%d) both acked (%v) and dead-lettered (%q, rejects %v)", id, k, acks, reason, rejects))
			case len(rejects) > 1:
				violations = append(violations, fmt.Sprintf("message %s (k=%d) rejected twice, by deliveries %v", id, k, rejects))
			case len(rejects) > 0 && (present[id] || !isDead):
				violations = append(violations, fmt.Sprintf("message %s (k=%d) rejected by %v but present=%v, dead letter=%v", id, k, rejects, present[id], isDead))
			case isDead && reason == "no_retry" && k%11 != 0:
				violations = append(violations, fmt.Sprintf("message %s (k=%d) dead-lettered as no_retry, but no consumer rejects it", id, k))
			case isDead && reason != "no_retry":
				// Not a loss: more than max_redeliveries deliveries (kills, timeouts).
				t.Logf("message %s (k=%d) dead-lettered with reason %q", id, k, reason)
			}
		}
		if len(violations) > 0 {
			t.Fatalf("%s: %d violations; the first:\n%s", phase, len(violations), strings.Join(violations[:min(len(violations), 20)], "\n"))
		}
	}
	check("after the last restart")
	waiting, ackedUnanswered := 0, 0
	for id := range l.published {
		switch {
		case present[id]:
			waiting++
		case len(l.acks[id]) == 0 && dead[id] == "":
			ackedUnanswered++ // gone by an ACK whose answer the kill cut off
		}
	}
	t.Logf("after the last restart: %d acknowledged messages still present, %d dead letters, %d gone by an ACK whose answer was lost (of %d such ACKs)",
		waiting, len(dead), ackedUnanswered, len(l.unknownAcks))

	// Drain: one consumer acks whatever is left (leases held at the last kill come back
	// once their 2 s deadline passes), until no Msg is left.
	dctx, dcancel := context.WithCancel(context.Background())
	var dwg sync.WaitGroup
	dwg.Go(func() {
		consumer(dctx, c, l, func(int64, int) string { return `ACK %q` })
	})
	drained := false
	for deadline := time.Now().Add(eventWait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if len(ids(t, u, "Msg")) == 0 {
			drained = true
			break
		}
	}
	dcancel()
	dwg.Wait()
	if !drained {
		t.Fatalf("messages left after draining for %v: %v", eventWait, ids(t, u, "Msg"))
	}
	if len(l.problems) > 0 {
		t.Fatalf("%d unexpected answers; the first: %s", len(l.problems), strings.Join(l.problems[:min(len(l.problems), 10)], "\n"))
	}
	present, dead = graphState(t, u)
	check("after draining")
	for id := range l.published {
		if len(l.acks[id]) == 0 && len(l.unknownAcks[id]) == 0 && dead[id] == "" {
			t.Fatalf("message %s neither acked nor dead-lettered after draining", id)
		}
	}
}

// TestConsumeLeaseSurvivesKillNine checks durable leases across SIGKILL: a lease whose
// deadline is still ahead settles with its old delivery id after the restart, and a
// lease that ran out meanwhile is redelivered, its old id answering E8004.
func TestConsumeLeaseSurvivesKillNine(t *testing.T) {
	c := &crashCluster{t: t, dir: t.TempDir()}
	t.Cleanup(c.cleanup)
	c.start()
	const (
		keepWatch   = `WATCH j: Keep [mode: consume] [ack_timeout: 60s] RETURN j`
		expireWatch = `WATCH j: Expire [mode: consume] [ack_timeout: 1s] [max_redeliveries: 100] RETURN j`
	)
	u := c.current()
	mustQuery(t, u, `SPAWN #kept: Keep {}; SPAWN #expired: Expire {}`)
	keep, expire := mustOpen(t, u, keepWatch), mustOpen(t, u, expireWatch)
	k1, e1 := keep.nextConsumed(t), expire.nextConsumed(t)
	if k1.subjectID() != "kept" || e1.subjectID() != "expired" {
		t.Fatalf("deliveries %+v, %+v", k1, e1)
	}

	c.kill()
	c.start()
	u = c.current()

	// The 60 s lease kept its deadline: its id still settles.
	mustSettle(t, u, "ACK", k1.DeliveryID, "")
	if ids(t, u, "Keep")["kept"] {
		t.Fatalf("kept still exists after its ACK")
	}
	wantInvalidDelivery(t, u, "ACK", k1.DeliveryID, "")

	// The 1 s lease runs out (during or after the restart): the job comes back to a new
	// stream of the same watch, and the old id is spent.
	st := mustOpen(t, u, expireWatch)
	cur := st.nextConsumed(t)
	if cur.subjectID() != "expired" || cur.Attempt < 2 || cur.DeliveryID == e1.DeliveryID {
		t.Fatalf("redelivery after the restart %+v, want expired with attempt ≥ 2 and a new id", cur)
	}
	wantInvalidDelivery(t, u, "ACK", e1.DeliveryID, "")
	if !ids(t, u, "Expire")["expired"] {
		t.Fatalf("the stale ACK deleted the redelivered message")
	}
	for {
		r := settle(t, u, "ACK", cur.DeliveryID, "")
		if r.Status == 200 {
			break
		}
		if r.Error == nil || r.Error.Code != "E8004" {
			t.Fatalf("ACK %s: status %d %+v", cur.DeliveryID, r.Status, r.Error)
		}
		// On a slow machine this lease ran out too; the next delivery settles it.
		for ev := st.next(t); ; ev = st.next(t) {
			if ev.Type == "consumed" {
				cur = ev
				break
			}
		}
	}
	if ids(t, u, "Expire")["expired"] {
		t.Fatalf("expired still exists after its ACK")
	}
}
