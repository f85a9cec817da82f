package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// Every processor end to end with its credential in a real Vault: the
// plugin holds a handle, the proxy reads the secret from Vault, signs or
// obtains a token, and the upstream (which recomputes signatures, or
// knows the tokens its token endpoint issued) accepts the request.
func TestProcessorsWithVault(t *testing.T) {
	vault := testenv.NewVault(t) // sealed at the end
	vc := vault.Client(t)
	ca := testenv.NewCA(t)
	v := startVerifier(t, ca, "sqs.us-east-1.amazonaws.com")
	a := startAuthServer(t, ca)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	a.pub["ec-vault"] = ecKey.Public()
	for path, data := range map[string]map[string]any{
		"airlock-proc/hmac":  {"key": hmacKey},
		"airlock-proc/aws":   {"access_key_id": awsKeyID, "secret_access_key": awsSecretKey},
		"airlock-proc/oauth": {"client_id": ccClientID, "client_secret": ccClientSecret},
		"airlock-proc/cold":  {"client_secret": ccClientSecret},
		"airlock-proc/sa":    {"client_email": "svc@example.org", "private_key_id": "ec-vault", "private_key": pemKey(t, ecKey)},
	} {
		if _, err := vc.KVv2("secret").Put(t.Context(), path, data); err != nil {
			t.Fatal(err)
		}
	}
	ref := func(path, field string) broker.SecretRef {
		return broker.SecretRef{Source: broker.SourceVault, Mount: "secret", Path: path, Field: field, KVVersion: 2}
	}
	sigDests := []broker.Destination{{Host: "sig.example.org", Port: v.port}, {Host: "sqs.us-east-1.amazonaws.com", Port: v.port}}
	authDests := []broker.Destination{{Host: "auth.example.org", Port: a.port}}
	ti := broker.TokenInject{TokenURL: "https://auth.example.org:" + strconv.Itoa(a.port) + "/token", Scopes: []string{"read", "write"}}
	f := newFixtureWith(t, nil, fixtureOpts{ca: ca, sources: map[string]broker.SecretSource{broker.SourceVault: &broker.VaultSource{Client: vc}},
		intents: map[string]broker.Intent{
			"v.hmac": {Class: broker.ClassWrite, Secret: ref("airlock-proc/hmac", "key"), Destinations: sigDests,
				Inject: broker.Inject{Kind: &broker.HMACInject{Header: "X-Signature", Template: "sha256={{signature}}"}}},
			"v.aws": {Class: broker.ClassWrite, Secret: ref("airlock-proc/aws", "secret_access_key"), Destinations: sigDests,
				Inject: broker.Inject{Kind: &broker.SigV4Inject{}}},
			"v.cc": {Class: broker.ClassWrite, Secret: ref("airlock-proc/oauth", "client_secret"), Destinations: authDests,
				Inject: broker.Inject{Kind: &broker.OAuth2ClientCredentialsInject{TokenInject: ti, ClientIDField: "client_id"}}},
			"v.jwt": {Class: broker.ClassWrite, Secret: ref("airlock-proc/sa", "private_key"), Destinations: authDests,
				Inject: broker.Inject{Kind: &broker.OAuth2JWTBearerInject{TokenInject: ti}}},
			"v.cold": {Class: broker.ClassWrite, Secret: ref("airlock-proc/cold", "client_secret"), Destinations: authDests,
				Inject: broker.Inject{Kind: &broker.OAuth2ClientCredentialsInject{TokenInject: ti, ClientID: ccClientID}}},
		}})
	for _, n := range []string{"sig.example.org", "sqs.us-east-1.amazonaws.com", "auth.example.org"} {
		f.res.set(n, "127.0.0.1")
	}
	sig := func(host, path string) string { return "http://" + host + ":" + strconv.Itoa(v.port) + path }
	for _, tc := range []struct{ intent, method, url, body string }{
		{"v.hmac", "POST", sig("sig.example.org", "/hmac/sha256/hook"), `{"id":7}`},
		{"v.aws", "POST", sig("sqs.us-east-1.amazonaws.com", "/aws/queue"), "Action=SendMessage"},
		{"v.cc", "GET", a.apiURL("orders"), ""},
		{"v.jwt", "GET", a.apiURL("me"), ""},
	} {
		t.Run(tc.intent, func(t *testing.T) {
			code, errCode, body := do(t, f.client(f.issueFor(t, tc.intent)), tc.method, tc.url, nil, tc.body)
			if code != http.StatusOK || errCode != "" {
				t.Fatalf("%d %q: %s", code, errCode, body)
			}
			for _, leak := range []string{hmacKey, awsSecretKey, ccClientSecret, "at-"} {
				if strings.Contains(body, leak) {
					t.Fatalf("the plugin saw a secret or token: %s", body)
				}
			}
		})
	}

	// Vault sealed: a processor whose secret is not cached answers 503
	// secret_unavailable, and neither the token endpoint nor the API is
	// asked.
	vault.Seal(t)
	before := a.fetches.Load()
	a.mu.Lock()
	seen := len(a.seenAPI)
	a.mu.Unlock()
	code, errCode, _ := do(t, f.client(f.issueFor(t, "v.cold")), "GET", a.apiURL("orders"), nil, "")
	if code != http.StatusServiceUnavailable || errCode != CodeSecretUnavailable {
		t.Fatalf("Vault sealed: %d %q", code, errCode)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fetches.Load() != before || len(a.seenAPI) != seen {
		t.Fatal("a request went out without its credential")
	}
}
