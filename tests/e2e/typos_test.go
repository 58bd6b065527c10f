package e2e

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestReadsDoNotHideTypos: in a graph with declared types, a read of an attribute the
// type does not declare, or of a type nobody declared or used, is an error naming the
// nearest name — not an answer of nulls or of nothing — and a consumer or watcher of
// such a type is warned on its stream (it waits for the type either way).
func TestReadsDoNotHideTypos(t *testing.T) {
	s := startServer(t, t.TempDir())
	u := s.URL()
	mustQuery(t, u, `node Job { status: String = "pending", priority: Int }`)
	mustQuery(t, u, `SPAWN j: Job { priority = 5 }`)
	for q, want := range map[string]string{
		`MATCH j: Job RETURN j.prio`:                          `"E2009"`,
		`MATCH j: Jobb RETURN j`:                              `"E2012"`,
		`MATCH j: Job WHERE j.stauts = "pending" RETURN j.id`: `"E2009"`,
	} {
		st, b := authDo(t, "POST", u+"/v1/query", "", map[string]any{"query": q})
		if st != 400 || !strings.Contains(b, want) || !strings.Contains(b, "did you mean") {
			t.Errorf("%s: %d %s, want 400 %s with a suggestion", q, st, b, want)
		}
	}
	for _, args := range [][]string{
		{"consume", "--addr", u, `WATCH j: Jobz [mode: consume] RETURN j`},
		{"watch", "--addr", u, `WATCH j: Jobz RETURN j`},
	} {
		cmd := exec.Command(binary, args...)
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 8)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		select {
		case l := <-lines:
			if !strings.Contains(l, "warning: E2012") || !strings.Contains(l, "Jobz") {
				t.Errorf("herald %s printed %q, want the E2012 warning", args[0], l)
			}
		case <-time.After(eventWait):
			t.Errorf("herald %s printed no warning for a type nobody declared or used", args[0])
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}
