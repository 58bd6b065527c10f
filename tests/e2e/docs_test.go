package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/testutil"
)

// surveyedDocs are the pages whose shell commands TestDocsRun runs and whose statement
// blocks TestDocsStatementsParse parses.
var surveyedDocs = []string{
	"docs/api.md", "docs/consume.md", "docs/watch.md", "docs/queues.md",
	"docs/operations.md", "docs/security.md", "docs/language.md", "docs/storage.md", "docs/cli.md",
	"docs/scale.md", "docs/tracing.md",
}

// TestDocsRun runs each page's shell commands (```sh, ```bash, ```console and query-shell
// transcripts not marked {illustrative}), in order, against a new server of its own,
// and compares their output with what the page shows (see docrun_test.go). A page with
// nothing to run passes at once.
func TestDocsRun(t *testing.T) {
	requireShellTools(t)
	for _, doc := range surveyedDocs {
		t.Run(strings.TrimSuffix(filepath.Base(doc), ".md"), func(t *testing.T) {
			blocks := readDocBlocks(t, doc)
			if !slices.ContainsFunc(blocks, docBlock.runs) {
				t.Logf("%s shows no command to run", doc)
				return
			}
			newDocRunner(t, doc).run(blocks)
		})
	}
}

// TestDocsServeExample: the exposed server of docs/operations.md, which is also an
// example of `herald serve --help`, starts as written once its files exist (the test
// makes them and puts them in place of the paths it names), and refuses to start
// without client authentication. The page marks the block {illustrative} because it
// names files under /etc.
func TestDocsServeExample(t *testing.T) {
	var example string
	for _, b := range readDocBlocks(t, "docs/operations.md") {
		if b.isCommand() && strings.Contains(b.Text, "0.0.0.0:7420") {
			example = b.Text
		}
	}
	if example == "" {
		t.Fatal("docs/operations.md shows no herald serve command listening on 0.0.0.0:7420")
	}
	oneLine := func(s string) string { return strings.Join(strings.Fields(strings.ReplaceAll(s, "\\\n", " ")), " ") }
	help, err := exec.Command(binary, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("herald serve --help: %v\n%s", err, help)
	}
	if !strings.Contains(oneLine(string(help)), oneLine(example)) {
		t.Errorf("herald serve --help does not show the example of docs/operations.md:\n%s", example)
	}

	certs, err := testutil.NewCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Fields(oneLine(example))
	if len(args) < 2 || args[0] != "herald" || args[1] != "serve" {
		t.Fatalf("not a herald serve command: %s", example)
	}
	args = args[2:]
	for i, a := range args {
		switch a {
		case "/var/lib/herald":
			args[i] = t.TempDir()
		case "/etc/herald/server.pem":
			args[i] = certs.ServerCert
		case "/etc/herald/server-key.pem":
			args[i] = certs.ServerKey
		case "0.0.0.0:7420":
			args[i] = "0.0.0.0:0"
		}
	}

	// Without client authentication such a server refuses to start.
	var noAuth []string
	for _, a := range args {
		if a != "--auth" {
			noAuth = append(noAuth, a)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, binary, append([]string{"serve"}, noAuth...)...).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "client authentication") {
		t.Errorf("without --auth: err %v, output:\n%s", err, out)
	}

	s := startServer(t, t.TempDir(), args...)
	_, port, _ := strings.Cut(s.Addr(), "]:") // [::]:port
	if port == "" {
		_, port, _ = strings.Cut(s.Addr(), ":")
	}
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(certs.CA)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("CA: %v", err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	// A loopback client without credentials acts as "local" (--auth).
	resp, err := hc.Post("https://127.0.0.1:"+port+"/v1/query", "application/json", strings.NewReader(`{"query": "SPAWN j: Job {}"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a query over TLS: status %d", resp.StatusCode)
	}
}

// TestDocsStatementsParse: every unlabelled fenced block of the pages that show
// statements holds statements the server's parser accepts. Each block is sent to a
// throwaway server as it stands; the parser reads a whole request before anything of it
// runs, so only a syntax error (E1001, E1002) fails the test, and whatever executing the
// statements answers does not. (Blocks that are not statements say what they are:
// ```text, ```ebnf, ```go, ```http.)
func TestDocsStatementsParse(t *testing.T) {
	s := startServer(t, t.TempDir())
	n := 0
	for _, doc := range surveyedDocs {
		for _, b := range readDocBlocks(t, doc) {
			if b.Lang != "" || b.illustrative() {
				continue
			}
			n++
			r, err := query(s.URL(), b.Text, nil)
			if err != nil {
				t.Fatalf("%s:%d: %v", doc, b.Line, err)
			}
			if r.Error != nil && (r.Error.Code == "E1001" || r.Error.Code == "E1002") {
				t.Errorf("%s:%d: %s at %d:%d: %s\n%s", doc, b.Line, r.Error.Code, r.Error.Line, r.Error.Column, r.Error.Message, b.Text)
			}
		}
	}
	if n == 0 {
		t.Fatal("no statement blocks found")
	}
	t.Logf("%d blocks of statements parse", n)
}
