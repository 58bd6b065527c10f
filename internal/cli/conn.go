package cli

import (
	"crypto/tls"
	"net/http"
	"os"

	"github.com/herald-mq/herald/client"
)

// tlsFlags are the client side of TLS, shared by every command that talks to a broker:
// the CA that signed the server's certificate and, for a server that requires one, the
// client's certificate.
type tlsFlags struct {
	ca, cert, key string
}

// stringFlags is the part of a flag set addTLSFlags needs.
type stringFlags interface {
	StringVar(p *string, name, value, usage string)
}

func addTLSFlags(fl stringFlags, t *tlsFlags) {
	fl.StringVar(&t.ca, "ca", os.Getenv("HERALD_CA"), "CA file (PEM) that signed the broker's certificate, for https:// (default $HERALD_CA; else the system's roots)")
	fl.StringVar(&t.cert, "cert", os.Getenv("HERALD_CERT"), "client certificate file (PEM) for a broker that requires one (default $HERALD_CERT)")
	fl.StringVar(&t.key, "key", os.Getenv("HERALD_KEY"), "key file (PEM) of --cert (default $HERALD_KEY)")
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
	if err != nil || c == nil {
		return nil, err
	}
	return []client.Option{client.WithTLSConfig(c)}, nil
}

// httpClient is a plain HTTP client with the flags' TLS configuration.
func (t tlsFlags) httpClient() (*http.Client, error) {
	c, err := t.config()
	if err != nil || c == nil {
		return &http.Client{}, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = c
	return &http.Client{Transport: tr}, nil
}
