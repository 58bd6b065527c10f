package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Certs are PEM files for TLS tests: a CA, a server certificate for 127.0.0.1 and
// localhost, and a client certificate, all signed by the CA.
type Certs struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	dir                                              string
	ca                                               *x509.Certificate
	caKey                                            *ecdsa.PrivateKey
	serial                                           int64
}

// NewCerts writes a fresh CA with a server and a client certificate into dir.
func NewCerts(dir string) (*Certs, error) {
	c := &Certs{dir: dir}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "herald test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	if c.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	c.caKey, c.serial = key, 1
	if c.CA, err = c.write("ca.pem", "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if c.ServerCert, c.ServerKey, err = c.Issue("server", true); err != nil {
		return nil, err
	}
	if c.ClientCert, c.ClientKey, err = c.Issue("client", false); err != nil {
		return nil, err
	}
	return c, nil
}

// Issue writes a new certificate and key named name, signed by the CA: a server's (for
// 127.0.0.1 and localhost) or a client's.
func (c *Certs) Issue(name string, server bool) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	c.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(c.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	if certFile, err = c.write(name+".pem", "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	if keyFile, err = c.write(name+"-key.pem", "EC PRIVATE KEY", kder); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func (c *Certs) write(name, typ string, der []byte) (string, error) {
	path := filepath.Join(c.dir, name)
	return path, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
