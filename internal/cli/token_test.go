package cli

import (
	"strings"
	"testing"

	"github.com/herald-mq/herald/heraldtest"
)

// TestTokenCommand: create, list and revoke against a server; usage errors name the
// token command.
func TestTokenCommand(t *testing.T) {
	srv := heraldtest.NewServer(t)
	out, errOut, err := run(t, "", "token", "create", "--addr", srv.URL(), "--principal", "ci", "--grant", "read:Job", "--label", "nightly")
	if err != nil || !strings.HasPrefix(out, "token hrd_") || !strings.Contains(out, "for ci") {
		t.Fatalf("create: %v %q %q", err, out, errOut)
	}
	id := strings.TrimSuffix(strings.Fields(out[strings.Index(out, "(id ")+4:])[0], ");")
	out, _, err = run(t, "", "token", "list", "--addr", srv.URL())
	if err != nil || !strings.Contains(out, id+"\tci\tnightly") {
		t.Fatalf("list: %v %q", err, out)
	}
	if out, _, err = run(t, "", "token", "revoke", "--addr", srv.URL(), id); err != nil || out != "revoked "+id+"\n" {
		t.Fatalf("revoke: %v %q", err, out)
	}
	if _, errOut, err = run(t, "", "token", "revoke", "--addr", srv.URL(), id); ExitCode(err) != 1 || !strings.Contains(errOut, "E4007") {
		t.Fatalf("revoke twice: exit %d %q", ExitCode(err), errOut)
	}
	if _, errOut, err = run(t, "", "token", "revoke", "a", "b"); ExitCode(err) != 2 || !strings.Contains(errOut, "usage: herald token revoke ID") {
		t.Fatalf("revoke with two ids: exit %d %q", ExitCode(err), errOut)
	}
	if _, errOut, err = run(t, "", "token", "create", "--addr", srv.URL(), "--principal", "x", "--grant", "fly:Job"); ExitCode(err) != 1 || !strings.Contains(errOut, "E4001") {
		t.Fatalf("a bad grant: exit %d %q", ExitCode(err), errOut)
	}
}
