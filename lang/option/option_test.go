package option_test

import (
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/lang/printer"
)

func watchStmt(t *testing.T, src string) *ast.WatchStmt {
	t.Helper()
	script, _, err := parser.ParseScript(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return script.Stmts[0].(*ast.WatchStmt)
}

// TestDecode: each mode takes its options, ignores the other mode's where they mean
// nothing to it, and refuses the rest where they are written.
func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		src   string
		mode  option.Mode
		err   string
		check func(s *option.Set) bool
	}{
		{src: `WATCH t: T RETURN t`, mode: option.Watch, check: func(s *option.Set) bool {
			return s.Buffer == 1000 && s.OnFull == "drop" && s.Initial == "full" && s.Ordering == "arrival" && !s.Reliable
		}},
		{src: `WATCH t: T [mode: consume] RETURN t`, mode: option.Consume, check: func(s *option.Set) bool {
			return s.OnFull == "block" && s.Reliable && s.AckTimeout == 30*time.Second && s.MaxRedeliveries == 3
		}},
		{src: `WATCH t: T [window: sliding(10s, 2s), initial: since(4), delivery: reliable] RETURN t`, mode: option.Watch, check: func(s *option.Set) bool {
			return s.WinSize == 10*time.Second && s.WinSlide == 2*time.Second && s.Initial == "since" && s.Since == 4 && s.Reliable
		}},
		{src: `WATCH t: T [mode: consume, buffer: 50, max_in_flight: 5, group: "g", dead_letter: #dl] RETURN t`, mode: option.Consume, check: func(s *option.Set) bool {
			return s.Buffer == 5 && s.MaxInFlight == 5 && s.Group == "g" && s.DeadLetter == "dl"
		}},
		{src: `WATCH t: T [mode: consume, backoff: exponential(1s, 2, 5s)] RETURN t`, mode: option.Consume, check: func(s *option.Set) bool {
			b := s.Backoff
			return b.Delay(1) == time.Second && b.Delay(2) == 2*time.Second && b.Delay(3) == 4*time.Second && b.Delay(4) == 5*time.Second
		}},
		{src: `WATCH t: T [mode: consume, backoff: fixed(3s)] RETURN t`, mode: option.Consume, check: func(s *option.Set) bool {
			return s.Backoff.Delay(1) == 3*time.Second && s.Backoff.Delay(5) == 3*time.Second
		}},
		{src: `WATCH t: T [mode: consume, deliver_on: tick, visibility: immediate] RETURN t`, mode: option.Consume, check: func(s *option.Set) bool {
			return !s.PerTick && !s.Immediate
		}},
		{src: `WATCH t: T [buffer: 0] RETURN t`, mode: option.Watch, err: "buffer must be at least 1"},
		{src: `WATCH t: T [heartbeat: 0s] RETURN t`, mode: option.Watch, err: "heartbeat needs a positive duration"},
		{src: `WATCH t: T [mode: consume, ack_timeout: 0s] RETURN t`, mode: option.Consume, err: "ack_timeout must be a positive duration"},
		{src: `WATCH t: T [mode: consume, backoff: exponential(1s, 0.5, 5s)] RETURN t`, mode: option.Consume, err: "the backoff factor must be at least 1"},
		{src: `WATCH t: T [mode: consume, on_full: drop] RETURN t`, mode: option.Consume, err: "on_full must be block"},
		{src: `WATCH t: T [fairness: t.k] RETURN t`, mode: option.Watch, err: "fairness is a consume-mode option"},
		{src: `WATCH t: T [mode: consume, initial: since(1)] RETURN t`, mode: option.Consume, err: "consume mode takes full or none"},
	} {
		set, err := option.Decode(watchStmt(t, tc.src), tc.mode)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Msg, tc.err) {
				t.Errorf("%s: %v, want %q", tc.src, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.src, err)
		case !tc.check(set):
			t.Errorf("%s: decoded %+v", tc.src, *set)
		}
	}
}

// TestTableShapes: every option the parser cannot name its expectation for has one,
// and the options ALTER WATCH may change on a consume watch are the failure handling.
func TestTableShapes(t *testing.T) {
	var alter []string
	for _, o := range option.All() {
		switch o.Shape.Kind {
		case option.Ordering, option.Choice, option.Name:
			if o.Shape.Expected == "" {
				t.Errorf("%s: a %v shape without an expectation", o.Name, o.Shape.Kind)
			}
		}
		if option.Lookup(o.Name) != o {
			t.Errorf("%s: Lookup does not find it", o.Name)
		}
		if o.Alter {
			alter = append(alter, o.Name)
		}
	}
	if got := strings.Join(alter, " "); got != "ack_timeout max_redeliveries backoff dead_letter" {
		t.Errorf("alterable: %s", got)
	}
}

// TestMerge: ALTER's options replace the statement's of the same name, in place, and
// add the others after them.
func TestMerge(t *testing.T) {
	base := watchStmt(t, `WATCH t: T [buffer: 5] WHERE t.a [filter: t.b, ORDERING: causal] RETURN t`)
	over := watchStmt(t, `WATCH t: T [ordering: arrival, heartbeat: 1s] RETURN t`)
	merged := *base
	merged.Options = option.Merge(base.Options, over.Options)
	if got, want := printer.String(&merged), `WATCH t: T WHERE t.a [buffer: 5, filter: t.b, ordering: arrival, heartbeat: 1s] RETURN t`; got != want {
		t.Errorf("merged:\n got %s\nwant %s", got, want)
	}
	if option.ModeOf(base) != option.Watch || option.ModeOf(watchStmt(t, `WATCH t: T [mode: consume] RETURN t`)) != option.Consume {
		t.Error("ModeOf")
	}
}
