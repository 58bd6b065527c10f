package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-mq/herald/client"
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

// herald serve --otlp-endpoint exports the server's spans: a message published with a
// trace context gets a commit span in that trace, posted as OTLP JSON to the endpoint's
// /v1/traces by the time the server has stopped.
func TestServeExportsSpans(t *testing.T) {
	var (
		mu    sync.Mutex
		posts []string
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, r.URL.Path+" "+string(b))
		mu.Unlock()
	}))
	defer collector.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- Run(ctx, []string{"serve", "--listen", addr, "--data", t.TempDir(), "--otlp-endpoint", collector.URL}, strings.NewReader(""), io.Discard, &stderr)
	}()
	var c *client.Client
	for deadline := time.Now().Add(10 * time.Second); ; {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
		c, err = client.Dial(dctx, "http://"+addr)
		dcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the server did not come up: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	if _, err := c.Publish(context.Background(), "Job", map[string]any{"_trace": "00-" + traceID + "-b7ad6b7169203331-01"}); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(posts, "\n")
	if !strings.Contains(all, "/v1/traces ") || !strings.Contains(all, `"name":"commit Job"`) || !strings.Contains(all, `"traceId":"`+traceID+`"`) || !strings.Contains(all, `"parentSpanId":"b7ad6b7169203331"`) {
		t.Fatalf("the collector received:\n%s", all)
	}
}
