package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herald-mq/herald/internal/testutil"
)

// docCluster is the nodes of a cluster on PostgreSQL that a document starts, one
// `herald serve --store postgres://…` block each (see docrun_test.go).
type docCluster struct {
	nodes  []*testutil.Server
	schema string            // the document's schema in the test's database
	addrs  map[string]string // documented listen address → the node's
}

// clusterFlags reports whether serve flags name a PostgreSQL store.
func clusterFlags(flags []string) bool {
	for i, f := range flags {
		if (f == "--store" && i+1 < len(flags) && isPostgres(flags[i+1])) ||
			(strings.HasPrefix(f, "--store=") && isPostgres(strings.TrimPrefix(f, "--store="))) {
			return true
		}
	}
	return false
}

func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// rewrite puts the nodes' addresses in place of the documented ones.
func (c *docCluster) rewrite(text string) string {
	for doc, real := range c.addrs {
		text = strings.ReplaceAll(text, doc, real)
	}
	return text
}

// startNode starts the node of a `herald serve --store postgres://… FLAGS` block: on
// the test's PostgreSQL and the document's schema, listening on a free port with as
// many digits as the documented one. The first node takes the place of the test's
// server (HERALD_ADDR, and localhost:7420 in commands, name it from then on).
func (r *docRunner) startNode(flags []string) {
	r.t.Helper()
	c := &r.cluster
	dsn := testutil.PostgresDSN(r.t) // skips the test where PostgreSQL is not installed
	if c.schema == "" {
		c.schema, c.addrs = testutil.SchemaName(), map[string]string{}
		schema := c.schema
		r.t.Cleanup(func() { testutil.DropSchema(dsn, schema) }) // after the nodes are killed
	}
	flags = append([]string(nil), flags...)
	for i := 0; i < len(flags); i++ {
		switch f := flags[i]; {
		case f == "--store" && i+1 < len(flags):
			flags[i+1] = dsn
		case strings.HasPrefix(f, "--store="):
			flags[i] = "--store=" + dsn
		case f == "--listen" && i+1 < len(flags):
			doc := flags[i+1]
			if _, ok := c.addrs[doc]; !ok {
				c.addrs[doc] = freeAddrLike(r.t, doc)
			}
		}
	}
	for i := range flags {
		flags[i] = c.rewrite(flags[i])
	}
	s := startServer(r.t, r.t.TempDir(), append(flags, "--store-schema", c.schema)...)
	if len(c.nodes) == 0 {
		r.stopStreams()
		r.server.Kill()
		r.server = s
		r.env = append(os.Environ(),
			"PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"),
			"HERALD_ADDR="+s.URL())
	}
	c.nodes = append(c.nodes, s)
}

// freeAddrLike returns a free loopback address whose port has as many digits as
// addr's, so that what a document shows keeps its widths.
func freeAddrLike(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil || len(port) < 4 {
		t.Fatalf("a node's --listen %q: want host:port with a port of four or five digits", addr)
	}
	lo, hi := 1024, 9999
	if len(port) == 5 {
		lo, hi = 10000, 60999
	}
	for range 200 {
		p := lo + rand.IntN(hi-lo+1)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		return fmt.Sprintf("127.0.0.1:%d", p)
	}
	t.Fatalf("no free port like %s", addr)
	return ""
}
