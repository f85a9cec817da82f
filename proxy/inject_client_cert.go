package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"net/http"
	"sync"

	"github.com/airlock-dev/airlock/broker"
)

// The client_cert kind: the secret's certificate and key are presented
// on the upstream TLS connection. The request itself is untouched; its
// context carries the certificate to the upstream client, which pools
// connections per certificate (a connection made with one invocation's
// certificate never carries another's request).

func init() {
	registerInjector("client_cert", kindFuncs[*broker.ClientCertInject]{onInject: injectClientCert})
}

// clientCert is a parsed client certificate and its pool identity.
type clientCert struct {
	cert tls.Certificate
	id   string // hex SHA-256 of the certificate and key PEM
}

type clientCertKey struct{}

// clientCertOf returns the client certificate a request presents, if any.
func clientCertOf(ctx context.Context) *clientCert {
	c, _ := ctx.Value(clientCertKey{}).(*clientCert)
	return c
}

// maxClientCerts bounds the parsed certificates kept; past it the cache
// starts over (a certificate is parsed again on its next use).
const maxClientCerts = 4096

var clientCerts struct {
	sync.Mutex
	byID map[string]*clientCert
}

func injectClientCert(r *http.Request, k *broker.ClientCertInject, s broker.Secret, _ string) (*echoForms, *denial) {
	key := s.Fields[k.KeyField]
	chain := ""
	if k.ChainField != "" {
		chain = s.Fields[k.ChainField]
	}
	sum := sha256.Sum256([]byte(s.Value + "\x00" + key + "\x00" + chain))
	id := hex.EncodeToString(sum[:])
	clientCerts.Lock()
	cc := clientCerts.byID[id]
	clientCerts.Unlock()
	if cc == nil {
		cert, err := tls.X509KeyPair([]byte(s.Value+"\n"+chain), []byte(key))
		if err != nil {
			return nil, deny(CodeSecretInvalid, "the bound secret is not a usable client certificate; no request was sent").
				withReason("certificate and key do not make a key pair")
		}
		cc = &clientCert{cert: cert, id: id}
		clientCerts.Lock()
		if clientCerts.byID == nil || len(clientCerts.byID) >= maxClientCerts {
			clientCerts.byID = map[string]*clientCert{}
		}
		clientCerts.byID[id] = cc
		clientCerts.Unlock()
	}
	*r = *r.WithContext(context.WithValue(r.Context(), clientCertKey{}, cc))
	// The key is what must never come back to the plugin.
	return secretOnlyForms(key), nil
}
