package proxy

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

const (
	ccClientID     = "airlock-client"
	ccClientSecret = "cs-9d8e7f6a5b4c3d2e1f"
)

// authServer is a token endpoint (/token) and the API that accepts its
// tokens (/api/*), on one TLS server.
type authServer struct {
	srv     *httptest.Server
	port    int
	fetches atomic.Int32
	delay   time.Duration
	pub     map[string]crypto.PublicKey // JWT bearer: kid -> key

	mu      sync.Mutex
	valid   map[string]bool
	mode    string // "" ok; "refuse"; "skew"; "hang" (until release, then 503); "api401" (the API refuses every token)
	seenAPI []string
	// release ends the fetches of mode "hang"; gone receives one value
	// for each such fetch whose client (the proxy) went away.
	release chan struct{}
	gone    chan struct{}
}

func startAuthServer(t testing.TB, ca *testenv.CA) *authServer {
	t.Helper()
	a := &authServer{valid: map[string]bool{}, pub: map[string]crypto.PublicKey{}, release: make(chan struct{}), gone: make(chan struct{}, 64)}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	a.srv.TLS = tls12Config{}.config(ca, t)
	a.srv.StartTLS()
	t.Cleanup(a.srv.Close)
	_, port, _ := net.SplitHostPort(a.srv.Listener.Addr().String())
	a.port, _ = strconv.Atoi(port)
	return a
}

func (a *authServer) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	mode := a.mode
	a.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, "/api/") {
		_, _ = io.Copy(io.Discard, r.Body) // an upload is read before the answer
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		a.mu.Lock()
		ok := a.valid[tok] && mode != "api401"
		a.seenAPI = append(a.seenAPI, tok)
		a.mu.Unlock()
		if !ok {
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		// A careless API echoes the token it got.
		_, _ = fmt.Fprintf(w, "hello, your token is %s", tok)
		return
	}
	a.fetches.Add(1)
	time.Sleep(a.delay)
	_ = r.ParseForm()
	switch mode {
	case "hang":
		select {
		case <-a.release:
			http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
		case <-r.Context().Done():
			a.gone <- struct{}{}
		}
		return
	case "unavailable":
		http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
		return
	case "refuse":
		// An error body that repeats what was sent: it must not reach the plugin.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, `{"error":"invalid_client","error_description":"bad secret %s"}`, ccClientSecret)
		return
	case "skew":
		w.Header().Set("Date", time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"assertion not yet valid"}`)
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "client_credentials":
		id, secret, ok := r.BasicAuth()
		if !ok || id != ccClientID || secret != ccClientSecret || r.PostForm.Get("scope") != "read write" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
	case "urn:ietf:params:oauth:grant-type:jwt-bearer":
		_, err := jwt.Parse(r.PostForm.Get("assertion"), func(tk *jwt.Token) (any, error) {
			return a.pub[fmt.Sprint(tk.Header["kid"])], nil
		}, jwt.WithValidMethods([]string{"RS256", "ES256"}), jwt.WithAudience("https://auth.example.org:"+strconv.Itoa(a.port)+"/token"),
			jwt.WithIssuer("svc@example.org"), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
		if err != nil {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
	default:
		http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
		return
	}
	tok := "at-" + strconv.Itoa(int(a.fetches.Load())) + "-" + rand.Text()
	a.mu.Lock()
	a.valid[tok] = true
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
}

func (a *authServer) set(mode string) { a.mu.Lock(); a.mode = mode; a.mu.Unlock() }

// revokeAll makes the API refuse every token issued so far.
func (a *authServer) revokeAll() { a.mu.Lock(); clear(a.valid); a.mu.Unlock() }

func pemKey(t testing.TB, k crypto.Signer) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// oauthFixture: the standard fixture with client-credentials and JWT
// bearer intents (RSA and EC keys) against one auth server.
func oauthFixture(t testing.TB) (*fixture, *authServer) {
	t.Helper()
	return oauthFixtureWith(t, nil, nil)
}

// mutate, when set, changes the proxy's config after unlimited.
func oauthFixtureWith(t testing.TB, reg prometheus.Registerer, mutate func(*Config)) (*fixture, *authServer) {
	t.Helper()
	ca := testenv.NewCA(t)
	a := startAuthServer(t, ca)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	a.pub["rsa-1"], a.pub["ec-1"] = rsaKey.Public(), ecKey.Public()
	tokenURL := "https://auth.example.org:" + strconv.Itoa(a.port) + "/token"
	dests := []broker.Destination{{Host: "auth.example.org", Port: a.port}}
	ti := broker.TokenInject{TokenURL: tokenURL, Scopes: []string{"read", "write"}}
	intents := map[string]broker.Intent{
		"oauth.cc": {Class: broker.ClassWrite, Destinations: dests,
			Secret: broker.SecretRef{Source: broker.SourceFile, Path: "demo/oauth", Field: "client_secret"},
			Inject: broker.Inject{Kind: &broker.OAuth2ClientCredentialsInject{TokenInject: ti, ClientIDField: "client_id"}}},
		"oauth.rsa": {Class: broker.ClassWrite, Destinations: dests,
			Secret: broker.SecretRef{Source: broker.SourceFile, Path: "demo/sa-rsa", Field: "private_key"},
			Inject: broker.Inject{Kind: &broker.OAuth2JWTBearerInject{TokenInject: ti}}},
		"oauth.ec": {Class: broker.ClassWrite, Destinations: dests,
			Secret: broker.SecretRef{Source: broker.SourceFile, Path: "demo/sa-ec", Field: "private_key"},
			Inject: broker.Inject{Kind: &broker.OAuth2JWTBearerInject{TokenInject: ti}}},
	}
	// An intent whose refreshes back off for an hour after a second
	// refusal or failure in a row: no test can outrun it.
	slow := ti
	slow.RefreshBackoff = time.Hour
	intents["oauth.slow"] = broker.Intent{Class: broker.ClassWrite, Destinations: dests, Secret: intents["oauth.cc"].Secret,
		Inject: broker.Inject{Kind: &broker.OAuth2ClientCredentialsInject{TokenInject: slow, ClientIDField: "client_id"}}}
	// A token endpoint nobody listens at.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := l.Addr().(*net.TCPAddr).Port
	l.Close()
	intents["oauth.down"] = broker.Intent{Class: broker.ClassWrite, Destinations: append(dests, broker.Destination{Host: "gone.example.org", Port: gone}),
		Secret: intents["oauth.cc"].Secret, Inject: broker.Inject{Kind: &broker.OAuth2ClientCredentialsInject{
			TokenInject: broker.TokenInject{TokenURL: "https://gone.example.org:" + strconv.Itoa(gone) + "/token"}, ClientIDField: "client_id"}}}
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	f := newFixtureWith(t, func(c *Config) {
		unlimited(c)
		if mutate != nil {
			mutate(c)
		}
	}, fixtureOpts{ca: ca, intents: intents, reg: reg, secrets: fmt.Sprintf(
		"demo/oauth: {client_id: %q, client_secret: %q}\n"+
			"demo/sa-rsa: {client_email: svc@example.org, private_key_id: rsa-1, private_key: %s}\n"+
			"demo/sa-ec: {client_email: svc@example.org, private_key_id: ec-1, private_key: %s}\n",
		ccClientID, ccClientSecret, quote(pemKey(t, rsaKey)), quote(pemKey(t, ecKey)))})
	f.writeSecret(t, testSecret)
	f.res.set("auth.example.org", "127.0.0.1")
	f.res.set("gone.example.org", "127.0.0.1")
	return f, a
}

func (a *authServer) apiURL(path string) string {
	return "http://auth.example.org:" + strconv.Itoa(a.port) + "/api/" + path
}

func TestOAuth2ClientCredentials(t *testing.T) {
	f, a := oauthFixture(t)
	h := f.issueFor(t, "oauth.cc")
	c := f.client(h)
	for i := range 3 {
		code, errCode, body := do(t, c, http.MethodGet, a.apiURL("items"), nil, "")
		if code != http.StatusOK || errCode != "" {
			t.Fatalf("request %d: %d %q %s", i, code, errCode, body)
		}
		if strings.Contains(body, "at-") || !strings.Contains(body, Redaction) {
			t.Fatalf("request %d: the access token reached the plugin: %s", i, body)
		}
	}
	if n := a.fetches.Load(); n != 1 {
		t.Fatalf("%d token fetches for three requests, want 1", n)
	}
	audit := f.audit.String()
	if strings.Count(audit, `"token_cache":"miss"`) != 1 || strings.Count(audit, `"token_cache":"hit"`) != 2 ||
		!strings.Contains(audit, `"processor":"oauth2_client_credentials"`) {
		t.Fatalf("audit:\n%s", audit)
	}

	t.Run("a refused token is renewed once", func(t *testing.T) {
		a.revokeAll()
		code, errCode, body := do(t, c, http.MethodPost, a.apiURL("items"), nil, `{"n":1}`)
		if code != http.StatusOK || errCode != "" {
			t.Fatalf("after revocation: %d %q %s", code, errCode, body)
		}
		if n := a.fetches.Load(); n != 2 {
			t.Fatalf("%d fetches, want 2", n)
		}
	})

	t.Run("single flight", func(t *testing.T) {
		a.revokeAll()
		f.proxy.tokens.drop("oauth.cc", lastToken(a))
		a.delay = 200 * time.Millisecond
		defer func() { a.delay = 0 }()
		before := a.fetches.Load()
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code, errCode, body := do(t, f.client(h), http.MethodGet, a.apiURL("x"), nil, ""); code != http.StatusOK {
					t.Errorf("%d %q %s", code, errCode, body)
				}
			}()
		}
		wg.Wait()
		if n := a.fetches.Load() - before; n != 1 {
			t.Fatalf("%d fetches for 16 concurrent requests, want 1", n)
		}
	})
}

func lastToken(a *authServer) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seenAPI[len(a.seenAPI)-1]
}

// Failures of the token exchange: each its own code, nothing reaches the
// API without its token, and no refusal body reaches the plugin.
func TestOAuth2Failures(t *testing.T) {
	reg := prometheus.NewRegistry()
	f, a := oauthFixtureWith(t, reg, nil)
	for _, tc := range []struct {
		mode, intent string
		status       int
		code         string
	}{
		{"refuse", "oauth.cc", 502, CodeTokenExchange},
		{"skew", "oauth.rsa", 503, CodeClockSkew},
		{"down", "oauth.down", 502, CodeTokenEndpoint},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			a.set(tc.mode)
			a.mu.Lock()
			seen := len(a.seenAPI)
			a.mu.Unlock()
			code, errCode, body := do(t, f.client(f.issueFor(t, tc.intent)), http.MethodGet, a.apiURL("x"), nil, "")
			if code != tc.status || errCode != tc.code {
				t.Fatalf("%d %q, want %d %q: %s", code, errCode, tc.status, tc.code, body)
			}
			if strings.Contains(body, ccClientSecret) || strings.Contains(body, "assertion") {
				t.Fatalf("the token endpoint's answer reached the plugin: %s", body)
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if len(a.seenAPI) != seen {
				t.Fatal("the API was called without a token")
			}
		})
	}
	a.set("")
	// The token endpoint is dialed under the same address policy.
	f.res.set("gone.example.org", "10.1.2.3")
	if code, errCode, _ := do(t, f.client(f.issueFor(t, "oauth.down")), http.MethodGet, a.apiURL("x"), nil, ""); code != 502 || errCode != CodeTokenEndpoint ||
		!strings.Contains(f.audit.String(), "address_not_allowed") {
		t.Fatalf("a token endpoint at an internal address: %d %q\n%s", code, errCode, f.audit.String())
	}
	if strings.Contains(f.audit.String(), ccClientSecret) {
		t.Fatal("the audit log holds the client secret")
	}
	if _, _, body := do(t, f.client(f.issueFor(t, "oauth.cc")), http.MethodGet, a.apiURL("x"), nil, ""); !strings.Contains(body, Redaction) {
		t.Fatalf("after the failures: %s", body)
	}
	for _, c := range []struct {
		intent, result string
		want           float64
	}{{"oauth.cc", CodeTokenExchange, 1}, {"oauth.rsa", CodeClockSkew, 1}, {"oauth.down", CodeTokenEndpoint, 2}, {"oauth.cc", "ok", 1}} {
		if got := testutil.ToFloat64(f.proxy.metrics.tokenFetches.WithLabelValues(c.intent, c.result)); got != c.want {
			t.Errorf("airlock_proxy_token_fetches_total{%s,%s} = %v, want %v", c.intent, c.result, got, c.want)
		}
	}
}

// The JWT bearer grant with an RSA (RS256) and an EC (ES256) key: the
// endpoint verifies the assertion's signature, issuer, audience and
// expiry.
func TestOAuth2JWTBearer(t *testing.T) {
	f, a := oauthFixture(t)
	for _, intent := range []string{"oauth.rsa", "oauth.ec"} {
		code, errCode, body := do(t, f.client(f.issueFor(t, intent)), http.MethodGet, a.apiURL("me"), nil, "")
		if code != http.StatusOK || errCode != "" || strings.Contains(body, "at-") {
			t.Fatalf("%s: %d %q %s", intent, code, errCode, body)
		}
	}
	if !strings.Contains(f.audit.String(), `"processor":"oauth2_jwt_bearer"`) {
		t.Fatal("audit without the processor")
	}
}
