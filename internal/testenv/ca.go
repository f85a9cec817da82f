package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a throwaway certificate authority for TLS tests.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEMFile holds the CA certificate (for upstream_ca_file, client_ca_file).
	PEMFile string
	serial  atomic.Int64
}

// NewCA makes a CA valid for an hour and writes its certificate to a file.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	ca, err := NewCAIn(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return ca
}

// NewCAIn makes a CA valid for an hour and writes its certificate to
// dir/ca.pem (for benchmarks and tools outside a test).
func NewCAIn(dir string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "airlock test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{Cert: cert, key: key, PEMFile: filepath.Join(dir, "ca.pem")}
	ca.serial.Store(1)
	if err := os.WriteFile(ca.PEMFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	return ca, nil
}

// Pool returns a pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue returns a certificate for names (DNS names or IP literals) usable
// for server and client authentication.
func (ca *CA) Issue(tb testing.TB, names ...string) tls.Certificate {
	tb.Helper()
	c, err := ca.IssueCert(names...)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// IssueCert is Issue for code outside a test.
func (ca *CA) IssueCert(names ...string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial.Add(1)), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// WriteKeyPair writes cert and key as PEM files and returns their paths.
func WriteKeyPair(tb testing.TB, c tls.Certificate) (certFile, keyFile string) {
	tb.Helper()
	dir := tb.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return certFile, keyFile
}
