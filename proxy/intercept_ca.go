package proxy

import (
	"bytes"
	"context"
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
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// interceptCA mints the leaf certificates the proxy shows a plugin inside
// a CONNECT tunnel: ECDSA P-256, one DNS name each, valid for leafValidity,
// cached per name until leafRenew before they expire.
type interceptCA struct {
	cert   *x509.Certificate
	key    crypto.Signer
	state  caState                        // as loaded, to notice changes
	next   *x509.Certificate              // the staged next CA, trusted but not yet signing
	leaves memo[string, *tls.Certificate] // by host
}

const (
	leafValidity  = time.Hour
	leafRenew     = 10 * time.Minute
	maxLeafCache  = 4096
	caValidity    = 5 * 365 * 24 * time.Hour
	caCommonName  = "airlock intercept CA"
	caKeyPEMBlock = "PRIVATE KEY"
)

// parseCA makes the signing CA of st: the bundle certificate whose public
// key matches the key, which must be a CA allowed to sign certificates.
func parseCA(st caState) (*interceptCA, error) {
	certs, err := parseCerts(st.Bundle)
	if err != nil {
		return nil, err
	}
	key, err := parseKey(st.Key)
	if err != nil {
		return nil, fmt.Errorf("proxy.intercept: the CA key: %w", err)
	}
	cert := certFor(certs, key)
	if cert == nil {
		return nil, errors.New("proxy.intercept: no certificate in the CA bundle matches the CA key")
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("proxy.intercept: the CA certificate is not a CA allowed to sign certificates")
	}
	ca := &interceptCA{cert: cert, key: key, state: st, leaves: memo[string, *tls.Certificate]{max: maxLeafCache}}
	if len(st.NextKey) > 0 && !bytes.Equal(st.NextKey, st.Key) {
		if nk, err := parseKey(st.NextKey); err == nil {
			ca.next = certFor(certs, nk)
		}
	}
	return ca, nil
}

var (
	errKeyNotPEM = errors.New("the private key is not PEM")
	errKeyParse  = errors.New("the private key does not parse as a signing key")
)

// certFor is the certificate among certs whose public key is key's.
func certFor(certs []*x509.Certificate, key crypto.Signer) *x509.Certificate {
	for _, c := range certs {
		if pk, ok := c.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && pk.Equal(key.Public()) {
			return c
		}
	}
	return nil
}

func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, errors.New("proxy.intercept: the CA bundle holds a certificate that does not parse")
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("proxy.intercept: the CA bundle holds no PEM certificate")
	}
	return out, nil
}

// parseKey reads a PEM private key (PKCS#8, or SEC 1 / PKCS#1): the
// intercept CA's, and a JWT bearer processor's signing key.
func parseKey(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errKeyNotPEM
	}
	var k any
	var err error
	switch blk.Type {
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	}
	signer, ok := k.(crypto.Signer)
	if err != nil || !ok {
		return nil, errKeyParse
	}
	return signer, nil
}

// newCA makes a P-256 CA certificate and key (PEM), limited to DNS names
// (and, when permitted is set, to those domains) by name constraints,
// and unable to sign intermediates.
func newCA(permitted []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial,
		Subject:   pkix.Name{CommonName: fmt.Sprintf("%s %s %.8s", caCommonName, now.UTC().Format("2006-01-02"), fmt.Sprintf("%032x", serial))},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caValidity), IsCA: true, BasicConstraintsValid: true,
		MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		// The proxy never mints a leaf for an IP address.
		ExcludedIPRanges:    []*net.IPNet{{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}},
		PermittedDNSDomains: permitted, PermittedDNSDomainsCritical: len(permitted) > 0}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: caKeyPEMBlock, Bytes: kder}), nil
}

// openCA loads the CA from store, creating it when the store holds none;
// two replicas creating at once converge on the one saved first.
func openCA(ctx context.Context, store caStore, permitted []string) (*interceptCA, error) {
	st, err := store.load(ctx)
	if err != nil {
		return nil, err
	}
	if st.empty() {
		cert, key, err := newCA(permitted)
		if err != nil {
			return nil, fmt.Errorf("proxy.intercept: creating the CA: %w", err)
		}
		st = caState{Bundle: cert, Key: key}
		err = store.save(ctx, st)
		if errors.Is(err, errCAConflict) {
			return openCA(ctx, store, permitted)
		}
		if err != nil {
			return nil, fmt.Errorf("proxy.intercept: saving the new CA to %s: %w", store, err)
		}
		if st, err = store.load(ctx); err != nil {
			return nil, err
		}
	}
	ca, err := parseCA(st)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, store)
	}
	if p := store.publish(); p != "" {
		if old, err := os.ReadFile(p); err != nil || !bytes.Equal(old, st.Bundle) {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			if err := fsutil.WriteFile(p, st.Bundle, 0o644); err != nil {
				return nil, fmt.Errorf("proxy.intercept.ca_file: publishing the CA bundle: %w", err)
			}
		}
	}
	return ca, nil
}

// leaf returns a certificate for host alone, minting it when the cache
// has none that stays valid for leafRenew.
func (ca *interceptCA) leaf(host string) (*tls.Certificate, error) {
	now := time.Now()
	if c, ok := ca.leaves.load(host); ok {
		if c.Leaf.NotAfter.After(now.Add(leafRenew)) {
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
	ca.leaves.store(host, c)
	return c, nil
}
