package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
)

// TLS and the exposure check: the listener speaks TLS when a certificate is configured
// (with client certificates verified against a CA when one is given: mutual TLS), the
// files are read again on ReloadTLS (herald serve calls it on SIGHUP), and a server
// bound to anything but loopback refuses to start unless its clients must present a
// certificate, or Config.Insecure says to accept that anyone who reaches the port can
// use it.

// ErrExposed is Start's error for a non-loopback bind without client authentication.
var ErrExposed = errors.New("server: refusing to listen beyond loopback without TLS and client authentication")

// tlsFiles holds the certificate and client CA, swapped whole on reload.
type tlsFiles struct {
	certFile, keyFile, caFile string

	mu   sync.RWMutex
	cert *tls.Certificate
	pool *x509.CertPool
}

// load reads the files; on error the previous ones stay in use.
func (f *tlsFiles) load() error {
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("server: TLS certificate: %w", err)
	}
	var pool *x509.CertPool
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return fmt.Errorf("server: TLS client CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("server: TLS client CA %s: no PEM certificate in it", f.caFile)
		}
	}
	f.mu.Lock()
	f.cert, f.pool = &cert, pool
	f.mu.Unlock()
	return nil
}

// config is the listener's TLS configuration: every handshake reads the current
// certificate and client CA, so a reload applies to new connections at once.
func (f *tlsFiles) config() *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		f.mu.RLock()
		cert, pool := f.cert, f.pool
		f.mu.RUnlock()
		c := base.Clone()
		c.GetConfigForClient = nil
		c.Certificates = []tls.Certificate{*cert}
		if pool != nil {
			c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
		return c, nil
	}
	return base
}

// ReloadTLS reads the certificate, key and client CA files again; new connections use
// them, open ones keep theirs. On error the previous files stay in use.
func (s *Server) ReloadTLS() error {
	s.mu.Lock()
	f := s.tls
	s.mu.Unlock()
	if f == nil {
		return errors.New("server: TLS is not configured")
	}
	if err := f.load(); err != nil {
		return err
	}
	s.log.Info("TLS files reloaded", "cert", f.certFile, "client_ca", f.caFile)
	return nil
}

// loopback reports whether addr (host:port) binds only loopback interfaces.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkExposure refuses a bind beyond loopback that lets anyone in, unless told to.
func (s *Server) checkExposure() error {
	if loopback(s.cfg.Listen) {
		return nil
	}
	// Credentials need TLS to be worth anything on a network.
	authenticated := s.cfg.TLSCertFile != "" && (s.cfg.TLSClientCAFile != "" || s.cfg.Auth)
	switch {
	case authenticated:
		return nil
	case s.cfg.Insecure:
		s.log.Warn("INSECURE: listening beyond loopback without client authentication; anyone who reaches the port can read, write and delete everything",
			"listen", s.cfg.Listen, "tls", s.cfg.TLSCertFile != "")
		return nil
	}
	return fmt.Errorf("%w: %s is not a loopback address. Give a certificate (--tls-cert, --tls-key) and either a client CA (--tls-client-ca) or --auth (bearer tokens), bind to 127.0.0.1, or pass --insecure to run exposed anyway", ErrExposed, s.cfg.Listen)
}
