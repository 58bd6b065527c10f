package cli

import (
	"crypto/tls"
	"net/http"
	"os"

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

// config returns the TLS configuration the flags describe, or nil when they say nothing.
func (t tlsFlags) config() (*tls.Config, error) {
	if t.ca == "" && t.cert == "" && t.key == "" {
		return nil, nil
	}
	c, err := client.LoadTLSConfig(t.ca, t.cert, t.key)
	if err != nil {
		return nil, usageError(err)
	}
	return c, nil
}

// dialOptions are the client options for the flags.
func (t tlsFlags) dialOptions() ([]client.Option, error) {
	c, err := t.config()
	if err != nil {
		return nil, err
	}
	var opts []client.Option
	if c != nil {
		opts = append(opts, client.WithTLSConfig(c))
	}
	if t.token != "" {
		opts = append(opts, client.WithToken(t.token))
	}
	return opts, nil
}

// httpClient is a plain HTTP client with the flags' TLS configuration.
func (t tlsFlags) httpClient() (*http.Client, error) {
	c, err := t.config()
	if err != nil {
		return nil, err
	}
	hc := &http.Client{}
	if c != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = c
		hc.Transport = tr
	}
	if t.token != "" {
		hc = client.WithBearer(hc, t.token)
	}
	return hc, nil
}
