package standing_test

import (
	"context"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/standing"
)

// TestDetachRemovesTheExtension: the core handles PAUSE, RESUME, CANCEL and ALTER
// WATCH while a service is attached, and no longer once the last one detaches.
func TestDetachRemovesTheExtension(t *testing.T) {
	e := openEngine(t, defaultConfig())
	ctx := context.Background()
	pause := func() herald.Code {
		_, err := e.Exec(ctx, "", `PAUSE WATCH #nobody`, nil)
		return herald.CodeOf(err)
	}
	if got := pause(); got != herald.CodeNotImplemented {
		t.Fatalf("before any attach: %s, want E%s", got, herald.CodeNotImplemented)
	}
	a, b := standing.Attach(e), standing.Attach(e)
	if a != b {
		t.Fatal("two attaches to one engine got two cores")
	}
	if got := pause(); got != herald.CodeWatchNotFound {
		t.Fatalf("attached: %s, want E8002", got)
	}
	a.Detach()
	if got := pause(); got != herald.CodeWatchNotFound {
		t.Fatalf("one of two detached: %s, want E8002", got)
	}
	b.Detach()
	if got := pause(); got != herald.CodeNotImplemented {
		t.Fatalf("every service detached: %s, want E%s", got, herald.CodeNotImplemented)
	}
}

// TestIdenticalOpensShareTheQuery: opens of one statement with the same parameters
// share one compiled query while one holds it; another mode or other parameters
// compile their own.
func TestIdenticalOpensShareTheQuery(t *testing.T) {
	e := openEngine(t, defaultConfig())
	core := standing.Attach(e)
	defer core.Detach()
	ctx := context.Background()
	open := func(query string, mode option.Mode, params map[string]herald.Value) *standing.Opened {
		t.Helper()
		o, err := core.Open(ctx, standing.OpenRequest{Query: query, Mode: mode, Params: params})
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return o
	}
	const stmt = `WATCH t: Task WHERE t.n > $n RETURN t`
	n1 := map[string]herald.Value{"n": herald.Int(1)}
	a, b := open(stmt, option.Watch, n1), open(stmt, option.Watch, n1)
	if a.Query != b.Query || core.Held() != 1 {
		t.Fatalf("identical opens: %p and %p, %d held; want one query", a.Query, b.Query, core.Held())
	}
	c := open(stmt, option.Watch, map[string]herald.Value{"n": herald.Int(2)})
	d := open(`WATCH t: Task WHERE t.n > $n [mode: consume] RETURN t`, option.Consume, n1)
	if c.Query == a.Query || d.Query == a.Query || core.Held() != 3 {
		t.Fatalf("other parameters or mode share a query (%d held)", core.Held())
	}
	for _, o := range []*standing.Opened{a, b, b, c, d} { // a second Release does nothing
		o.Release()
	}
	if core.Held() != 0 {
		t.Fatalf("%d queries held after every open gave its own back", core.Held())
	}
}

// TestOpenChecksTheMode: a stream opens only statements of its mode, each refused
// where the statement says otherwise.
func TestOpenChecksTheMode(t *testing.T) {
	e := openEngine(t, defaultConfig())
	core := standing.Attach(e)
	defer core.Detach()
	for _, tc := range []struct {
		query string
		mode  option.Mode
		want  string
	}{
		{`WATCH t: Task [mode: consume] RETURN t`, option.Watch, "1:16: this is a watch-mode stream"},
		{`WATCH t: Task [ack_timeout: 5s] RETURN t`, option.Watch, "1:16: ack_timeout is a consume-mode option; this watch is in watch mode"},
		{`WATCH t: Task RETURN t`, option.Consume, "1:1: a consume stream serves [mode: consume] statements"},
		{`WATCH t: Task [mode: consume, window: tumbling(1s)] RETURN t`, option.Consume, "1:39: windows apply to watch mode"},
		{`WATCH t: Task [mode: consume, heartbeat: 1s, delivery: best_effort] RETURN t`, option.Consume, ""},
		{`WATCH t: Task [group: "g", branch: main] RETURN t`, option.Watch, "1:28: branches are not supported"},
	} {
		o, err := core.Open(context.Background(), standing.OpenRequest{Query: tc.query, Mode: tc.mode})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.query, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.query, err, tc.want)
		}
		o.Release()
	}
}
