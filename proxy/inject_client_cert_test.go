package proxy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"time"
)

// walkClientCert is a self-signed client certificate and its key (PEM),
// for the client_cert kind's walk.
var walkClientCert, walkClientKey = func() (string, string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "walk-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		panic(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}()

func init() {
	kindCases["client_cert"] = kindCase{settings: `{}`, secret: walkClientCert,
		fields: map[string]string{"private_key": walkClientKey},
		check: func(r *http.Request, _ []byte, secret string) error {
			b, _ := pem.Decode([]byte(secret))
			ok := r.TLS != nil && len(r.TLS.PeerCertificates) == 1 && b != nil && bytes.Equal(r.TLS.PeerCertificates[0].Raw, b.Bytes)
			return want(ok && r.Header.Get("Authorization") == "", "client certificate on the TLS connection, nothing in the request")
		}}
}
