package delivery

import (
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/engine"
)

// TestReadsRowOnly: only variables and their attributes may skip the evaluation
// context; anything that reads parameters, the clock, the session or another node
// needs it.
func TestReadsRowOnly(t *testing.T) {
	for stmt, want := range map[string]bool{
		`WATCH m: Msg [mode: consume] RETURN m`:                          true,
		`WATCH m: Msg [mode: consume] RETURN m.body AS body, m.id AS id`: true,
		`WATCH m: Msg [mode: consume] RETURN m.body AS body, $p AS p`:    false,
		`WATCH m: Msg [mode: consume] RETURN m.n + 1 AS n`:               false,
		`WATCH m: Msg [mode: consume] RETURN now() AS t`:                 false,
		`WATCH m: Msg [mode: consume] RETURN #cfg.level AS level`:        false,
		`WATCH m: Msg [mode: consume] RETURN current_actor() AS a`:       false,
	} {
		params := map[string]herald.Value{}
		if strings.Contains(stmt, "$p") {
			params["p"] = herald.Int(1)
		}
		w, _, err := engine.ParseWatch(stmt, params)
		if err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		if got := readsRowOnly(w.Return); got != want {
			t.Errorf("%s: readsRowOnly = %v, want %v", stmt, got, want)
		}
	}
}
