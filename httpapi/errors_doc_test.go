package httpapi

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
)

var update = flag.Bool("update", false, "rewrite docs/errors.md from the error table")

// errorsDoc renders docs/errors.md from herald.Codes().
func errorsDoc() string {
	var b strings.Builder
	b.WriteString(`# Error codes

Every error Herald reports carries a stable code. The table below is generated from the
one table in the root package (` + "`herald.Codes()`" + `); a test fails when this file and the
table disagree. Regenerate it with:

    go test ./httpapi -run TestErrorsDoc -update

Code ranges: E1xxx the query language, E2xxx data and schema, E3xxx transactions and
sessions, E4xxx requests, E5xxx the server, E6xxx the change log, E8xxx watches and
deliveries.

Over HTTP an error answers with the status in the table and this body (` + "`line`" + ` and
` + "`column`" + ` appear only when the error points into the query text; both are 1-based,
the column counted in bytes):

` + "```json" + `
{"error": {"code": "E1001", "name": "SYNTAX_ERROR", "message": "expected identifier, found '['", "line": 1, "column": 7}}
` + "```" + `

The RPC column is the Connect/gRPC status code the RPC API uses for the same error.
A call of a procedure the server does not have answers ` + "`E4024`" + ` with ` + "`unimplemented`" + `
(gRPC status 12) in the protocol the caller speaks, where the JSON API answers an unknown
path with ` + "`404 E4007`" + `.

The queue REST API keeps its contract's own bodies for its refusals (docs/queues.md):
its 400 and 404 carry ` + "`E4001`" + ` and ` + "`E4007`" + ` in ` + "`error_code`" + `, its 410 carries ` + "`LOCK_EXPIRED`" + `,
and its 423 names no code. The Go client and ` + "`herald queue`" + ` report the last two as ` + "`E4022`" + `
and ` + "`E4021`" + `.

The Go client (package ` + "`client`" + `) hands every error the server raises back as a
` + "`*herald.Error`" + `, whichever transport carried it, and gives what it refuses itself, before
sending anything, codes of its own, ` + "`E4017`" + ` to ` + "`E4020`" + `, and ` + "`E4023`" + ` to a settlement whose
stream ended before the server answered it; never ` + "`E5001`" + `. A code is an
` + "`errors.Is`" + ` target, so ` + "`errors.Is(err, herald.CodeAckTimeout)`" + ` asks whether a lease
expired without building an error to compare with, and ` + "`herald.CodeOf(err)`" + ` gives the
code of any error (` + "`E5001`" + ` for one that carries none). Failures below the protocol — a
connection refused, the caller's context ending — keep their own errors, except in
` + "`Client.Status`" + ` and ` + "`herald status`" + `, which report a server they cannot reach as
` + "`E4025 UNREACHABLE`" + ` (the cause kept for ` + "`errors.As`" + `): that command exists to ask about
servers that may be down.

| code | name | HTTP | RPC | when |
|---|---|---|---|---|
`)
	for _, c := range herald.Codes() {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", c.Code, c.Name, c.HTTP, c.RPC, strings.ReplaceAll(c.Summary, "|", `\|`))
	}
	return b.String()
}

func TestErrorsDoc(t *testing.T) {
	path := filepath.Join("..", "docs", "errors.md")
	want := errorsDoc()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run: go test ./httpapi -run TestErrorsDoc -update)", err)
	}
	if string(got) != want {
		t.Fatalf("docs/errors.md is out of date with herald.Codes(); run: go test ./httpapi -run TestErrorsDoc -update")
	}
}

// TestEveryCodeHasAStatus keeps the table usable by this package: every code maps to an
// error status.
func TestEveryCodeHasAStatus(t *testing.T) {
	for _, c := range herald.Codes() {
		if c.HTTP < 400 || c.HTTP > 599 {
			t.Errorf("%s: HTTP status %d", c.Code, c.HTTP)
		}
		if Status(&herald.Error{Code: c.Code}) != c.HTTP {
			t.Errorf("%s: Status disagrees with the table", c.Code)
		}
	}
}
