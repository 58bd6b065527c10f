package client

import (
	"testing"
	"time"
)

func TestPrepareWatch(t *testing.T) {
	cases := []struct {
		in       string
		prefetch int
		want     string // "" means an error
	}{
		{`WATCH j: Job [mode: consume] RETURN j`, 0, `WATCH j: Job [mode: consume] RETURN j`},
		{`WATCH j: Job [mode: consume] RETURN j`, 5, `WATCH j: Job [mode: consume] [max_in_flight: 5] RETURN j`},
		{`watch j: Job where j.status = "return" [MODE: Consume] return j`, 2, `watch j: Job where j.status = "return" [MODE: Consume] [max_in_flight: 2] return j`},
		{`WATCH j: Job [mode: consume] ON MATCH DO SET j.seen = TRUE`, 1, `WATCH j: Job [mode: consume] [max_in_flight: 1] ON MATCH DO SET j.seen = TRUE`},
		{`WATCH j: Job [mode: consume]`, 3, `WATCH j: Job [mode: consume] [max_in_flight: 3]`},
		{"WATCH j: Job [mode: consume] -- jobs\n;", 3, "WATCH j: Job [mode: consume] [max_in_flight: 3] -- jobs\n;"},
		{`WATCH j: Job WHERE j.on = 1 [mode: consume, buffer: 10] RETURN j`, 4, `WATCH j: Job WHERE j.on = 1 [mode: consume, buffer: 10] [max_in_flight: 4] RETURN j`},
		{`WATCH m: Message, inbox(#self, m) [mode: consume] RETURN m.content`, 8, `WATCH m: Message, inbox(#self, m) [mode: consume] [max_in_flight: 8] RETURN m.content`},
		{`WATCH j: Job [mode: consume, max_in_flight: 3] RETURN j`, 0, `WATCH j: Job [mode: consume, max_in_flight: 3] RETURN j`},
		{`WATCH j: Job [mode: consume, max_in_flight: 3] RETURN j`, 4, ""},
		{`WATCH j: Job RETURN j`, 0, ""},
		{`WATCH j: Job WHERE j.mode = "consume" RETURN j`, 0, ""},
		{`WATCH j: Job [mode: watch] RETURN j`, 0, ""},
		{`MATCH j: Job RETURN j`, 0, ""},
		{`WATCH j: Job WHERE j.s = "open [mode: consume] RETURN j`, 0, ""},
	}
	for _, c := range cases {
		got, err := prepareWatch(c.in, c.prefetch)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("prepareWatch(%q, %d) = %q, want an error", c.in, c.prefetch, got)
		case c.want != "" && err != nil:
			t.Errorf("prepareWatch(%q, %d): %v", c.in, c.prefetch, err)
		case got != c.want && c.want != "":
			t.Errorf("prepareWatch(%q, %d)\n got %q\nwant %q", c.in, c.prefetch, got, c.want)
		}
	}
}

func TestDurationLiteral(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Second:         "5s",
		90 * time.Minute:        "5400s",
		1500 * time.Millisecond: "1500ms",
		1500 * time.Microsecond: "1500000ns",
	} {
		if got := durationLit(d); got != want {
			t.Errorf("durationLit(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"d_7Qx2-abc": true, "": false, `a"b`: false, "a b": false, "a\\b": false, "é": false,
	} {
		if validID(id) != want {
			t.Errorf("validID(%q) = %v", id, !want)
		}
	}
}
