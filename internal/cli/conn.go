package cli

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/herald-mq/herald/client"
)

// tlsFlags are a client's credentials and TLS settings, shared by every command that
// talks to a broker: the CA that signed the server's certificate, the client's
// certificate for a server that requires one, and a bearer token for one started with
// --auth.
type tlsFlags struct {
	ca, cert, key string
	token         string
}

// stringFlags is the part of a flag set addTLSFlags needs.
type stringFlags interface {
	StringVar(p *string, name, value, usage string)
}

func addTLSFlags(fl stringFlags, t *tlsFlags) {
	fl.StringVar(&t.ca, "ca", os.Getenv("HERALD_CA"), "CA file (PEM) that signed the broker's certificate, for https:// (default $HERALD_CA; else the system's roots)")
	fl.StringVar(&t.cert, "cert", os.Getenv("HERALD_CERT"), "client certificate file (PEM) for a broker that requires one (default $HERALD_CERT)")
	fl.StringVar(&t.key, "key", os.Getenv("HERALD_KEY"), "key file (PEM) of --cert (default $HERALD_KEY)")
	fl.StringVar(&t.token, "token", os.Getenv("HERALD_TOKEN"), "bearer token for a broker started with --auth (default $HERALD_TOKEN)")
}

// dialOptions are the client options for the flags.
func (t tlsFlags) dialOptions() ([]client.Option, error) {
	var opts []client.Option
	if t.ca != "" || t.cert != "" || t.key != "" {
		c, err := client.LoadTLSConfig(t.ca, t.cert, t.key)
		if err != nil {
			return nil, usageError(err)
		}
		opts = append(opts, client.WithTLSConfig(c))
	}
	if t.token != "" {
		opts = append(opts, client.WithToken(t.token))
	}
	return opts, nil
}

// dial connects to the broker at addr with the flags' credentials; timeout, when
// positive, bounds each request. The client's own log is discarded: what goes wrong
// comes back as errors, which the commands print.
func dial(ctx context.Context, addr string, t tlsFlags, timeout time.Duration) (*client.Client, error) {
	opts, err := t.dialOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, client.WithLogger(slog.New(slog.DiscardHandler)))
	if timeout > 0 {
		opts = append(opts, client.WithTimeout(timeout))
	}
	return client.Dial(ctx, normalizeAddr(addr), opts...)
}

// defaultAddr is the broker URL flags default to: $HERALD_ADDR, or the local default.
func defaultAddr() string {
	if a := os.Getenv("HERALD_ADDR"); a != "" {
		return a
	}
	return "http://127.0.0.1:7420"
}

// normalizeAddr accepts host:port as well as a URL.
func normalizeAddr(addr string) string {
	addr = strings.TrimRight(addr, "/")
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return addr
}
