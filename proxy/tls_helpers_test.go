package proxy

import (
	"crypto/tls"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

type tls12Config struct{}

// config returns a server TLS config with a certificate for the test
// names, issued by ca.
func (tls12Config) config(ca *testenv.CA, t testing.TB) *tls.Config {
	cert := ca.Issue(t, "api.example.com", "*.example.org", "*.a.example.org", "127.0.0.1")
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
}
