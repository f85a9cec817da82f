package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.yaml.in/yaml/v3"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// kindCase walks one inject kind end to end. Every registered kind needs
// one: a kind registered without its walk, or without an injector, fails
// TestEveryKindEndToEnd.
type kindCase struct {
	// settings is the kind's block as an operator writes it in YAML;
	// {{host}} is the verifying upstream's https://host:port.
	settings string
	// fields are the secret's fields besides "secret", the bound one.
	fields map[string]string
	// secret is the bound value (default walkSecret).
	secret string
	// send adds what the plugin sends itself (placeholder: the handle).
	send func(r *http.Request, handle string)
	// check is the upstream's verdict on what arrived at /walk/<kind>;
	// token, if set, is the token endpoint's at /token/<kind>, and
	// returns the access token to hand out.
	check func(r *http.Request, body []byte, secret string) error
	token func(r *http.Request, secret string) (string, error)
}

const walkSecret = "walk-secret-3e1d9c7b5a"

// kindCases are the walks of the registered kinds, by kind name.
var kindCases = map[string]kindCase{
	"header": {settings: `{name: X-Api-Key, template: "Key {{secret}}"}`,
		check: func(r *http.Request, _ []byte, secret string) error {
			return want(r.Header.Get("X-Api-Key") == "Key "+secret, "X-Api-Key")
		}},
	"basic": {settings: `{username_field: user}`, fields: map[string]string{"user": "walk-user"},
		check: func(r *http.Request, _ []byte, secret string) error {
			u, p, ok := r.BasicAuth()
			return want(ok && u == "walk-user" && p == secret, "basic auth")
		}},
	"query": {settings: `{name: api_key}`,
		check: func(r *http.Request, _ []byte, secret string) error {
			return want(r.URL.Query()["api_key"] != nil && r.URL.Query().Get("api_key") == secret, "api_key")
		}},
	"placeholder": {settings: `{headers: [X-Token]}`,
		send: func(r *http.Request, handle string) { r.Header.Set("X-Token", "Token "+handle) },
		check: func(r *http.Request, _ []byte, secret string) error {
			return want(r.Header.Get("X-Token") == "Token "+secret, "X-Token")
		}},
	"hmac": {settings: `{header: X-Signature, template: "v1={{signature}}"}`,
		check: func(r *http.Request, body []byte, secret string) error {
			return want(len(body) > 0 && r.Header.Get("X-Signature") == "v1="+hexMAC(secret, string(body)), "X-Signature")
		}},
	"aws_sigv4": {settings: `{region: us-east-1, service: execute-api}`, fields: map[string]string{"access_key_id": awsKeyID},
		check: func(r *http.Request, body []byte, secret string) error { return verifySigV4(r, body, secret) }},
	"oauth2_client_credentials": {settings: `{token_url: "{{host}}/token/oauth2_client_credentials", client_id_field: client_id}`,
		fields: map[string]string{"client_id": "walk-client"},
		token: func(r *http.Request, secret string) (string, error) {
			id, sec, ok := r.BasicAuth()
			if err := want(ok && id == "walk-client" && sec == secret && r.PostFormValue("grant_type") == "client_credentials", "client credentials"); err != nil {
				return "", err
			}
			return "at-cc-7f3e", nil
		},
		check: func(r *http.Request, _ []byte, _ string) error {
			return want(r.Header.Get("Authorization") == "Bearer at-cc-7f3e", "access token")
		}},
	"oauth2_jwt_bearer": {settings: `{token_url: "{{host}}/token/oauth2_jwt_bearer"}`,
		fields: map[string]string{"client_email": "walk@example.org"}, secret: walkECKey,
		token: func(r *http.Request, _ string) (string, error) {
			tok, err := jwt.Parse(r.PostFormValue("assertion"), func(*jwt.Token) (any, error) { return walkECPublic, nil },
				jwt.WithValidMethods([]string{"ES256"}), jwt.WithIssuer("walk@example.org"), jwt.WithExpirationRequired())
			if err != nil || !tok.Valid {
				return "", fmt.Errorf("assertion: %v", err)
			}
			return "at-jwt-5c1a", nil
		},
		check: func(r *http.Request, _ []byte, _ string) error {
			return want(r.Header.Get("Authorization") == "Bearer at-jwt-5c1a", "access token")
		}},
}

func want(ok bool, what string) error {
	if !ok {
		return errors.New(what + " did not arrive in the form the kind promises")
	}
	return nil
}

// The JWT bearer walk's key: P-256, generated once per test binary.
var walkECKey, walkECPublic = func() (string, *ecdsa.PublicKey) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), &k.PublicKey
}()

// walkUpstream is a TLS server that checks each kind's credential as its
// API would, and answers 200 only when it arrived in the right form.
func walkUpstream(t testing.TB, ca *testenv.CA) (*httptest.Server, int) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		kind, isToken := strings.CutPrefix(r.URL.Path, "/token/")
		if !isToken {
			kind = strings.TrimPrefix(r.URL.Path, "/walk/")
		}
		kc, ok := kindCases[kind]
		if !ok {
			http.Error(w, "no such kind", http.StatusNotFound)
			return
		}
		secret := kc.secretValue()
		if isToken {
			if kc.token == nil {
				http.Error(w, "kind has no token endpoint", http.StatusNotFound)
				return
			}
			tok, err := kc.token(r, secret)
			if err != nil {
				http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "bearer", "expires_in": 3600})
			return
		}
		if err := kc.check(r, body, secret); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, "verified "+kind)
	}))
	srv.TLS = tls12Config{}.config(ca, t)
	srv.TLS.Certificates = append(srv.TLS.Certificates, ca.Issue(t, "kinds.example.org"))
	srv.TLS.ClientAuth = tls.RequestClientCert // the client_cert kind's check reads it
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return srv, p
}

func (kc kindCase) secretValue() string {
	if kc.secret != "" {
		return kc.secret
	}
	return walkSecret
}

// Every registered kind, walked through the whole path: its settings as
// an operator writes them are decoded and validated, a handle is issued
// for it, and a request through the proxy reaches an upstream that checks
// the credential arrived in the form the kind promises. A kind registered
// without a walk, an injector, working settings or a working injection
// fails here.
func TestEveryKindEndToEnd(t *testing.T) {
	ca := testenv.NewCA(t)
	_, port := walkUpstream(t, ca)
	host := "https://kinds.example.org:" + strconv.Itoa(port)

	intents := map[string]broker.Intent{}
	var secrets strings.Builder
	for _, kind := range broker.InjectKinds() {
		kc, ok := kindCases[kind]
		if !ok {
			t.Errorf("inject kind %q is registered without a walk in kindCases", kind)
			continue
		}
		if _, ok := injectors[kind]; !ok {
			t.Errorf("inject kind %q is registered without an injector", kind)
		}
		doc := fmt.Sprintf("class: write\nsecret: {source: file, path: walk/%s, field: secret}\ndestinations: [%q]\ninject:\n  %s: %s\n",
			kind, host+"/", kind, strings.ReplaceAll(kc.settings, "{{host}}", host))
		var in broker.Intent
		dec := yaml.NewDecoder(strings.NewReader(doc))
		dec.KnownFields(true)
		if err := dec.Decode(&in); err != nil {
			t.Fatalf("%s: %v\n%s", kind, err, doc)
		}
		intents["walk."+kind] = in
		fields := map[string]string{"secret": kc.secretValue()}
		for k, v := range kc.fields {
			fields[k] = v
		}
		b, _ := json.Marshal(fields)
		fmt.Fprintf(&secrets, "walk/%s: %s\n", kind, b)
	}
	if t.Failed() {
		t.FailNow()
	}
	// Validate through the broker's own config checks, with defaults.
	bc := broker.Config{Secrets: broker.SecretsConfig{File: "secrets.yaml"}, Intents: intents}.WithDefaults()
	if err := bc.Validate(); err != nil {
		t.Fatalf("settings refused: %v", err)
	}
	f := newFixtureWith(t, nil, fixtureOpts{ca: ca, intents: bc.Intents, secrets: secrets.String()})
	f.writeSecret(t, testSecret)
	f.res.set("kinds.example.org", "127.0.0.1")

	for _, kind := range broker.InjectKinds() {
		t.Run(kind, func(t *testing.T) {
			kc := kindCases[kind]
			handle := f.issueFor(t, "walk."+kind)
			req, err := http.NewRequest(http.MethodPost, "http://kinds.example.org:"+strconv.Itoa(port)+"/walk/"+kind+"?q=1",
				strings.NewReader(`{"walk":"`+kind+`"}`))
			if err != nil {
				t.Fatal(err)
			}
			if kc.send != nil {
				kc.send(req, handle)
			}
			resp, err := f.client(handle).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || string(body) != "verified "+kind {
				t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get(HeaderError), body)
			}
		})
	}
}

// A kind the proxy has no injector for, settings that are not the type
// their kind's injector applies, or an intent with no kind, is refused
// with inject_kind_unsupported before anything is sent: the denying
// default of the injector table.
func TestUnknownKindRefused(t *testing.T) {
	f := newFixture(t, nil)
	handle := f.issue(t, "api.write", "inv-unknown-kind")
	for _, tc := range []struct {
		name string
		kind broker.InjectKind
	}{
		{"kind without an injector", kindWithoutInjector{}},
		{"settings of another type under a known name", headerImpostor{}},
		{"no kind", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.proxy.broker = intentOverride{Broker: f.b, kind: tc.kind}
			t.Cleanup(func() { f.proxy.broker = f.b })
			u, _ := url.Parse(f.url("/v1/items"))
			r := &http.Request{Method: "GET", URL: u, Host: u.Host, Body: http.NoBody,
				Header: http.Header{"Proxy-Authorization": {"Bearer " + handle}}}
			x, d := f.proxy.prepare(r, &auditRecord{start: time.Now()})
			if d == nil || d.code != CodeInjectUnsupported || x != nil {
				t.Fatalf("denial %+v, exchange %v", d, x)
			}
			if resp := d.response(r); resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("status %d", resp.StatusCode)
			}
		})
	}
}

// intentOverride answers every intent with the given kind.
type intentOverride struct {
	*broker.Broker
	kind broker.InjectKind
}

func (o intentOverride) Intent(name string) (broker.Intent, bool) {
	in, ok := o.Broker.Intent(name)
	in.Inject.Kind = o.kind
	return in, ok
}

type kindWithoutInjector struct{}

func (kindWithoutInjector) Kind() string                                          { return "no_injector" }
func (k kindWithoutInjector) WithDefaults() broker.InjectKind                     { return k }
func (kindWithoutInjector) Validate(string, broker.Intent) []error                { return nil }
func (kindWithoutInjector) CompleteSecret(s broker.Secret) (broker.Secret, error) { return s, nil }

// headerImpostor calls itself header but is not broker.HeaderInject.
type headerImpostor struct{ kindWithoutInjector }

func (headerImpostor) Kind() string { return "header" }
