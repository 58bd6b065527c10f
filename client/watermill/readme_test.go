package watermill_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeSnippet checks that README.md's Go code is the code of example_test.go,
// which compiles and runs as an example: so the README shows working code.
func TestReadmeSnippet(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) != 1 {
		t.Fatalf("README.md has %d ```go blocks, want 1", len(blocks))
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	snippet := strings.TrimSpace(untab(string(blocks[0][1])))
	if !strings.Contains(untab(string(example)), snippet) {
		t.Fatalf("README.md's Go code is not in example_test.go; copy it over exactly:\n%s", snippet)
	}
}

// untab removes the leading tabs of every line of s.
func untab(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(l, "\t")
	}
	return strings.Join(lines, "\n")
}
