package parser_test

import (
	"strings"
	"testing"

	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/lang/printer"
)

func TestConsumeWatch(t *testing.T) {
	for _, tc := range []struct{ src, group, want, err string }{
		{src: `WATCH j: Job RETURN j`, want: `WATCH j: Job [mode: consume] RETURN j`},
		{src: `WATCH j: Job WHERE j.n > 1 [mode: consume, group: "a"] RETURN j.n`, group: `b "c"`,
			want: `WATCH j: Job WHERE j.n > 1 [mode: consume, group: "b \"c\""] RETURN j.n`},
		{src: `WATCH j: Job [ack_timeout: 5s] RETURN j`, group: "g",
			want: `WATCH j: Job [ack_timeout: 5s, mode: consume, group: "g"] RETURN j`},
		{src: `WATCH j: Job [mode: watch] RETURN j`, err: "herald watch"},
		{src: `MATCH j: Job RETURN j`, err: "want a WATCH statement"},
		{src: `WATCH j: Job RETURN j; WATCH k: Job RETURN k`, err: "2 statements"},
		{src: `w = WATCH j: Job RETURN j`, err: "handle"},
		{src: `WATCH j: Job RETURN`, err: "1:"},
	} {
		w, err := parser.ConsumeWatch(tc.src, tc.group)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if got := printer.String(w); got != tc.want {
			t.Errorf("%s with group %q:\n got %s\nwant %s", tc.src, tc.group, got, tc.want)
		}
	}
}

func TestConsumeMode(t *testing.T) {
	for _, c := range []struct {
		query   string
		consume bool
	}{
		{`WATCH t: Task RETURN t`, false},
		{`WATCH t: Task [mode: watch] RETURN t`, false},
		{`WATCH t: Task [mode: consume] RETURN t`, true},
		{`WATCH t: Task [MODE: CONSUME] RETURN t`, true},
		{`MATCH t: Task RETURN t`, true},
		{`WATCH t: Task RETURN t; WATCH u: Task RETURN u`, true},
		{`WATCH t: Task [mode: fast] RETURN t`, true},
		{``, true},
	} {
		if got := parser.ConsumeMode(c.query); got != c.consume {
			t.Errorf("ConsumeMode(%q) = %v, want %v", c.query, got, c.consume)
		}
	}
}
