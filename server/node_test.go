package server

import (
	"testing"

	"github.com/herald-mq/herald/broker"
)

// A stream is routed by the mode its statement asks for; what is not one WATCH goes to
// consume mode, whose compiler reports what is wrong with it.
func TestStreamsRouteByMode(t *testing.T) {
	cases := []struct {
		query string
		mode  broker.Mode
	}{
		{"WATCH j: Job [mode: consume] RETURN j", broker.ModeConsume},
		{"WATCH j: Job [MODE: Consume] RETURN j", broker.ModeConsume},
		{"WATCH j: Job RETURN j", broker.ModeWatch},
		{"WATCH j: Job [mode: watch] RETURN j", broker.ModeWatch},
		{"WATCH j: Job [delivery: reliable] [initial: none] RETURN j", broker.ModeWatch},
		{"WATCH", broker.ModeConsume},
		{"MATCH j: Job RETURN j", broker.ModeConsume},
		{"WATCH a: A RETURN a; WATCH b: B RETURN b", broker.ModeConsume},
	}
	for _, c := range cases {
		if got := modeOf(c.query); got != c.mode {
			t.Errorf("modeOf(%q) = %v, want %v", c.query, got, c.mode)
		}
	}
}
