package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/herald-mq/herald/heraldtest"
)

func TestConsumeStatement(t *testing.T) {
	for _, tc := range []struct{ src, group, want, err string }{
		{src: `WATCH j: Job RETURN j`, want: `WATCH j: Job [mode: consume] RETURN j`},
		{src: `WATCH j: Job WHERE j.n > 1 [mode: consume, group: "a"] RETURN j.n`, group: `b "c"`,
			want: `WATCH j: Job WHERE j.n > 1 [mode: consume, group: "b \"c\""] RETURN j.n`},
		{src: `WATCH j: Job [ack_timeout: 5s] RETURN j`, group: "g",
			want: `WATCH j: Job [ack_timeout: 5s, mode: consume, group: "g"] RETURN j`},
		{src: `WATCH j: Job [mode: watch] RETURN j`, err: "herald watch"},
		{src: `MATCH j: Job RETURN j`, err: "want a WATCH statement"},
		{src: `WATCH j: Job RETURN j; WATCH k: Job RETURN k`, err: "2 statements"},
		{src: `WATCH j: Job RETURN`, err: "1:"},
	} {
		got, err := consumeStatement(tc.src, tc.group)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s with group %q:\n got %s (%v)\nwant %s", tc.src, tc.group, got, err, tc.want)
		}
	}
}

func consumeRun(t *testing.T, srv *heraldtest.Server, args ...string) (string, string, int) {
	t.Helper()
	out, errOut, err := run(t, "", append(append([]string{"consume"}, args...), "--addr", srv.URL())...)
	return out, errOut, ExitCode(err)
}

func TestConsumeCommand(t *testing.T) {
	srv := heraldtest.NewServer(t)
	srv.Exec(`node Job { n: Int } SPAWN a: Job { n = 1 } SPAWN b: Job { n = 2 } SPAWN c: Job { n = 3 }`, nil)

	// NACK the first message: it comes back, one attempt later, at its place.
	out, errOut, code := consumeRun(t, srv, "--settle", "nack", "--count", "1", `WATCH j: Job RETURN j.n AS n`)
	if code != 0 || !strings.HasPrefix(out, "attempt=1 seq=") || !strings.HasSuffix(out, ` {"n":1} nack`+"\n") {
		t.Fatalf("nack: exit %d, out %q, err %q", code, out, errOut)
	}
	out, errOut, code = consumeRun(t, srv, "--json", "--count", "2", "--group", "g", `WATCH j: Job RETURN j.n AS n`)
	if code != 0 {
		t.Fatalf("ack: exit %d, err %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", out)
	}
	for i, want := range []struct {
		n       int64
		attempt int
	}{{1, 2}, {2, 1}} {
		var got struct {
			DeliveryID string           `json:"delivery_id"`
			Attempt    int              `json:"attempt"`
			Match      map[string]int64 `json:"match"`
			Settled    string           `json:"settled"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		if got.Match["n"] != want.n || got.Attempt != want.attempt || got.Settled != "ack" || got.DeliveryID == "" {
			t.Fatalf("line %d: %s", i, lines[i])
		}
	}
	// Rejected: dead-lettered, and nothing is left to consume.
	if out, errOut, code = consumeRun(t, srv, "--settle", "reject", "--count", "1", `WATCH j: Job RETURN j.n AS n`); code != 0 || !strings.HasSuffix(out, `{"n":3} reject`+"\n") {
		t.Fatalf("reject: exit %d, out %q, err %q", code, out, errOut)
	}
	r := srv.Exec(`MATCH j: Job RETURN COUNT(j); MATCH d: _DeadLetter RETURN COUNT(d)`, nil)
	if r.Results[0].Rows[0][0] != int64(0) || r.Results[1].Rows[0][0] != int64(1) {
		t.Fatalf("after reject: %v jobs, %v dead letters", r.Results[0].Rows, r.Results[1].Rows)
	}
}

func TestConsumeRefusals(t *testing.T) {
	srv := heraldtest.NewServer(t)
	srv.Exec(`node Job { n: Int }`, nil)
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{`WATCH j: Job [mode: watch] RETURN j`}, 2, "herald watch"},
		{[]string{"--settle", "drop", `WATCH j: Job RETURN j`}, 2, "ack, nack or reject"},
		{[]string{"--prefetch", "0", `WATCH j: Job RETURN j`}, 2, "--prefetch"},
		{[]string{`WATCH j: Job WHERE j.owner = #self RETURN j`}, 1, "E3003"},
	} {
		out, errOut, code := consumeRun(t, srv, tc.args...)
		if code != tc.code || out != "" || !strings.Contains(errOut, tc.err) {
			t.Errorf("%v: exit %d, out %q, err %q; want exit %d and %q", tc.args, code, out, errOut, tc.code, tc.err)
		}
	}
	// herald watch points a consume-mode statement here.
	_, errOut, err := run(t, "", "watch", "--addr", srv.URL(), `WATCH j: Job [mode: consume] RETURN j`)
	if ExitCode(err) != 2 || !strings.Contains(errOut, "herald consume") {
		t.Fatalf("watch of a consume statement: exit %d, %q", ExitCode(err), errOut)
	}
}
