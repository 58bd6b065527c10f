package e2e

// Watch-mode streams against the real binary over GET /v1/watch: the acceptance
// (initial, added, changed, removed), resume of a reliable watch after kill -9 with
// Last-Event-ID, and the seed document's dashboard and inbox examples.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// wevent is one watch-mode event as the server sends it.
type wevent struct {
	Type    string         `json:"type"`
	Match   map[string]any `json:"match"`
	Prev    map[string]any `json:"prev"`
	Count   int            `json:"count"`
	Seq     uint64         `json:"seq"`
	Tick    uint64         `json:"tick"`
	Code    string         `json:"code"`
	Message string         `json:"message"`

	name string // the SSE "event:" field
	id   string // the SSE "id:" field
}

// String is a compact form for comparisons and failure messages: type, then the match
// and prev with their keys sorted (encoding/json sorts map keys).
func (e wevent) String() string {
	s := e.Type
	if e.Match != nil {
		b, _ := json.Marshal(e.Match)
		s += " " + string(b)
	}
	if e.Prev != nil {
		b, _ := json.Marshal(e.Prev)
		s += " prev=" + string(b)
	}
	if e.Code != "" {
		s += " " + e.Code + " " + e.Message
	}
	return s
}

// wstream is one open watch-mode stream.
type wstream struct {
	events chan wevent
	cancel context.CancelFunc
	done   chan struct{}
	err    error  // valid once done is closed
	lastID string // the last SSE id read (or resumed after): what a client resumes after
}

// openWatchMode opens GET /v1/watch for a watch-mode statement, resuming after
// lastEventID when it is not empty, and returns once the server has answered 200.
func openWatchMode(t *testing.T, base, statement, lastEventID string) *wstream {
	t.Helper()
	return openWatchModeIn(t, base, "", statement, lastEventID)
}

// openWatchModeIn is openWatchMode in a server session (for handles and `#self`).
func openWatchModeIn(t *testing.T, base, session, statement, lastEventID string) *wstream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, watchURL(base, session, statement), nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	// The answer's headers come at once; bound the wait for them.
	timer := time.AfterFunc(eventWait, cancel)
	resp, err := streamClient.Do(req)
	timer.Stop()
	if err != nil {
		cancel()
		t.Fatalf("open %s: %v", statement, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		cancel()
		t.Fatalf("open %s: status %d: %s", statement, resp.StatusCode, b)
	}
	s := &wstream{events: make(chan wevent, 1024), cancel: cancel, done: make(chan struct{}), lastID: lastEventID}
	go func() {
		defer close(s.done)
		defer close(s.events)
		defer resp.Body.Close()
		s.err = readWatchEvents(ctx, resp.Body, s.events)
	}()
	t.Cleanup(s.close)
	return s
}

// readWatchEvents parses the SSE framing: id:, event: and data: lines, a blank line
// ending each event, ':' comments.
func readWatchEvents(ctx context.Context, body io.Reader, ch chan<- wevent) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var id, name, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data == "" {
				id, name = "", ""
				continue
			}
			var ev wevent
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return fmt.Errorf("event %q: %v", data, err)
			}
			ev.name, ev.id = name, id
			id, name, data = "", "", ""
			select {
			case ch <- ev:
			case <-ctx.Done():
				return ctx.Err()
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

func (s *wstream) close() {
	s.cancel()
	<-s.done
}

// next returns the next event, failing the test when none comes within eventWait. It
// checks the SSE framing: the event line names the type, and an id, where there is one,
// is the seq.
func (s *wstream) next(t *testing.T) wevent {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			<-s.done
			t.Fatalf("the watch stream ended: %v", s.err)
		}
		if ev.name != ev.Type {
			t.Fatalf("SSE event line %q, data type %q", ev.name, ev.Type)
		}
		if ev.id != "" {
			if ev.id != strconv.FormatUint(ev.Seq, 10) {
				t.Fatalf("SSE id %q, seq %d: %s", ev.id, ev.Seq, ev)
			}
			s.lastID = ev.id
		}
		if ev.Type == "error" || ev.Type == "gap" || ev.Type == "reset" {
			t.Fatalf("unexpected event: %s", ev)
		}
		return ev
	case <-time.After(eventWait):
		t.Fatalf("no event within %v", eventWait)
	}
	panic("unreachable")
}

// expect reads len(want) events and compares their String forms in order.
func (s *wstream) expect(t *testing.T, what string, want ...string) []wevent {
	t.Helper()
	var got []wevent
	for i, w := range want {
		ev := s.next(t)
		got = append(got, ev)
		if ev.String() != w {
			t.Fatalf("%s: event %d\n got  %s\n want %s", what, i, ev, w)
		}
	}
	return got
}

// watchWrite runs one statement that commits once and returns its seq.
func watchWrite(t *testing.T, base, q string) uint64 {
	t.Helper()
	return mustQuery(t, base, q).Seq
}

// TestWatchModeAcceptance: WATCH t: Task WHERE t.status = "done" RETURN t streams an
// initial snapshot, then added when a task's status becomes done, changed when a
// returned attribute changes, removed when it leaves the filter or is killed.
func TestWatchModeAcceptance(t *testing.T) {
	s := startServer(t, t.TempDir())
	base := s.URL()
	watchWrite(t, base, `SPAWN #t1: Task { status = "done", title = "write" }`)
	watchWrite(t, base, `SPAWN #t2: Task { status = "todo", title = "test" }`)
	p := watchWrite(t, base, `SPAWN #t3: Task { status = "done", title = "ship" }`)

	w := openWatchMode(t, base, `WATCH t: Task WHERE t.status = "done" RETURN t`, "")
	snap := w.expect(t, "initial",
		`initial {"_type":"Task","id":"t1","status":"done","title":"write"}`,
		`initial {"_type":"Task","id":"t3","status":"done","title":"ship"}`)
	// The snapshot is taken at one position, at or after the last write (opening a watch
	// may commit too); its last event carries that position as the SSE id.
	pos := snap[0].Seq
	for _, ev := range snap {
		if ev.Seq != pos || pos < p {
			t.Fatalf("initial events at seq %d and %d, want one position at or after %d", pos, ev.Seq, p)
		}
	}
	if w.lastID != strconv.FormatUint(pos, 10) {
		t.Fatalf("the snapshot's last event has SSE id %q, want the position %d", w.lastID, pos)
	}

	steps := []struct {
		q    string
		want string
	}{
		{`MATCH t: Task WHERE t.id = "t2" SET t.status = "done";`,
			`added {"_type":"Task","id":"t2","status":"done","title":"test"}`},
		{`MATCH t: Task WHERE t.id = "t1" SET t.title = "write more";`,
			`changed {"_type":"Task","id":"t1","status":"done","title":"write more"} prev={"_type":"Task","id":"t1","status":"done","title":"write"}`},
		// Leaves the filter: removed.
		{`MATCH t: Task WHERE t.id = "t2" SET t.status = "todo";`,
			`removed {"_type":"Task","id":"t2","status":"done","title":"test"}`},
		// A task that does not match, and another type: nothing (each step's event is the
		// next one on the stream, so none came in between).
		{`MATCH t: Task WHERE t.id = "t2" SET t.title = "unseen";`, ``},
		{`SPAWN #x: Other { status = "done" }`, ``},
		{`MATCH t: Task WHERE t.id = "t1" SET t.status = "todo";`,
			`removed {"_type":"Task","id":"t1","status":"done","title":"write more"}`},
		{`KILL #t3`,
			`removed {"_type":"Task","id":"t3","status":"done","title":"ship"}`},
		{`SPAWN #t4: Task { status = "done", title = "new" }`,
			`added {"_type":"Task","id":"t4","status":"done","title":"new"}`},
	}
	last := pos
	for _, st := range steps {
		seq := watchWrite(t, base, st.q)
		if st.want == "" {
			continue
		}
		ev := w.expect(t, st.q, st.want)[0]
		if ev.Seq != seq || ev.Seq <= last || ev.id != strconv.FormatUint(seq, 10) {
			t.Fatalf("%s: event at seq %d with SSE id %q, want the commit's %d (after %d)", st.q, ev.Seq, ev.id, seq, last)
		}
		last = ev.Seq
	}
}

// resumeModel predicts the events of resumeWatch from the writes a test makes.
type resumeModel struct {
	tasks map[string][2]string // id → {status, title}
	next  int
}

const resumeWatch = `WATCH t: Task WHERE t.status = "done" [mode: watch, delivery: reliable] RETURN t.id, t.title, t.status`

func resumeRow(id string, st [2]string) string {
	b, _ := json.Marshal(map[string]any{"t.id": id, "t.status": st[0], "t.title": st[1]})
	return string(b)
}

// step makes one write (one commit) chosen from i, and returns the statement and the
// event the watch must send for it ("" for none).
func (m *resumeModel) step(i int) (string, string) {
	var ids []string
	for id := range m.tasks {
		ids = append(ids, id)
	}
	// A deterministic choice: sort, then index by i.
	sort.Strings(ids)
	op := i % 5
	if len(ids) == 0 {
		op = 0
	}
	switch op {
	case 0, 3: // a new task, done every other time
		m.next++
		id := fmt.Sprintf("r%d", m.next)
		st := [2]string{"todo", fmt.Sprintf("title %d", i)}
		if m.next%2 == 0 {
			st[0] = "done"
		}
		m.tasks[id] = st
		q := fmt.Sprintf(`SPAWN #%s: Task { status = %q, title = %q }`, id, st[0], st[1])
		if st[0] == "done" {
			return q, "added " + resumeRow(id, st)
		}
		return q, ""
	case 1: // flip the status of one task
		id := ids[i%len(ids)]
		old := m.tasks[id]
		st := old
		if st[0] == "done" {
			st[0] = "todo"
		} else {
			st[0] = "done"
		}
		m.tasks[id] = st
		q := fmt.Sprintf(`MATCH t: Task WHERE t.id = %q SET t.status = %q;`, id, st[0])
		if st[0] == "done" {
			return q, "added " + resumeRow(id, st)
		}
		return q, "removed " + resumeRow(id, old)
	case 2: // retitle one task
		id := ids[(i*7)%len(ids)]
		old := m.tasks[id]
		st := old
		st[1] = fmt.Sprintf("title %d", i)
		m.tasks[id] = st
		q := fmt.Sprintf(`MATCH t: Task WHERE t.id = %q SET t.title = %q;`, id, st[1])
		if st[0] == "done" {
			return q, "changed " + resumeRow(id, st) + " prev=" + resumeRow(id, old)
		}
		return q, ""
	default: // kill one task
		id := ids[(i*3)%len(ids)]
		old := m.tasks[id]
		delete(m.tasks, id)
		q := "KILL #" + id
		if old[0] == "done" {
			return q, "removed " + resumeRow(id, old)
		}
		return q, ""
	}
}

// owedEvent is one event the watch owes: the seq of its commit and its String form.
type owedEvent struct {
	seq uint64
	ev  string
}

// TestWatchReliableResumeAfterKillNine: a delivery: reliable watch, resumed with the
// seq of the last event it read (Last-Event-ID) after kill -9 and a restart of the
// server, receives exactly the events it missed — the unread ones from before the kill
// and those of writes made while it was away — with no loss and no duplicate, round
// after round.
func TestWatchReliableResumeAfterKillNine(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	m := &resumeModel{tasks: map[string][2]string{}}
	var owed []owedEvent // events not yet read, in commit order
	i := 0
	apply := func(n int) {
		for k := 0; k < n; k++ {
			q, ev := m.step(i)
			i++
			seq := watchWrite(t, s.URL(), q)
			if ev != "" {
				owed = append(owed, owedEvent{seq, ev})
			}
		}
	}
	apply(6)

	// First connection: the snapshot, then live events.
	w := openWatchMode(t, s.URL(), resumeWatch, "")
	var initial []string
	var ids []string
	for id := range m.tasks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if st := m.tasks[id]; st[0] == "done" {
			initial = append(initial, "initial "+resumeRow(id, st))
		}
	}
	owed = nil
	var last uint64
	if len(initial) > 0 {
		evs := w.expect(t, "initial", initial...)
		last = evs[len(evs)-1].Seq
	}

	read := func(what string, n int) {
		t.Helper()
		for k := 0; k < n && len(owed) > 0; k++ {
			o := owed[0]
			owed = owed[1:]
			ev := w.expect(t, what, o.ev)[0]
			if ev.Seq != o.seq || ev.Seq < last {
				t.Fatalf("%s: %s at seq %d, want the commit's seq %d (last read %d)", what, ev, ev.Seq, o.seq, last)
			}
			last = ev.Seq
		}
	}

	const rounds = 4
	for round := 0; round < rounds; round++ {
		// Live: writes while connected, read as they come.
		apply(5)
		read(fmt.Sprintf("round %d live", round), len(owed))
		// More writes; read only some of their events, so the rest are in flight or
		// unread when the server dies.
		apply(8)
		read(fmt.Sprintf("round %d partial", round), len(owed)/2)
		if last == 0 {
			// Nothing read yet: a first event gives the position to resume from.
			apply(10)
			read(fmt.Sprintf("round %d first", round), 1)
		}

		s.Kill()
		w.close()
		s = startServer(t, dir)
		// Writes while the client is away.
		apply(6)

		// A client resumes after the last SSE id it read; every commit here makes one
		// event at most, so that is the seq of the last event read.
		if w.lastID != strconv.FormatUint(last, 10) {
			t.Fatalf("round %d: last SSE id %q, last seq read %d", round, w.lastID, last)
		}
		w = openWatchMode(t, s.URL(), resumeWatch, w.lastID)
		t.Logf("round %d: resuming after seq %d, %d events owed", round, last, len(owed))
		read(fmt.Sprintf("round %d resumed after %d", round, last), len(owed))
	}
	// Nothing more than what was owed: the next event is that of a new write.
	q, ev := `SPAWN #marker: Task { status = "done", title = "marker" }`, "added "+resumeRow("marker", [2]string{"done", "marker"})
	seq := watchWrite(t, s.URL(), q)
	if got := w.expect(t, "marker", ev)[0]; got.Seq != seq {
		t.Fatalf("marker at seq %d, want %d", got.Seq, seq)
	}
}

// TestWatchSeedDashboard is the seed document's dashboard example: the tasks of one
// project, through a join on belongs_to with an #id constant.
func TestWatchSeedDashboard(t *testing.T) {
	s := startServer(t, t.TempDir())
	base := s.URL()
	for _, q := range []string{
		`SPAWN #project_1: Project { name = "one" }`,
		`SPAWN #project_2: Project { name = "two" }`,
		`SPAWN #t1: Task { title = "design", status = "todo", priority = 2 }`,
		`SPAWN #t2: Task { title = "build", status = "todo", priority = 5 }`,
		`SPAWN #t3: Task { title = "other", status = "todo", priority = 1 }`,
		`LINK belongs_to(#t1, #project_1)`,
		`LINK belongs_to(#t3, #project_2)`,
	} {
		watchWrite(t, base, q)
	}
	w := openWatchMode(t, base, `WATCH t: Task, belongs_to(t, #project_1)
  [mode: watch, delivery: reliable]
RETURN t.id, t.title, t.status, t.priority`, "")
	row := func(id, title, status string, prio int) string {
		b, _ := json.Marshal(map[string]any{"t.id": id, "t.title": title, "t.status": status, "t.priority": prio})
		return string(b)
	}
	w.expect(t, "initial", "initial "+row("t1", "design", "todo", 2))
	steps := []struct{ q, want string }{
		{`LINK belongs_to(#t2, #project_1)`, "added " + row("t2", "build", "todo", 5)},
		{`MATCH t: Task WHERE t.id = "t1" SET t.status = "done";`,
			"changed " + row("t1", "design", "done", 2) + " prev=" + row("t1", "design", "todo", 2)},
		// Another project's task, and an attribute the dashboard does not show: nothing.
		{`MATCH t: Task WHERE t.id = "t3" SET t.status = "done";`, ""},
		{`MATCH t: Task WHERE t.id = "t1" SET t.owner = "ann";`, ""},
		{`MATCH p: Project WHERE p.id = "project_1" SET p.name = "renamed";`, ""},
		{`MATCH t: Task WHERE t.id = "t2" SET t.priority = 8;`,
			"changed " + row("t2", "build", "todo", 8) + " prev=" + row("t2", "build", "todo", 5)},
		{`UNLINK belongs_to(#t1, #project_1)`, "removed " + row("t1", "design", "done", 2)},
		{`LINK belongs_to(#t3, #project_1)`, "added " + row("t3", "other", "done", 1)},
		{`KILL #t2`, "removed " + row("t2", "build", "todo", 8)},
		// Killing the project removes its last task from the dashboard.
		{`KILL #project_1`, "removed " + row("t3", "other", "done", 1)},
	}
	for _, st := range steps {
		seq := watchWrite(t, base, st.q)
		if st.want == "" {
			continue
		}
		if ev := w.expect(t, st.q, st.want)[0]; ev.Seq != seq {
			t.Fatalf("%s: event at seq %d, want the commit's %d", st.q, ev.Seq, seq)
		}
	}
}

// TestWatchSeedInbox is the seed document's inbox example in watch mode: messages
// linked into Bob's inbox, with the declared schema and sent_at from now().
func TestWatchSeedInbox(t *testing.T) {
	s := startServer(t, t.TempDir())
	base := s.URL()
	for _, q := range []string{
		`node Message { content: String, sent_at: Timestamp }`,
		`edge inbox(recipient: Actor, message: Message)`,
		`SPAWN #bob: Actor { name = "bob" }`,
		`SPAWN #ann: Actor { name = "ann" }`,
		`SPAWN #mz: Message { content = "first", sent_at = now() }`,
		`SPAWN #ma: Message { content = "second", sent_at = now() }`,
		`LINK inbox(#bob, #ma)`,
		`LINK inbox(#bob, #mz)`,
	} {
		watchWrite(t, base, q)
	}
	w := openWatchMode(t, base, `WATCH m: Message, inbox(#bob, m)
  [mode: watch, ordering: attribute(m.sent_at ASC)]
RETURN m.content, m.sent_at`, "")
	check := func(ev wevent, typ, content string) {
		t.Helper()
		if ev.Type != typ || ev.Match["m.content"] != content {
			t.Fatalf("got %s, want %s of %q", ev, typ, content)
		}
		at, ok := ev.Match["m.sent_at"].(string)
		if !ok {
			t.Fatalf("%s: m.sent_at is not a timestamp string", ev)
		}
		if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
			t.Fatalf("%s: m.sent_at: %v", ev, err)
		}
	}
	// The snapshot comes in the watch's ordering, by sent_at rather than by id.
	check(w.next(t), "initial", "first")
	check(w.next(t), "initial", "second")

	// Send, as the seed writes it: SPAWN, then LINK.
	watchWrite(t, base, `SPAWN m: Message { content = "hello", sent_at = now() }
LINK inbox(#bob, m)`)
	check(w.next(t), "added", "hello")
	// Send in one transaction.
	watchWrite(t, base, `BEGIN; SPAWN m: Message { content = "in a transaction", sent_at = now() } LINK inbox(#bob, m); COMMIT`)
	check(w.next(t), "added", "in a transaction")
	// Someone else's inbox: nothing; the next event is the one after it.
	watchWrite(t, base, `SPAWN m: Message { content = "for ann", sent_at = now() } LINK inbox(#ann, m)`)
	watchWrite(t, base, `MATCH m: Message WHERE m.content = "hello" SET m.content = "hello, edited";`)
	ev := w.next(t)
	check(ev, "changed", "hello, edited")
	if ev.Prev["m.content"] != "hello" {
		t.Fatalf("changed without the previous content: %s", ev)
	}
	watchWrite(t, base, `UNLINK inbox(#bob, #mz)`)
	check(w.next(t), "removed", "first")
	watchWrite(t, base, `KILL #ma`)
	check(w.next(t), "removed", "second")
}
