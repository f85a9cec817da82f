package proxy

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// interceptCA mints the leaf certificates the proxy shows a plugin inside
// a CONNECT tunnel: ECDSA P-256, one DNS name each, valid for leafValidity,
// cached per name until leafRenew before they expire.
type interceptCA struct {
	cert   *x509.Certificate
	key    crypto.Signer
	leaves sync.Map // host -> *tls.Certificate
	n      atomic.Int32
}

const (
	leafValidity  = time.Hour
	leafRenew     = 10 * time.Minute
	maxLeafCache  = 4096
	caValidity    = 5 * 365 * 24 * time.Hour
	caCommonName  = "airlock intercept CA"
	caKeyPEMBlock = "PRIVATE KEY"
)

// loadOrCreateCA reads the CA from certFile and keyFile, or creates both
// when neither exists. The key file must not be readable by group or
// others.
func loadOrCreateCA(certFile, keyFile string) (*interceptCA, error) {
	_, cerr := os.Stat(certFile)
	_, kerr := os.Stat(keyFile)
	if errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist) {
		if err := createCA(certFile, keyFile); err != nil {
			return nil, fmt.Errorf("proxy.intercept: creating the CA: %w", err)
		}
	}
	st, err := os.Stat(keyFile)
	if err != nil {
		return nil, fmt.Errorf("proxy.intercept.ca_key_file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("proxy.intercept.ca_key_file: mode %04o lets others read the CA key; chmod 600 it", st.Mode().Perm())
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("proxy.intercept.ca_file: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("proxy.intercept.ca_key_file: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, errors.New("proxy.intercept: ca_file and ca_key_file are not a matching PEM certificate and key")
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("proxy.intercept.ca_file: not a CA certificate allowed to sign certificates")
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("proxy.intercept.ca_key_file: the key cannot sign")
	}
	return &interceptCA{cert: cert, key: signer}, nil
}

// createCA writes a new P-256 CA: the key with mode 0600, each file
// written to a temporary name and renamed, so a crash leaves no half CA.
func createCA(certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: caCommonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caValidity), IsCA: true, BasicConstraintsValid: true,
		MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	for _, f := range []string{keyFile, certFile} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			return err
		}
	}
	if err := fsutil.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: caKeyPEMBlock, Bytes: kder}), 0o600); err != nil {
		return err
	}
	return fsutil.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// leaf returns a certificate for host alone, minting it when the cache
// has none that stays valid for leafRenew.
func (ca *interceptCA) leaf(host string) (*tls.Certificate, error) {
	now := time.Now()
	if v, ok := ca.leaves.Load(host); ok {
		if c := v.(*tls.Certificate); c.Leaf.NotAfter.After(now.Add(leafRenew)) {
			return c, nil
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(leafValidity)
	if ca.cert.NotAfter.Before(notAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: now.Add(-5 * time.Minute), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: parsed}
	if ca.n.Add(1) > maxLeafCache {
		ca.leaves.Clear()
		ca.n.Store(1)
	}
	ca.leaves.Store(host, c)
	return c, nil
}
