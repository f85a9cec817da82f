//go:build linux

package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/devca"
)

// CA is a throwaway certificate authority for TLS tests.
type CA struct{ *devca.CA }

// NewCA makes a CA valid for an hour and writes its certificate to a file.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	ca, err := devca.New(tb.TempDir(), time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{ca}
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
