package e2e

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// openWithParams opens a consume stream for statement with its $params (JSON), or
// returns the server's refusal.
func openWithParams(t *testing.T, base, statement, params string) (*sseStream, error) {
	t.Helper()
	s, err := openStreamURL(context.Background(), watchURL(base, "", statement)+"&params="+url.QueryEscape(params))
	if err == nil {
		t.Cleanup(s.Close)
	}
	return s, err
}

// openOnceLeft opens a stream that a group refuses (E1004) while an old member is
// connected, retrying while the server notices that member's connection closed (a
// bound on a hang, not a timing).
func openOnceLeft(t *testing.T, open func() (*sseStream, error)) *sseStream {
	t.Helper()
	deadline := time.Now().Add(eventWait)
	for {
		s, err := open()
		if err == nil {
			return s
		}
		if !strings.Contains(err.Error(), "E1004") || time.Now().After(deadline) {
			t.Fatalf("once the old member left: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGroupSharesOneAtATime: two members of a group with room each, and messages that
// arrive one at a time — each published once the last has been delivered — go round
// the members: neither sits idle while the other gets them all.
func TestGroupSharesOneAtATime(t *testing.T) {
	u := startServer(t, t.TempDir()).URL()
	const w = `WATCH j: RRJob [mode: consume, group: "rr", buffer: 100] RETURN j`
	a, b := mustOpen(t, u, w), mustOpen(t, u, w)
	got := map[string]int{}
	for i := range 20 {
		mustQuery(t, u, fmt.Sprintf(`SPAWN j: RRJob { n = %d }`, i))
		select {
		case ev := <-a.Events:
			if ev.Type == "consumed" {
				got["a"]++
			}
		case ev := <-b.Events:
			if ev.Type == "consumed" {
				got["b"]++
			}
		case <-time.After(eventWait):
			t.Fatalf("message %d reached no member", i)
		}
	}
	if got["a"] < 7 || got["b"] < 7 {
		t.Fatalf("20 messages one at a time to two members with room: %v, want them shared", got)
	}
}

// TestGroupParamsArePartOfIt: a member whose $params differ from the group's is refused
// with E1004 while a member is connected — not admitted to consume nothing — and once
// none is, its statement takes the group over and it gets what its $params select.
func TestGroupParamsArePartOfIt(t *testing.T) {
	u := startServer(t, t.TempDir()).URL()
	const w = `WATCH x: Px WHERE x.run = $run [mode: consume, group: "gx"] RETURN x.n`
	mustQuery(t, u, `SPAWN a: Px { run = 1, n = 1 } SPAWN b: Px { run = 2, n = 2 }`)
	first, err := openWithParams(t, u, w, `{"run": 1}`)
	if err != nil {
		t.Fatal(err)
	}
	if ev := first.nextConsumed(t); !strings.Contains(string(ev.Match), `1`) {
		t.Fatalf("run 1 got %s", ev.Match)
	}
	if _, err := openWithParams(t, u, w, `{"run": 2}`); err == nil || !strings.Contains(err.Error(), "E1004") {
		t.Fatalf("a member with other $params while one is connected: %v, want E1004", err)
	}
	first.Close()
	second := openOnceLeft(t, func() (*sseStream, error) { return openWithParams(t, u, w, `{"run": 2}`) })
	if ev := second.nextConsumed(t); string(ev.Match) != `{"x.n":2}` {
		t.Fatalf("the second run got %s, want run 2's message", ev.Match)
	}
}

// TestGroupRedeployChangesOptions: a worker redeployed with another option (ack_timeout
// 30s → 60s) takes its group over as soon as the old members have left, and the
// group's waiting messages carry on to it.
func TestGroupRedeployChangesOptions(t *testing.T) {
	u := startServer(t, t.TempDir()).URL()
	v1 := `WATCH j: DJob [mode: consume, group: "deploy", ack_timeout: 30s] RETURN j.n`
	v2 := `WATCH j: DJob [mode: consume, group: "deploy", ack_timeout: 60s] RETURN j.n`
	old := mustOpen(t, u, v1)
	mustQuery(t, u, `SPAWN a: DJob { n = 1 } SPAWN b: DJob { n = 2 }`)
	ev := old.nextConsumed(t)
	settle(t, u, "ACK", ev.DeliveryID, "")
	if _, err := openStream(context.Background(), u, v2); err == nil || !strings.Contains(err.Error(), "E1004") {
		t.Fatalf("v2 while v1 is connected: %v, want E1004", err)
	}
	old.Close()
	next := openOnceLeft(t, func() (*sseStream, error) {
		s, err := openStream(context.Background(), u, v2)
		if err == nil {
			t.Cleanup(s.Close)
		}
		return s, err
	})
	ev = next.nextConsumed(t)
	if deadline, err := time.Parse(time.RFC3339Nano, ev.Deadline); err != nil || time.Until(deadline) < 45*time.Second {
		t.Fatalf("v2's delivery %+v: want the new ack_timeout (60s)", ev)
	}
}
