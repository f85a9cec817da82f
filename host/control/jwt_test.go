package control_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/airlock-dev/airlock/host/control"
)

// idp is an OIDC issuer for tests: real RS256 and ES256 keys, its JWKS
// served over HTTP, fetches counted.
type idp struct {
	t       testing.TB
	srv     *httptest.Server
	rsa     *rsa.PrivateKey
	ec      *ecdsa.PrivateKey
	fetches atomic.Int32
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	down    atomic.Bool
}

const audience = "airlock-control"

func newIDP(t testing.TB) *idp {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := &idp{t: t, rsa: rk, ec: ek}
	p.keys = []jose.JSONWebKey{
		{Key: &rk.PublicKey, KeyID: "rsa-1", Algorithm: "RS256", Use: "sig"},
		{Key: &ek.PublicKey, KeyID: "ec-1", Algorithm: "ES256", Use: "sig"},
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p.fetches.Add(1)
		if p.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: p.keys})
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *idp) issuer() string { return p.srv.URL }

// addKey publishes another key.
func (p *idp) addKey(k jose.JSONWebKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, k)
}

// sign makes a JWT with alg and key (kid), claims over the defaults.
func (p *idp) sign(alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	p.t.Helper()
	now := time.Now()
	c := map[string]any{"iss": p.issuer(), "aud": audience, "sub": "alice", "exp": now.Add(5 * time.Minute).Unix(),
		"iat": now.Unix(), "nbf": now.Unix()}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		p.t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		p.t.Fatal(err)
	}
	return tok
}

// verifier returns a JWTVerifier for p, with now as its clock.
func (p *idp) verifier(t testing.TB, now func() time.Time, attrs ...string) *control.JWTVerifier {
	t.Helper()
	keys, err := control.NewJWKS(control.JWKSOptions{URL: p.srv.URL, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	v, err := control.NewJWTVerifier(control.JWTOptions{Issuer: p.issuer(), Audience: audience, Keys: keys, Attributes: attrs, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// Bearer JWTs of the configured issuer name their subject,
// issuer-qualified, with the claims the config passes on; every token
// that is not the issuer's, not for this host, not current, or not
// signed with an allowed algorithm is refused 401 before the host sees
// it, and no token reaches the log.
func TestJWTPrincipals(t *testing.T) {
	a := newAPIHost(t)
	p := newIDP(t)
	log, logBuf := logTo()
	srv := httptest.NewServer(control.Authenticate(a.ctl, control.AuthOptions{JWT: p.verifier(t, nil, "groups", "email")}, log))
	defer srv.Close()

	rs := p.sign(jose.RS256, p.rsa, "rsa-1", map[string]any{"email": "alice@example.com", "groups": []string{"ops", "sre"}})
	es := p.sign(jose.ES256, p.ec, "ec-1", map[string]any{"sub": "bob"})
	for _, tc := range []struct{ name, tok, want string }{
		{"RS256", rs, control.JWTPrincipalID(p.issuer(), "alice")},
		{"ES256", es, control.JWTPrincipalID(p.issuer(), "bob")},
	} {
		if got := invoke(t, srv.Client(), srv.URL, tc.tok, stubCall); got.status != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.name, got.status, got.body)
		}
		if got := a.rec.last().Caller; got.ID != tc.want || got.Method != control.MethodJWT {
			t.Fatalf("%s: the host saw %+v, want %s", tc.name, got, tc.want)
		}
	}
	if want := "jwt:" + p.issuer() + "#bob"; a.rec.last().Caller.ID != want {
		t.Fatalf("principal id %q, want %q", a.rec.last().Caller.ID, want)
	}
	invoke(t, srv.Client(), srv.URL, rs, stubCall)
	if attrs := a.rec.last().Caller.Attributes; attrs["email"] != "alice@example.com" || attrs["groups"] != `["ops","sre"]` ||
		attrs["issuer"] != p.issuer() {
		t.Fatalf("attributes %v", attrs)
	}

	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	pubDER, _ := x509.MarshalPKIXPublicKey(&p.rsa.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	payload := b64(`{"iss":"` + p.issuer() + `","aud":"` + audience + `","sub":"mallory","exp":` +
		jsonNum(time.Now().Add(time.Hour).Unix()) + `}`)
	hsInput := b64(`{"alg":"HS256","typ":"JWT","kid":"rsa-1"}`) + "." + payload
	mac := hmac.New(sha256.New, pubPEM)
	mac.Write([]byte(hsInput))
	hs256 := hsInput + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	none := b64(`{"alg":"none","typ":"JWT"}`) + "." + payload + "."

	seen := a.rec.count()
	refused := map[string]string{
		"unknown key":          p.sign(jose.RS256, other, "rsa-2", nil),
		"known kid, other key": p.sign(jose.RS256, other, "rsa-1", nil),
		"expired":              p.sign(jose.RS256, p.rsa, "rsa-1", map[string]any{"exp": time.Now().Add(-time.Hour).Unix(), "iat": time.Now().Add(-2 * time.Hour).Unix(), "nbf": nil}),
		"wrong audience":       p.sign(jose.RS256, p.rsa, "rsa-1", map[string]any{"aud": "someone-else"}),
		"wrong issuer":         p.sign(jose.RS256, p.rsa, "rsa-1", map[string]any{"iss": "https://evil.example"}),
		"no exp":               p.sign(jose.RS256, p.rsa, "rsa-1", map[string]any{"exp": nil}),
		"not yet valid":        p.sign(jose.RS256, p.rsa, "rsa-1", map[string]any{"nbf": time.Now().Add(time.Hour).Unix()}),
		"issued in the future": p.sign(jose.RS256, p.rsa, "rsa-1", map[string]any{"iat": time.Now().Add(time.Hour).Unix()}),
		"no subject":           p.sign(jose.RS256, p.rsa, "rsa-1", map[string]any{"sub": nil}),
		"ES256 key, RS256 kid": p.sign(jose.ES256, p.ec, "rsa-1", nil),
		"alg none":             none,
		"HS256, public key":    hs256,
		"not a JWT at all.x.y": "a.b.c",
	}
	for name, tok := range refused {
		got := invoke(t, srv.Client(), srv.URL, tok, stubCall)
		if got.status != http.StatusUnauthorized || got.code != "unauthenticated" {
			t.Errorf("%s: %d %s", name, got.status, got.body)
		}
	}
	if a.rec.count() != seen {
		t.Fatal("a refused JWT reached the host")
	}
	for _, reason := range []string{"token is expired", "token audience is wrong", "token algorithm is not allowed",
		"token signing key is unknown", "token signature is invalid", "token issuer is wrong", "token claim is missing: exp",
		"token is not valid yet"} {
		if !strings.Contains(logBuf.String(), reason) {
			t.Errorf("no refusal logged %q", reason)
		}
	}
	all := []string{rs, es}
	for _, tok := range refused {
		all = append(all, tok)
	}
	mustNotContain(t, logBuf, all...)
}

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }

// A key the issuer rotates in is fetched when a token names its kid; an
// unknown kid fetches the set at most once per MinRefresh, however many
// tokens name one.
func TestJWKSRefreshOnUnknownKid(t *testing.T) {
	a := newAPIHost(t)
	p := newIDP(t)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	srv := httptest.NewServer(control.Authenticate(a.ctl, control.AuthOptions{JWT: p.verifier(t, now)}, nil))
	defer srv.Close()
	if got := invoke(t, srv.Client(), srv.URL, p.sign(jose.RS256, p.rsa, "rsa-1", nil), stubCall); got.status != http.StatusOK {
		t.Fatalf("first: %d %s", got.status, got.body)
	}
	if n := p.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
	rotated, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tok := p.sign(jose.ES256, rotated, "ec-2", nil)
	if got := invoke(t, srv.Client(), srv.URL, tok, stubCall); got.status != http.StatusUnauthorized || p.fetches.Load() != 1 {
		t.Fatalf("an unknown kid right after a fetch: %d, %d fetches (want 401, 1)", got.status, p.fetches.Load())
	}
	clock.Add(int64(control.DefaultJWKSMinRefresh))
	for range 5 {
		if got := invoke(t, srv.Client(), srv.URL, tok, stubCall); got.status != http.StatusUnauthorized {
			t.Fatalf("a kid the issuer does not publish: %d", got.status)
		}
	}
	if n := p.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches for five unknown kids within MinRefresh, want 2", n)
	}
	p.addKey(jose.JSONWebKey{Key: &rotated.PublicKey, KeyID: "ec-2", Algorithm: "ES256", Use: "sig"})
	clock.Add(int64(control.DefaultJWKSMinRefresh))
	if got := invoke(t, srv.Client(), srv.URL, tok, stubCall); got.status != http.StatusOK {
		t.Fatalf("the rotated-in key after MinRefresh: %d %s", got.status, got.body)
	}
	if n := p.fetches.Load(); n != 3 {
		t.Fatalf("%d fetches, want 3", n)
	}
}

// An issuer whose keys cannot be fetched: a JWT is answered 503
// authentication_unavailable (not 401: the caller may be fine), and the
// host keeps serving the last good set once it had one.
func TestJWKSUnavailable(t *testing.T) {
	a := newAPIHost(t)
	p := newIDP(t)
	p.down.Store(true)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	srv := httptest.NewServer(control.Authenticate(a.ctl, control.AuthOptions{JWT: p.verifier(t, now)}, nil))
	defer srv.Close()
	tok := p.sign(jose.RS256, p.rsa, "rsa-1", map[string]any{"exp": time.Now().Add(time.Hour).Unix()})
	got := invoke(t, srv.Client(), srv.URL, tok, stubCall)
	if got.status != http.StatusServiceUnavailable || got.code != "authentication_unavailable" {
		t.Fatalf("issuer down: %d %s", got.status, got.body)
	}
	p.down.Store(false)
	clock.Add(int64(2 * time.Second))
	if got := invoke(t, srv.Client(), srv.URL, tok, stubCall); got.status != http.StatusOK {
		t.Fatalf("issuer back: %d %s", got.status, got.body)
	}
	p.down.Store(true)
	clock.Add(int64(control.DefaultJWKSMaxAge))
	if got := invoke(t, srv.Client(), srv.URL, tok, stubCall); got.status != http.StatusOK {
		t.Fatalf("issuer down again, stale set kept: %d %s", got.status, got.body)
	}
}

// NewJWTVerifier refuses a config without an audience or keys.
func TestJWTVerifierNeedsAudience(t *testing.T) {
	keys, _ := control.NewJWKS(control.JWKSOptions{File: "/nonexistent"})
	if _, err := control.NewJWTVerifier(control.JWTOptions{Issuer: "https://idp.example", Keys: keys}); err == nil {
		t.Fatal("no audience accepted")
	}
	if _, err := control.NewJWKS(control.JWKSOptions{}); err == nil {
		t.Fatal("neither URL nor file accepted")
	}
}
