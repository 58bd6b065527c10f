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

// TestReadmeCommands: every shell command of the README is run by TestReadmeTour, is one
// of the two set-up commands (unchanged), or is marked illustrative.
func TestReadmeCommands(t *testing.T) {
	setup := map[string]bool{}
	for _, b := range readDocBlocks(t, "README.md") {
		if !b.isCommand() && b.Lang != "console" {
			continue
		}
		text := strings.TrimSpace(b.Text)
		switch {
		case b.Section == "A five-minute tour" || b.illustrative():
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
