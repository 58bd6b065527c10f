package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/internal/testutil"
	"github.com/herald-mq/herald/store/memstore"
)

// TestMutualTLS: with a certificate and a client CA the server speaks TLS only and
// lets in only clients with a certificate the CA signed; the Go client brings one.
func TestMutualTLS(t *testing.T) {
	certs, err := testutil.NewCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger(),
		TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSClientCAFile: certs.CA})
	start(t, s)
	url := "https://" + s.Addr()
	ctx := context.Background()

	tc, err := client.LoadTLSConfig(certs.CA, certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, url, client.WithTLSConfig(tc))
	if err != nil {
		t.Fatalf("a client with a certificate: %v", err)
	}
	defer c.Close()
	if _, err := c.Exec(ctx, `SPAWN t: Thing { n = 1 }`, nil); err != nil {
		t.Fatalf("a statement over mutual TLS: %v", err)
	}

	noCert, err := client.LoadTLSConfig(certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if c2, err := client.Dial(ctx, url, client.WithTLSConfig(noCert)); err == nil {
		c2.Close()
		t.Fatal("a client without a certificate got in")
	}
	if resp, err := http.Get("http://" + s.Addr() + "/healthz"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("plain HTTP was answered: %s", body)
		}
	}
}

// TestReloadTLS: ReloadTLS swaps the certificate for new connections; a bad file
// leaves the previous one in use.
func TestReloadTLS(t *testing.T) {
	dir := t.TempDir()
	certs, err := testutil.NewCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger(),
		TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey})
	start(t, s)
	serial := func() string {
		t.Helper()
		pool := x509.NewCertPool()
		pem, _ := os.ReadFile(certs.CA)
		pool.AppendCertsFromPEM(pem)
		conn, err := tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: pool})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	cert, key, err := certs.Issue("server", true) // overwrites the files in place
	if err != nil || cert != certs.ServerCert || key != certs.ServerKey {
		t.Fatalf("reissue: %v %s %s", err, cert, key)
	}
	if err := s.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	after := serial()
	if after == before {
		t.Fatalf("the certificate was not reloaded (serial %s)", after)
	}
	if err := os.WriteFile(certs.ServerCert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadTLS(); err == nil {
		t.Fatal("a broken certificate file was accepted")
	}
	if got := serial(); got != after {
		t.Fatalf("after a failed reload the serial is %s, want %s", got, after)
	}
}

// TestExposure: a bind beyond loopback needs client certificates, or Insecure.
func TestExposure(t *testing.T) {
	certs, err := testutil.NewCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"open", Config{}, false},
		{"TLS without client certificates", Config{TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey}, false},
		{"mutual TLS", Config{TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSClientCAFile: certs.CA}, true},
		{"insecure", Config{Insecure: true}, true},
	} {
		cfg := c.cfg
		cfg.Backend, cfg.Listen, cfg.Logger = memstore.New(), "0.0.0.0:0", quietLogger()
		s := New(cfg)
		err := s.Start(context.Background())
		if c.ok != (err == nil) || (!c.ok && (!errors.Is(err, ErrExposed) || !strings.Contains(err.Error(), "--insecure"))) {
			t.Errorf("%s: Start = %v", c.name, err)
		}
		_ = s.Stop(context.Background())
	}
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, ":1": false, "0.0.0.0:1": false, "10.0.0.5:1": false} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v", addr, got)
		}
	}
}

// TestCertificatePrincipal: with Auth, a client certificate acts for the principal its
// common name names, with that principal's grants; while the server has no principal at
// all, a loopback client acts as "local" (how the first one is made), and after that a
// certificate naming no principal is refused, from loopback too.
func TestCertificatePrincipal(t *testing.T) {
	certs, err := testutil.NewCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger(), Auth: true,
		TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSClientCAFile: certs.CA})
	start(t, s)
	ctx := context.Background()
	tc, err := client.LoadTLSConfig(certs.CA, certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, "https://"+s.Addr(), client.WithTLSConfig(tc))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Exec(ctx, `SPAWN t: Thing { n = 1 }`, nil); err != nil {
		t.Fatalf("as local, before the principal exists: %v", err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	req, _ := http.NewRequest(http.MethodPut, "https://"+s.Addr()+"/v1/principals/client", strings.NewReader(`{"grants": ["read:Thing"]}`))
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("create the principal: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := c.Exec(ctx, `MATCH t: Thing RETURN COUNT(t)`, nil); err != nil {
		t.Fatalf("a read the certificate's principal may do: %v", err)
	}
	if _, err := c.Exec(ctx, `SPAWN t: Thing { n = 2 }`, nil); err == nil || !strings.Contains(err.Error(), "E4013") {
		t.Fatalf("a write the certificate's principal may not do: %v", err)
	}

	strangerCert, strangerKey, err := certs.Issue("stranger", false)
	if err != nil {
		t.Fatal(err)
	}
	stc, err := client.LoadTLSConfig(certs.CA, strangerCert, strangerKey)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := client.Dial(ctx, "https://"+s.Addr(), client.WithTLSConfig(stc))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if _, err := sc.Exec(ctx, `MATCH t: Thing RETURN COUNT(t)`, nil); herald.CodeOf(err) != herald.CodeUnauthenticated {
		t.Fatalf("a certificate naming no principal, from loopback, once principals exist: %v (want E4014)", err)
	}
}
