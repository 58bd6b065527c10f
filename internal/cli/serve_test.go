package cli

import (
	"net"
	"strings"
	"testing"
)

// Every example of herald serve --help would start: one that binds beyond loopback
// brings TLS and client authentication, as the server requires (or --insecure).
func TestServeExamplesWouldStart(t *testing.T) {
	cmd := newServeCmd()
	text := strings.ReplaceAll(cmd.Example, "\\\n", " ")
	n := 0
	for line := range strings.SplitSeq(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "herald" || fields[1] != "serve" {
			continue
		}
		n++
		c := newServeCmd()
		if err := c.ParseFlags(fields[2:]); err != nil {
			t.Errorf("example %q: %v", line, err)
			continue
		}
		fl := c.Flags()
		listen, _ := fl.GetString("listen")
		host, _, err := net.SplitHostPort(listen)
		if err != nil {
			t.Errorf("example %q: --listen %q: %v", line, listen, err)
			continue
		}
		ip := net.ParseIP(host)
		if host == "localhost" || ip != nil && ip.IsLoopback() {
			continue
		}
		cert, _ := fl.GetString("tls-cert")
		key, _ := fl.GetString("tls-key")
		ca, _ := fl.GetString("tls-client-ca")
		auth, _ := fl.GetBool("auth")
		insecure, _ := fl.GetBool("insecure")
		if !insecure && (cert == "" || key == "" || ca == "" && !auth) {
			t.Errorf("example %q binds beyond loopback without TLS and client authentication: the server would refuse to start", line)
		}
	}
	if n < 3 {
		t.Fatalf("found %d herald serve examples in\n%s", n, cmd.Example)
	}
}

// A default herald serve writes no prepared log files: 576 MB on a first start was
// too much for a laptop, a CI job or a container.
func TestServePreparedLogsDefault(t *testing.T) {
	fl := newServeCmd().Flags().Lookup("prepared-logs")
	if fl == nil || fl.DefValue != "0" {
		t.Fatalf("--prepared-logs default = %v, want 0", fl)
	}
}
