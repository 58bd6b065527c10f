package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/testutil"
)

// This file runs the shell commands of a Markdown document against a server the test
// started, and compares what they print with what the document shows.
//
// The conventions it reads:
//
//   - A ```sh (or ```bash) block is run with `sh -c`, in a temporary directory, with the
//     built herald first on PATH, HERALD_ADDR naming the test's server, `localhost:7420`
//     and `127.0.0.1:7420` rewritten to the server's address, and `go run ./cmd/herald`
//     to `herald`.
//   - A ```json or ```text block right after it (only blank lines between) is its output.
//     `…` in it matches any run of characters within a line (ids, times, positions that
//     vary). JSON is compared without whitespace; text line by line, with runs of spaces
//     compared as one. A command without an output block must exit with status 0.
//   - A command that streams (`curl -N`/`-sN`, `herald watch`, `herald consume`) runs in
//     the background: the test reads as many lines as its output block shows and goes
//     on, so later blocks run while the stream stays open; the stream is stopped when
//     the document reaches its next heading. When it copies itself to a file with
//     `| tee FILE`, the test also waits for FILE to hold what it read, since a later
//     block may read it. A ```text {continued} block further on shows the next lines of
//     the last stream still open (what it printed after the blocks in between ran).
//   - A block whose one command is `herald serve FLAGS` starts the server the later blocks
//     talk to, with those flags (and a free port and a new data directory), in place of
//     the one the test started.
//   - A block whose one command is `herald serve --store postgres://… FLAGS` starts one
//     node of a cluster instead, beside the nodes started before it (the first takes
//     the place of the test's server): on the test's PostgreSQL, in a schema of the
//     document's own, its `--listen` address moved to a free port with as many digits
//     (so tables keep their widths), and that address rewritten in the later commands
//     and in the outputs they are compared with. Without PostgreSQL installed the
//     document's test skips, saying so (doccluster_test.go).
//   - A ```console block is a session: its `$ ` lines run in order in one shell, and the
//     other lines are what they print.
//   - A ```text block whose first line is `$ … herald query` and which shows `herald> `
//     prompts is a query-shell transcript: what follows the prompts is the input, the
//     rest the output (`\q` ends the input).
//   - A block whose info string holds `{illustrative}` (```sh {illustrative}) is not run;
//     keep such blocks few: they are for commands that need files, machines or hours the
//     test does not have.

// docBlock is one fenced block of a Markdown document.
type docBlock struct {
	Lang     string // the info string's first word: sh, json, text, …
	Info     string // the rest of the info string, e.g. "{illustrative}"
	Text     string // the lines between the fences, each ending in "\n"
	Line     int    // line of the opening fence, counted from 1
	Section  string // the last "## " heading above the block
	Heading  int    // how many headings (of any level) come before the block
	Adjacent bool   // only blank lines separate it from the block before
}

func (b docBlock) illustrative() bool { return strings.Contains(b.Info, "{illustrative}") }

func (b docBlock) isCommand() bool { return b.Lang == "sh" || b.Lang == "bash" }

// runs: the block is run (rather than compared with what something else printed).
func (b docBlock) runs() bool {
	return !b.illustrative() && (b.isCommand() || b.Lang == "console" || b.isTranscript())
}

func (b docBlock) isOutput() bool {
	return (b.Lang == "json" || b.Lang == "text") && !b.illustrative() && !b.isTranscript() && !b.isContinued()
}

// isContinued: more lines of the last stream still open, after other blocks ran.
func (b docBlock) isContinued() bool {
	return b.Lang == "text" && strings.Contains(b.Info, "{continued}")
}

// isTranscript: a query-shell session, `$ herald query` then prompts.
func (b docBlock) isTranscript() bool {
	first, rest, _ := strings.Cut(b.Text, "\n")
	return b.Lang == "text" && strings.HasPrefix(first, "$ ") && strings.Contains(first, "herald query") &&
		strings.Contains(rest, queryPrompt)
}

const (
	queryPrompt         = "herald> "
	queryContinuePrompt = "     -> "
)

// docPath is the path of a file of the module, e.g. "README.md" or "docs/api.md".
func docPath(t *testing.T, name string) string {
	t.Helper()
	root, err := testutil.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, name)
}

var heading = regexp.MustCompile(`^#{1,6} `)

// readDocBlocks returns the fenced blocks of the module's file name, in order.
func readDocBlocks(t *testing.T, name string) []docBlock {
	t.Helper()
	data, err := os.ReadFile(docPath(t, name))
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks   []docBlock
		cur      *docBlock
		body     strings.Builder
		section  string
		headings int
		blank    = true // only blank lines since the last block closed
	)
	for i, line := range strings.Split(string(data), "\n") {
		if cur != nil {
			if strings.TrimSpace(line) == "```" {
				cur.Text = body.String()
				blocks = append(blocks, *cur)
				cur, blank = nil, true
				continue
			}
			body.WriteString(line + "\n")
			continue
		}
		if info, ok := strings.CutPrefix(line, "```"); ok {
			lang, rest, _ := strings.Cut(strings.TrimSpace(info), " ")
			cur = &docBlock{Lang: lang, Info: strings.TrimSpace(rest), Line: i + 1, Section: section,
				Heading: headings, Adjacent: blank && len(blocks) > 0}
			body.Reset()
			continue
		}
		if heading.MatchString(line) {
			headings++
			if h, ok := strings.CutPrefix(line, "## "); ok {
				section = strings.TrimSpace(h)
			}
		}
		if strings.TrimSpace(line) != "" {
			blank = false
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: a fenced block is not closed", name, cur.Line)
	}
	return blocks
}

// requireShellTools skips the test when sh or curl, which the documents' commands use,
// is not installed.
func requireShellTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"sh", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the documents' commands need %s, which is not installed: %v", tool, err)
		}
	}
}

// docRunner runs one document's blocks against one server.
type docRunner struct {
	t       *testing.T
	doc     string // the document's name, for messages
	server  *testutil.Server
	dir     string   // working directory of the commands
	env     []string // their environment
	streams []*docStream
	heading int // the heading the open streams were started under
	strict  bool
	cluster docCluster // the nodes of a cluster the document started
}

// newDocRunner starts a server with flags for the document doc.
func newDocRunner(t *testing.T, doc string, flags ...string) *docRunner {
	t.Helper()
	r := &docRunner{t: t, doc: doc, dir: t.TempDir()}
	r.startServer(flags)
	t.Cleanup(r.stopStreams)
	return r
}

// startServer starts the server the commands talk to, with flags, in place of the one
// running (if any).
func (r *docRunner) startServer(flags []string) {
	r.t.Helper()
	if r.server != nil {
		r.stopStreams()
		r.server.Kill()
	}
	r.server = startServer(r.t, r.t.TempDir(), flags...)
	r.env = append(os.Environ(),
		"PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HERALD_ADDR="+r.server.URL())
}

// serveFlags returns the flags of a block whose one command is `herald serve` (or
// `go run ./cmd/herald serve`), comments and line continuations aside.
func serveFlags(text string) ([]string, bool) {
	var words []string
	for _, line := range strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		if f := strings.Fields(line); len(f) > 0 {
			if len(words) > 0 {
				return nil, false // a second command
			}
			words = f
		}
	}
	cmd := strings.Join(words, " ")
	for _, prefix := range []string{"herald serve", "go run ./cmd/herald serve"} {
		if cmd == prefix || strings.HasPrefix(cmd, prefix+" ") {
			return words[len(strings.Fields(prefix)):], true
		}
	}
	return nil, false
}

// run runs blocks in order. With strict set, a block that is neither run nor marked
// illustrative fails the test (outputs are checked with their commands).
func (r *docRunner) run(blocks []docBlock) {
	r.t.Helper()
	for i := 0; i < len(blocks); i++ {
		b := blocks[i]
		if b.Heading != r.heading {
			r.stopStreams()
			r.heading = b.Heading
		}
		var out *docBlock
		if i+1 < len(blocks) && blocks[i+1].Adjacent && blocks[i+1].isOutput() {
			out = &blocks[i+1]
		}
		switch {
		case b.illustrative():
			if b.isCommand() && out != nil {
				i++ // the output of an illustrative command is illustrative too
			}
		case b.isCommand():
			r.command(b, out)
			if out != nil {
				i++
			}
		case b.Lang == "console":
			r.console(b)
		case b.isTranscript():
			r.transcript(b)
		case b.isContinued():
			r.continued(b)
		case r.strict:
			r.t.Errorf("%s:%d: a ```%s block that is neither run nor marked {illustrative}", r.doc, b.Line, b.Lang)
		}
	}
	r.stopStreams()
}

// rewrite points a documented command at the test's server and binary.
func (r *docRunner) rewrite(cmd string) string {
	cmd = r.cluster.rewrite(cmd)
	cmd = strings.ReplaceAll(cmd, "go run ./cmd/herald", "herald")
	for _, a := range []string{"localhost:7420", "127.0.0.1:7420"} {
		cmd = strings.ReplaceAll(cmd, a, r.server.Addr())
	}
	return cmd
}

var streamCommand = regexp.MustCompile(`curl\s+(-\w*N|--no-buffer)|\bherald\s+(watch|consume)\b`)

func (r *docRunner) shell(script string) *exec.Cmd {
	cmd := exec.Command("sh", "-c", r.rewrite(script))
	cmd.Dir, cmd.Env = r.dir, r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stopped as a group: sh and its children
	return cmd
}

// command runs a ```sh block and checks its output against out (nil: exit status 0).
func (r *docRunner) command(b docBlock, out *docBlock) {
	r.t.Helper()
	if flags, ok := serveFlags(b.Text); ok {
		if out != nil {
			r.t.Fatalf("%s:%d: a herald serve block cannot show an output", r.doc, b.Line)
		}
		if clusterFlags(flags) {
			r.startNode(flags)
			return
		}
		r.startServer(flags) // on a free port and a new data directory
		return
	}
	if streamCommand.MatchString(b.Text) {
		r.stream(b, out)
		return
	}
	got, err := r.runShell(r.shell(b.Text), "")
	where := fmt.Sprintf("%s:%d", r.doc, b.Line)
	if out == nil {
		if err != nil {
			r.t.Errorf("%s: %v\n%s\noutput:\n%s", where, err, b.Text, got)
		}
		return
	}
	if want := r.cluster.rewrite(out.Text); !docMatch(out.Lang, want, got) {
		r.t.Errorf("%s: the output of\n%s\ndoes not match %s:%d.\ngot:\n%s\nwant:\n%s", where, b.Text, r.doc, out.Line, got, want)
	}
}

// runShell runs cmd with stdin and returns what it wrote to standard output and error,
// in the order it wrote it.
func (r *docRunner) runShell(cmd *exec.Cmd, stdin string) (string, error) {
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &buf, &buf, strings.NewReader(stdin)
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return buf.String(), err
	case <-time.After(time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return buf.String(), fmt.Errorf("still running after a minute")
	}
}

// docStream is a command running in the background and the lines it printed.
type docStream struct {
	cmd   *exec.Cmd
	text  string // the command as the document shows it
	lines chan string
	done  chan struct{}
	tee   string // the file it copies its output to ("" when none)
}

var teeFile = regexp.MustCompile(`\|\s*tee\s+([^\s|;&]+)`)

// stream starts a streaming command, reads as many lines as out shows and compares them.
func (r *docRunner) stream(b docBlock, out *docBlock) {
	r.t.Helper()
	if out == nil {
		r.t.Fatalf("%s:%d: a streaming command needs its output shown right after it", r.doc, b.Line)
	}
	cmd := r.shell(b.Text)
	pr, pw, err := os.Pipe()
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	err = cmd.Start()
	pw.Close() // the command holds its own copy
	if err != nil {
		pr.Close()
		r.t.Fatal(err)
	}
	s := &docStream{cmd: cmd, text: b.Text, lines: make(chan string, 64), done: make(chan struct{})}
	if m := teeFile.FindStringSubmatch(b.Text); m != nil {
		s.tee = filepath.Join(r.dir, m[1])
	}
	r.streams = append(r.streams, s)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
		pr.Close()
		_ = cmd.Wait()
	}()
	r.expectStream(s, *out)
}

// continued compares the next lines of the last stream still open with a
// ```text {continued} block.
func (r *docRunner) continued(b docBlock) {
	r.t.Helper()
	if len(r.streams) == 0 {
		r.t.Fatalf("%s:%d: a {continued} block with no stream open under its heading", r.doc, b.Line)
	}
	r.expectStream(r.streams[len(r.streams)-1], b)
}

// expectStream reads as many lines of s as out shows, and compares them with it. When s
// copies itself to a file, it waits for the file to hold them too.
func (r *docRunner) expectStream(s *docStream, out docBlock) {
	r.t.Helper()
	where := fmt.Sprintf("%s:%d", r.doc, out.Line)
	want := strings.Split(strings.TrimRight(out.Text, "\n"), "\n")
	var got []string
	timeout := time.After(eventWait)
	for len(got) < len(want) {
		select {
		case line, ok := <-s.lines:
			if !ok {
				r.t.Fatalf("%s: the stream ended after %d of %d lines:\n%s", where, len(got), len(want), strings.Join(got, "\n"))
			}
			if strings.HasPrefix(line, ":") { // a server-sent-event comment (": ping")
				continue
			}
			got = append(got, line)
		case <-timeout:
			r.t.Fatalf("%s: %d of %d lines within %v:\n%s", where, len(got), len(want), eventWait, strings.Join(got, "\n"))
		}
	}
	if !docMatch(out.Lang, out.Text, strings.Join(got, "\n")) {
		r.t.Errorf("%s: the stream of\n%s\nprints something else.\ngot:\n%s\nwant:\n%s", where, s.text, strings.Join(got, "\n"), out.Text)
	}
	if last := got[len(got)-1]; s.tee != "" && strings.TrimSpace(last) != "" {
		// tee copies the lines in order: once the last is in the file, all are.
		eventually(r.t, where+": "+filepath.Base(s.tee)+" holds what the stream printed", func() bool {
			data, err := os.ReadFile(s.tee)
			return err == nil && bytes.Contains(data, []byte(last+"\n"))
		})
	}
}

// stopStreams interrupts the background commands, as Ctrl-C would, and waits for them.
func (r *docRunner) stopStreams() {
	for _, s := range r.streams {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGINT)
		go func() {
			for range s.lines { // what nobody reads any more
			}
		}()
		select {
		case <-s.done:
		case <-time.After(stopTimeout):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
	}
	r.streams = nil
}

// console runs the `$ ` lines of a ```console block in one shell and compares what they
// print with the other lines.
func (r *docRunner) console(b docBlock) {
	r.t.Helper()
	var script, want strings.Builder
	cont := false // the last command line ended in a backslash
	for _, line := range strings.Split(strings.TrimRight(b.Text, "\n"), "\n") {
		if c, ok := strings.CutPrefix(line, "$ "); ok || cont {
			if ok {
				line = c
			}
			script.WriteString(line + "\n")
			cont = strings.HasSuffix(line, `\`)
			continue
		}
		want.WriteString(line + "\n")
	}
	got, _ := r.runShell(r.shell(script.String()), "")
	if !docMatch("text", want.String(), got) {
		r.t.Errorf("%s:%d: the session does not print what it shows.\ngot:\n%s\nwant:\n%s", r.doc, b.Line, got, want.String())
	}
}

// transcript replays a query-shell session: the statements after the prompts go to the
// command on its standard input, and what it prints must be the transcript's other lines.
// (Off a terminal the shell prints no prompts and stops at the first error, so a
// transcript shows at most one failing statement, its last.)
func (r *docRunner) transcript(b docBlock) {
	r.t.Helper()
	lines := strings.Split(strings.TrimRight(b.Text, "\n"), "\n")
	command := strings.TrimPrefix(lines[0], "$ ")
	var in, want strings.Builder
	for _, line := range lines[1:] {
		text, ok := strings.CutPrefix(line, queryPrompt)
		if !ok {
			text, ok = strings.CutPrefix(line, queryContinuePrompt)
		}
		switch {
		case ok && strings.TrimSpace(text) == `\q`:
		case ok:
			in.WriteString(text + "\n")
		default:
			want.WriteString(line + "\n")
		}
	}
	got, _ := r.runShell(r.shell(command), in.String())
	if !docMatch("text", want.String(), got) {
		r.t.Errorf("%s:%d: the transcript's statements print something else.\ngot:\n%s\nwant:\n%s", r.doc, b.Line, got, want.String())
	}
}

// docMatch reports whether got is what the document shows as want, in lang's terms:
// "…" matches any run of characters within a line; JSON is compared without whitespace,
// text line by line with runs of blanks compared as one blank.
func docMatch(lang, want, got string) bool {
	norm := func(s string) string {
		if lang == "json" {
			return strings.Join(strings.Fields(s), "")
		}
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		for i, l := range lines {
			lines[i] = strings.Join(strings.Fields(l), " ")
		}
		return strings.Join(lines, "\n")
	}
	parts := strings.Split(norm(want), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re, err := regexp.Compile(`^` + strings.Join(parts, `[^\n]*?`) + `$`)
	return err == nil && re.MatchString(norm(got))
}

// TestDocMatch pins down the comparison the documents' tests rely on.
func TestDocMatch(t *testing.T) {
	for _, c := range []struct {
		lang, want, got string
		ok              bool
	}{
		{"json", `{"id": "n…", "seq": 3}`, `{"id":"n2al3r25faw223z5rbzlsy","seq":3}`, true},
		{"json", `{"id": "n…", "seq": 3}`, `{"id":"n2al3r25faw223z5rbzlsy","seq":4}`, false},
		{"json", "{\"a\":1}\n{\"b\":2}", `{"a":1}{"b":2}`, true},
		{"text", "event: consumed\ndata: {…}\n", "event: consumed\ndata: {\"x\":1}", true},
		{"text", "a … c", "a b\nc", false}, // … stays within its line
		{"text", " x  |  1\n", "x | 1", true},
		{"text", "one\n", "one\ntwo\n", false},
	} {
		if got := docMatch(c.lang, c.want, c.got); got != c.ok {
			t.Errorf("docMatch(%s, %q, %q) = %v", c.lang, c.want, c.got, got)
		}
	}
}
