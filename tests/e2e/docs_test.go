package e2e

import "testing"

// Each of these runs the shell commands of one document, in order, against a new
// server, and compares their output with what the document shows (see docrun_test.go).

func TestDocsAPI(t *testing.T) { runDoc(t, "docs/api.md") }

func TestDocsQueues(t *testing.T) { runDoc(t, "docs/queues.md") }

func runDoc(t *testing.T, name string, flags ...string) {
	t.Helper()
	requireShellTools(t)
	r := newDocRunner(t, name, flags...)
	r.run(readDocBlocks(t, name))
}
