package e2e

import (
	"slices"
	"strings"
	"testing"
)

// The README's two set-up commands: the test starts the server itself (what the first
// does, on a free port), and the second is the test suite this test belongs to.
var readmeSetup = []string{
	"go run ./cmd/herald serve",
	"go test -race ./... ./bench/... ./client/watermill/...",
}

// TestReadmeTour runs the README's five-minute tour against a new server: every command
// in order, each output compared with the block the README shows after it.
func TestReadmeTour(t *testing.T) {
	requireShellTools(t)
	var tour []docBlock
	for _, b := range readDocBlocks(t, "README.md") {
		if b.Section == "A five-minute tour" {
			tour = append(tour, b)
		}
	}
	if len(tour) == 0 {
		t.Fatal(`README.md has no section "A five-minute tour"`)
	}
	r := newDocRunner(t, "README.md")
	r.strict = true
	r.run(tour)
}

// TestReadmeThreeNodes runs "Three nodes on PostgreSQL": three nodes on the test's
// PostgreSQL (on free ports in place of the README's, see doccluster_test.go), then
// herald status against the first, compared with what the README shows. It skips where
// PostgreSQL is not installed.
func TestReadmeThreeNodes(t *testing.T) {
	requireShellTools(t)
	var blocks []docBlock
	for _, b := range readDocBlocks(t, "README.md") {
		if b.Section == readmeCluster {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("README.md has no section %q", readmeCluster)
	}
	r := newDocRunner(t, "README.md")
	r.strict = true
	r.run(blocks)
	if len(r.cluster.nodes) != 3 {
		t.Fatalf("the section started %d nodes, want 3", len(r.cluster.nodes))
	}
}

const readmeCluster = "Three nodes on PostgreSQL"

// TestReadmeCommands: every shell command of the README is run by TestReadmeTour or
// TestReadmeThreeNodes, is one of the two set-up commands (unchanged), or is marked
// illustrative.
func TestReadmeCommands(t *testing.T) {
	setup := map[string]bool{}
	for _, b := range readDocBlocks(t, "README.md") {
		if !b.isCommand() && b.Lang != "console" {
			continue
		}
		text := strings.TrimSpace(b.Text)
		switch {
		case b.Section == "A five-minute tour" || b.Section == readmeCluster || b.illustrative():
		case b.Section == "Two commands" && slices.Contains(readmeSetup, text):
			setup[text] = true
		default:
			t.Errorf("README.md:%d: a command outside the tour that is not marked {illustrative}:\n%s", b.Line, b.Text)
		}
	}
	for _, c := range readmeSetup {
		if !setup[c] {
			t.Errorf("README.md: the set-up command %q is gone from \"Two commands\"", c)
		}
	}
}
