package herald_test

import (
	"os"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
)

// operationRows is the operations table of docs/security.md, made from
// herald.Operations.
func operationRows() string {
	var b strings.Builder
	for _, op := range herald.OperationNames() {
		g := herald.Operations[op]
		needs := "credentials only"
		switch {
		case g.Public:
			needs = "nothing (no credentials)"
		case len(g.Needs) > 0:
			needs = "`" + strings.Join(g.Needs, "`, `") + "`"
		}
		then := g.Then
		if then == "" {
			then = "—"
		}
		b.WriteString("| `" + op + "` | " + needs + " | " + then + " |\n")
	}
	return b.String()
}

// TestOperationsDocumented: the operations table of docs/security.md is herald.Operations,
// row for row. Run with HERALD_UPDATE_DOCS=1 to rewrite it.
func TestOperationsDocumented(t *testing.T) {
	const path = "docs/security.md"
	const start = "| operation | needs before it runs | then |\n|---|---|---|\n"
	const end = "<!-- end of operations table -->"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, start), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no operations table", path)
	}
	got, want := doc[i+len(start):j], operationRows()
	if got == want {
		return
	}
	if os.Getenv("HERALD_UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(doc[:i+len(start)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("the operations table of %s differs from herald.Operations; rerun with HERALD_UPDATE_DOCS=1. Want:\n%s", path, want)
}
