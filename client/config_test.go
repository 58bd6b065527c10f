package client

import (
	"errors"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/parser"
)

func TestConsumerConfigStatement(t *testing.T) {
	for _, tc := range []struct {
		cfg  ConsumerConfig
		want string
	}{
		{ConsumerConfig{Type: "Job"}, `WATCH m: Job [mode: consume] RETURN m`},
		{ConsumerConfig{
			Type: "Email", Var: "e", Filter: `e.region = $r AND e.size < 100`, Group: `mail"ers`,
			OrderBy: []OrderKey{{Attr: "priority"}, {Attr: "size", Desc: true}}, Fairness: AttrFairnessKey, Weight: "w",
			AvailableAt: AttrAvailableAt, AckTimeout: 90 * time.Second, MaxAttempts: 5,
			Backoff: Exponential(time.Second, 2, 5*time.Minute), DeadLetter: "failed_emails",
		}, `WATCH e: Email WHERE e.region = $r AND e.size < 100 [mode: consume, group: "mail\"ers", ordering: attribute(e.priority ASC, e.size DESC), fairness: e.fairness_key, weight: e.w, available_at: e.available_at, ack_timeout: 90s, max_redeliveries: 4, backoff: exponential(1s, 2.0, 5m), dead_letter: #failed_emails] RETURN e`},
		{ConsumerConfig{Type: "Job", MaxAttempts: 1, Backoff: Fixed(250 * time.Millisecond), OrderBy: ByPriority},
			`WATCH m: Job [mode: consume, ordering: attribute(m.priority ASC), max_redeliveries: 0, backoff: fixed(250ms)] RETURN m`},
		{ConsumerConfig{Type: "Job", Backoff: Exponential(time.Second, 1.5, time.Second*10)},
			`WATCH m: Job [mode: consume, backoff: exponential(1s, 1.5, 10s)] RETURN m`},
	} {
		got, err := tc.cfg.Statement()
		if err != nil {
			t.Fatalf("%+v: %v", tc.cfg, err)
		}
		if got != tc.want {
			t.Errorf("Statement:\n got %s\nwant %s", got, tc.want)
		}
		if _, _, err := parser.ParseScript(got); err != nil {
			t.Errorf("%s does not parse: %v", got, err)
		}
	}
}

func TestConsumerConfigRefuses(t *testing.T) {
	for name, cfg := range map[string]ConsumerConfig{
		"no type":             {},
		"a type with a space": {Type: "Job x"},
		"a bad variable":      {Type: "Job", Var: "1m"},
		"a bad filter":        {Type: "Job", Filter: "m.a = ] KILL #x"},
		"a filter and more":   {Type: "Job", Filter: "m.a = 1 RETURN m"},
		"a bad order key":     {Type: "Job", OrderBy: []OrderKey{{Attr: "a b"}}},
		"a bad fairness":      {Type: "Job", Fairness: "m.k"},
		"a negative timeout":  {Type: "Job", AckTimeout: -time.Second},
		"negative attempts":   {Type: "Job", MaxAttempts: -1},
		"a backoff factor":    {Type: "Job", Backoff: Exponential(time.Second, 0.5, time.Minute)},
		"a backoff max":       {Type: "Job", Backoff: Exponential(time.Minute, 2, time.Second)},
		"a bad dead letter":   {Type: "Job", DeadLetter: "#dl"},
	} {
		if _, err := cfg.Statement(); !errors.Is(err, herald.CodeInvalidArgument) {
			t.Errorf("%s: %v, want E4019", name, err)
		}
	}
}
