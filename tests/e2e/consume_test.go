package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
)

// seedWatch is the consume watch of the seed's basic workflow, verbatim.
const seedWatch = `WATCH j: Job WHERE j.status = "pending" [mode: consume] [ack_timeout: 30s] [max_redeliveries: 3] [dead_letter: #failed_jobs] RETURN j`

// deadLetter is one row of the dead-letter query below.
type deadLetter struct {
	SubjectID, SubjectType, Reason string
	Attempts                       int
	Destination                    string
	OriginalMatch                  map[string]any
}

// deadLetters returns the _DeadLetter nodes linked to a destination, by subject id.
func deadLetters(t *testing.T, base string) map[string]deadLetter {
	t.Helper()
	r := mustQuery(t, base, `MATCH d: _DeadLetter, _dead_letter_destination(d, q) RETURN d.subject_id, d.subject_type, d.failure_reason, d.delivery_attempts, q.id, d.original_match`)
	out := map[string]deadLetter{}
	for _, row := range r.Results[0].Rows {
		var d deadLetter
		var orig string
		for i, dst := range []any{&d.SubjectID, &d.SubjectType, &d.Reason, &d.Attempts, &d.Destination, &orig} {
			if err := json.Unmarshal(row[i], dst); err != nil {
				t.Fatalf("dead letter row %s: column %d: %v", rowString(row), i, err)
			}
		}
		if err := json.Unmarshal([]byte(orig), &d.OriginalMatch); err != nil {
			t.Fatalf("dead letter original_match %q: %v", orig, err)
		}
		if _, dup := out[d.SubjectID]; dup {
			t.Fatalf("two dead letters for subject %s", d.SubjectID)
		}
		out[d.SubjectID] = d
	}
	return out
}

func rowString(row []json.RawMessage) string {
	b, _ := json.Marshal(row)
	return string(b)
}

// TestSeedBasicConsumeWorkflow is the seed's basic consume workflow over HTTP, as the
// acceptance list has it: the watch streams consumed events, ACK deletes the job, NACK
// redelivers it with attempt + 1, NACK [no_retry] dead-letters it to #failed_jobs,
// exhausting max_redeliveries dead-letters it too, and settling an id twice answers
// E8004.
func TestSeedBasicConsumeWorkflow(t *testing.T) {
	s := startServer(t, t.TempDir())
	u := s.URL()
	mustQuery(t, u, `SPAWN #failed_jobs: Bin {}`)
	// One commit each, so that arrival order is the order below.
	mustQuery(t, u, `SPAWN #job_ack: Job { status = "pending", payload = "a" }`)
	mustQuery(t, u, `SPAWN #job_nack: Job { status = "pending", payload = "b" }`)
	mustQuery(t, u, `SPAWN #job_dead: Job { status = "pending", payload = "c" }`)
	mustQuery(t, u, `SPAWN #job_done: Job { status = "done", payload = "d" }`)

	st := mustOpen(t, u, seedWatch)
	// The backlog: every pending job once, in arrival order; the done one never.
	got := map[string]event{}
	var order []string
	for range 3 {
		ev := st.nextConsumed(t)
		m, err := ev.subject()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := m["id"].(string)
		if m["_type"] != "Job" || m["status"] != "pending" || ev.Attempt != 1 {
			t.Fatalf("first delivery of %s: match %v, attempt %d", id, m, ev.Attempt)
		}
		if _, dup := got[id]; dup {
			t.Fatalf("job %s delivered twice before being settled", id)
		}
		got[id] = ev
		order = append(order, id)
	}
	if fmt.Sprint(order) != "[job_ack job_nack job_dead]" {
		t.Fatalf("backlog order %v, want arrival order", order)
	}
	if got["job_ack"].DeliveryID == got["job_nack"].DeliveryID || got["job_nack"].DeliveryID == got["job_dead"].DeliveryID {
		t.Fatalf("delivery ids are not unique: %v", got)
	}

	// ACK deletes the job; the same id again answers E8004 and changes nothing.
	ack := got["job_ack"].DeliveryID
	mustSettle(t, u, "ACK", ack, "")
	if ids(t, u, "Job")["job_ack"] {
		t.Fatalf("job_ack still exists after ACK")
	}
	wantInvalidDelivery(t, u, "ACK", ack, "")
	wantInvalidDelivery(t, u, "NACK", ack, "")
	wantInvalidDelivery(t, u, "ACK", "no-such-delivery", "")

	// NACK redelivers with attempt + 1 and a new delivery id; the old id is spent.
	nack := got["job_nack"].DeliveryID
	mustSettle(t, u, "NACK", nack, "")
	re := st.nextConsumed(t)
	if re.subjectID() != "job_nack" || re.Attempt != 2 || re.DeliveryID == nack {
		t.Fatalf("after NACK: redelivery of %s attempt %d id %s; want job_nack, attempt 2, a new id", re.subjectID(), re.Attempt, re.DeliveryID)
	}
	wantInvalidDelivery(t, u, "ACK", nack, "")
	if !ids(t, u, "Job")["job_nack"] {
		t.Fatalf("job_nack gone after a stale ACK")
	}

	// NACK [no_retry] dead-letters the job, linked to #failed_jobs.
	dead := got["job_dead"].DeliveryID
	mustSettle(t, u, "NACK", dead, " [no_retry]")
	wantInvalidDelivery(t, u, "ACK", dead, "")
	if ids(t, u, "Job")["job_dead"] {
		t.Fatalf("job_dead still a Job after NACK [no_retry]")
	}
	dl := deadLetters(t, u)
	d, ok := dl["job_dead"]
	if !ok || d.Reason != "no_retry" || d.Destination != "failed_jobs" || d.SubjectType != "Job" || d.Attempts != 1 ||
		d.OriginalMatch["payload"] != "c" {
		t.Fatalf("dead letter of job_dead: %+v (found %v)", d, ok)
	}

	// The redelivered job is acked with its new id.
	mustSettle(t, u, "ACK", re.DeliveryID, "")
	wantInvalidDelivery(t, u, "ACK", re.DeliveryID, "")

	// max_redeliveries: 3 allows four deliveries; the fourth NACK dead-letters the job.
	mustQuery(t, u, `SPAWN #job_flaky: Job { status = "pending", payload = "e" }`)
	for attempt := 1; attempt <= 4; attempt++ {
		ev := st.nextConsumed(t)
		if ev.subjectID() != "job_flaky" || ev.Attempt != attempt {
			t.Fatalf("delivery of %s attempt %d; want job_flaky attempt %d", ev.subjectID(), ev.Attempt, attempt)
		}
		mustSettle(t, u, "NACK", ev.DeliveryID, "")
	}
	d, ok = deadLetters(t, u)["job_flaky"]
	if !ok || d.Reason != "max_redeliveries_exceeded" || d.Attempts != 4 || d.Destination != "failed_jobs" {
		t.Fatalf("dead letter of job_flaky: %+v (found %v)", d, ok)
	}

	// Only the job that never matched is left.
	if left := ids(t, u, "Job"); len(left) != 1 || !left["job_done"] {
		t.Fatalf("jobs left: %v, want only job_done", left)
	}
	if n := len(deadLetters(t, u)); n != 2 {
		t.Fatalf("%d dead letters, want 2", n)
	}
	if got := metric(t, u, "herald_consume_dead_lettered_total"); got != "2" {
		t.Fatalf("herald_consume_dead_lettered_total = %q after two dead letters, want 2", got)
	}
}

// metric reads one unlabelled sample of /metrics.
func metric(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return ""
}

// Errors of the seed's error handling pattern.
var (
	errTransient = errors.New("transient failure")
	errPermanent = errors.New("permanent failure")
)

// TestSeedErrorHandlingPattern is the seed's error handling pattern with the Go client
// against the real binary: success → ACK, a transient failure → NACK (the NackOnError
// policy), a permanent one → NACK [no_retry] (herald.Reject), and a failure that never
// clears runs out of redeliveries.
func TestSeedErrorHandlingPattern(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*eventWait)
	defer cancel()
	c, err := client.Dial(ctx, s.URL(), client.WithTimeout(eventWait),
		client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Exec(ctx, `SPAWN #failed_jobs: Bin {}`, nil); err != nil {
		t.Fatal(err)
	}

	// kind says how the handler treats a job: "ok" succeeds, "transient" fails on its
	// first attempt only, "permanent" fails for good, "broken" fails every time with an
	// ordinary error.
	kinds := map[string]string{}
	for i, kind := range []string{"ok", "transient", "permanent", "broken", "ok", "transient", "permanent"} {
		id, err := c.Publish(ctx, "Job", map[string]any{"status": "pending", "kind": kind, "n": i})
		if err != nil {
			t.Fatal(err)
		}
		kinds[id] = kind
	}

	var (
		mu       sync.Mutex
		attempts = map[string][]int{} // job id → attempts seen by the handler
		badMatch []string
	)
	handler := func(ctx context.Context, m *client.Message) error {
		// RETURN j: the match is the node itself, its id, _type and attributes.
		id, _ := m.Match["id"].(string)
		mu.Lock()
		attempts[id] = append(attempts[id], m.Attempt)
		if kinds[id] == "" || m.Match["kind"] != kinds[id] || m.Match["_type"] != "Job" {
			badMatch = append(badMatch, fmt.Sprint(m.Match))
		}
		mu.Unlock()
		switch kinds[id] {
		case "transient":
			if m.Attempt == 1 {
				return fmt.Errorf("job %s: %w", id, errTransient)
			}
		case "permanent":
			return herald.Reject(fmt.Errorf("job %s: %w", id, errPermanent))
		case "broken":
			return errTransient
		}
		return nil
	}
	sub, err := c.Subscribe(ctx, seedWatch, handler, client.WithPolicy(client.NackOnError), client.WithConcurrency(2))
	if err != nil {
		t.Fatal(err)
	}

	// Settled: no pending job left, and every failure recorded as a dead letter.
	eventually(t, "every job settled", func() bool {
		return len(ids(t, s.URL(), "Job")) == 0 && len(deadLetters(t, s.URL())) == 3
	})
	closeCtx, closeCancel := context.WithTimeout(ctx, eventWait)
	defer closeCancel()
	if err := sub.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("the subscription ended on its own: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(badMatch) > 0 {
		t.Fatalf("unexpected matches: %v", badMatch)
	}
	dl := deadLetters(t, s.URL())
	for id, kind := range kinds {
		seen := attempts[id]
		sort.Ints(seen)
		var want []int
		switch kind {
		case "ok":
			want = []int{1}
		case "transient":
			want = []int{1, 2}
		case "permanent":
			want = []int{1}
		case "broken":
			want = []int{1, 2, 3, 4}
		}
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Errorf("%s job %s: attempts %v, want %v", kind, id, seen, want)
		}
		d, dead := dl[id]
		switch kind {
		case "ok", "transient":
			if dead {
				t.Errorf("%s job %s dead-lettered: %+v", kind, id, d)
			}
		case "permanent":
			if !dead || d.Reason != "no_retry" || d.Attempts != 1 || d.Destination != "failed_jobs" {
				t.Errorf("permanent job %s: dead letter %+v (found %v)", id, d, dead)
			}
		case "broken":
			if !dead || d.Reason != "max_redeliveries_exceeded" || d.Attempts != 4 || d.Destination != "failed_jobs" {
				t.Errorf("broken job %s: dead letter %+v (found %v)", id, d, dead)
			}
		}
	}
}

// groupWatch is the seed's competing-consumers watch, with a small max_in_flight so
// that both members of the group get work.
const groupWatch = `WATCH j: Job WHERE j.status = "pending" [mode: consume] [group: "workers"] [ack_timeout: 60s] [max_in_flight: 3] RETURN j`

// TestSeedCompetingConsumers runs the seed's competing consumers: two streams in group
// "workers" share the jobs and never hold the same one at the same time; a NACKed job
// goes to either; a closed stream's jobs are redelivered at once; an expired lease is
// redelivered and its late ACK answers E8004.
func TestSeedCompetingConsumers(t *testing.T) {
	// Each part runs on a server of its own, so that no stream of one part is still
	// registered when the next begins.
	t.Run("share", func(t *testing.T) {
		u := startServer(t, t.TempDir()).URL()
		a := mustOpen(t, u, groupWatch)
		b := mustOpen(t, u, groupWatch)
		const jobs = 30
		var spawn string
		for i := range jobs {
			spawn += fmt.Sprintf("SPAWN #share_%02d: Job { status = \"pending\", n = %d };\n", i, i)
		}
		mustQuery(t, u, spawn) // one commit: the backlog is spread over both members

		var (
			mu      sync.Mutex
			holder  = map[string]string{} // job → the member holding it now
			acked   = map[string]string{} // job → the member that acked it
			perMem  = map[string]int{}    // deliveries per member
			nacked  = map[string]bool{}
			errs    []string
			ackDone = make(chan struct{})
			once    sync.Once
		)
		fail := func(format string, args ...any) {
			mu.Lock()
			errs = append(errs, fmt.Sprintf(format, args...))
			mu.Unlock()
			once.Do(func() { close(ackDone) })
		}
		consume := func(name string, st *sseStream) {
			for {
				var ev event
				select {
				case e, ok := <-st.Events:
					if !ok {
						fail("member %s: stream ended: %v", name, st.Err())
						return
					}
					ev = e
				case <-ackDone:
					return
				}
				if ev.Type != "consumed" {
					fail("member %s: unexpected %s event %+v", name, ev.Type, ev)
					return
				}
				job := ev.subjectID()
				mu.Lock()
				if other, held := holder[job]; held {
					errs = append(errs, fmt.Sprintf("%s delivered to %s while %s holds it", job, name, other))
				}
				if by, done := acked[job]; done {
					errs = append(errs, fmt.Sprintf("%s delivered to %s after %s acked it", job, name, by))
				}
				holder[job] = name
				perMem[name]++
				// Every third job is NACKed once (the seed's worker B), the rest acked.
				verb := "ACK"
				var n int
				if _, err := fmt.Sscanf(job, "share_%d", &n); err == nil && n%3 == 0 && !nacked[job] {
					verb = "NACK"
					nacked[job] = true
				}
				// The member's hold ends when it sends the settlement: the server's lease
				// outlives that, so any overlap seen here is a real one.
				delete(holder, job)
				mu.Unlock()
				r, err := query(u, fmt.Sprintf("%s %q", verb, ev.DeliveryID), nil)
				if err != nil || r.Status != 200 {
					fail("member %s: %s %s: %v %+v", name, verb, job, err, r)
					return
				}
				if verb == "ACK" {
					mu.Lock()
					acked[job] = name
					n := len(acked)
					mu.Unlock()
					if n == jobs {
						once.Do(func() { close(ackDone) })
					}
				}
			}
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); consume("A", a) }()
		go func() { defer wg.Done(); consume("B", b) }()
		select {
		case <-ackDone:
		case <-time.After(eventWait):
			fail("not every job acked within %v", eventWait)
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("%d problems, first: %v", len(errs), errs[:min(len(errs), 10)])
		}
		if perMem["A"] == 0 || perMem["B"] == 0 {
			t.Fatalf("deliveries per member %v: the group did not share the work", perMem)
		}
		if len(nacked) == 0 {
			t.Fatalf("no job was NACKed")
		}
		if left := ids(t, u, "Job"); len(left) != 0 {
			t.Fatalf("jobs left after every ACK: %v", left)
		}
		t.Logf("deliveries per member %v, %d jobs NACKed once", perMem, len(nacked))
	})

	t.Run("close releases at once", func(t *testing.T) {
		u := startServer(t, t.TempDir()).URL()
		held := []string{"held_1", "held_2", "held_3"}
		a := mustOpen(t, u, groupWatch)
		mustQuery(t, u, `SPAWN #held_1: Job { status = "pending" }; SPAWN #held_2: Job { status = "pending" }; SPAWN #held_3: Job { status = "pending" }`)
		first := map[string]event{}
		for range held {
			ev := a.nextConsumed(t)
			first[ev.subjectID()] = ev
		}
		for _, job := range held {
			if first[job].Attempt != 1 {
				t.Fatalf("A's deliveries: %+v", first)
			}
		}
		// A is full (max_in_flight: 3). B joins, and a fourth job can only go to B; its
		// first delivery is that job, not one A holds.
		b := mustOpen(t, u, groupWatch)
		mustQuery(t, u, `SPAWN #free: Job { status = "pending" }`)
		ev := b.nextConsumed(t)
		if ev.subjectID() != "free" || ev.Attempt != 1 {
			t.Fatalf("B got %s (attempt %d) while A holds %v", ev.subjectID(), ev.Attempt, held)
		}
		mustSettle(t, u, "ACK", ev.DeliveryID, "")

		// Closing A releases its jobs to B well before their 60 s ack_timeout: the wait
		// below is bounded by eventWait, half of it.
		a.Close()
		re := map[string]event{}
		for range held {
			ev := b.nextConsumed(t)
			re[ev.subjectID()] = ev
		}
		for _, job := range held {
			ev, ok := re[job]
			if !ok || ev.Attempt != 1 || ev.Releases != 1 || ev.DeliveryID == first[job].DeliveryID {
				t.Fatalf("after A closed: %s redelivered %+v (found %v), want attempt 1 after 1 release, with a new id", job, ev, ok)
			}
			wantInvalidDelivery(t, u, "ACK", first[job].DeliveryID, "")
			mustSettle(t, u, "ACK", ev.DeliveryID, "")
		}
		if left := ids(t, u, "Job"); len(left) != 0 {
			t.Fatalf("jobs left: %v", left)
		}
	})

	t.Run("expired lease", func(t *testing.T) {
		u := startServer(t, t.TempDir()).URL()
		// A short ack_timeout, and room for many redeliveries: on a slow machine a
		// redelivered lease may expire again before the test acks it.
		const expiring = `WATCH j: Job WHERE j.status = "pending" [mode: consume] [group: "expiring"] [ack_timeout: 1s] [max_redeliveries: 100] RETURN j`
		st := mustOpen(t, u, expiring)
		mustQuery(t, u, `SPAWN #slow: Job { status = "pending" }`)
		d1 := st.nextConsumed(t)
		if d1.subjectID() != "slow" || d1.Attempt != 1 {
			t.Fatalf("first delivery %+v", d1)
		}
		// Not settled: the lease expires, the holder hears of it (a timeout event), and
		// the job comes back (in either order).
		var to, d2 event
		for to.Type == "" || d2.Type == "" {
			ev := st.next(t)
			switch {
			case ev.Type == "timeout" && to.Type == "":
				to = ev
			case ev.Type == "consumed" && d2.Type == "":
				d2 = ev
			default:
				t.Fatalf("unexpected event %+v", ev)
			}
		}
		if to.name != "timeout" || to.DeliveryID != d1.DeliveryID || to.Code != "E8003" {
			t.Fatalf("after the ack timeout: %+v, want a timeout event E8003 for %s", to, d1.DeliveryID)
		}
		if d2.subjectID() != "slow" || d2.Attempt != 2 || d2.DeliveryID == d1.DeliveryID {
			t.Fatalf("redelivery %+v, want slow attempt 2 with a new id", d2)
		}
		// The late ACK answers E8004 and leaves the redelivered job alone.
		wantInvalidDelivery(t, u, "ACK", d1.DeliveryID, "")
		if !ids(t, u, "Job")["slow"] {
			t.Fatalf("the late ACK deleted the redelivered job")
		}
		// The current delivery acks it (or, if that lease ran out too on a slow
		// machine, the next one does).
		cur := d2
		for {
			r := settle(t, u, "ACK", cur.DeliveryID, "")
			if r.Status == 200 {
				break
			}
			if r.Error == nil || r.Error.Code != "E8004" {
				t.Fatalf("ACK %s: status %d %+v", cur.DeliveryID, r.Status, r.Error)
			}
			for {
				ev := st.next(t)
				if ev.Type == "consumed" {
					if ev.subjectID() != "slow" || ev.Attempt <= cur.Attempt {
						t.Fatalf("redelivery %+v after attempt %d", ev, cur.Attempt)
					}
					cur = ev
					break
				}
			}
		}
		if ids(t, u, "Job")["slow"] {
			t.Fatalf("slow still exists after its ACK")
		}
	})
}
