package main

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fences returns the fenced blocks of a Markdown file whose info string is lang.
func fences(t *testing.T, path, lang string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []string
	var cur *strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && line == "```"+lang:
			cur = &strings.Builder{}
		case cur != nil && line == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return blocks
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const doc = "../../docs/worker.md"

// TestDocSnippets: every Go snippet of docs/worker.md is a piece of this program or
// its test, as it stands, so it compiles; the statement the page shows is the one the
// configuration builds; and the line counts it gives are the files'.
func TestDocSnippets(t *testing.T) {
	src := read(t, "main.go") + read(t, "main_test.go")
	snippets := fences(t, doc, "go")
	if len(snippets) < 5 {
		t.Fatalf("%d Go snippets in %s", len(snippets), doc)
	}
	for _, s := range snippets {
		if !strings.Contains(src, s) {
			t.Errorf("a snippet of %s is not in main.go or main_test.go:\n%s", doc, s)
		}
	}
	stmt, err := config.Statement()
	if err != nil {
		t.Fatal(err)
	}
	if texts := fences(t, doc, "text"); len(texts) != 1 || texts[0] != stmt+"\n" {
		t.Errorf("%s shows the statement %q, want %q", doc, texts, stmt)
	}
	m := regexp.MustCompile(`It is (\d+) lines to this one's (\d+)`).FindStringSubmatch(read(t, doc))
	if m == nil {
		t.Fatalf("%s gives no line counts", doc)
	}
	lines := func(path string) string {
		return strconv.Itoa(strings.Count(read(t, path), "\n"))
	}
	if js, ours := lines("../../bench/examples/jetstream-worker/main.go"), lines("main.go"); m[1] != js || m[2] != ours {
		t.Errorf("%s says %s and %s lines; the files have %s (JetStream) and %s", doc, m[1], m[2], js, ours)
	}
}
