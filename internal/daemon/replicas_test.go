package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	brokerapi "github.com/airlock-dev/airlock/broker/api"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/tokens"
)

// Two airlock serve replicas sharing one real Vault and one real Redis:
// a handle issued on A works through B's proxy, a revocation on B is
// enforced by A's proxy, a token minted on A verifies against B's JWKS,
// and a key rotated on A is used and accepted by B.
func TestTwoServeReplicas(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	rd := testenv.Redis(t)
	t.Setenv("VAULT_TOKEN", v.RootToken)
	if _, err := v.Client(t).KVv2("secret").Put(ctx, "airlock/replicas", map[string]any{"token": "shared-secret-77"}); err != nil {
		t.Fatal(err)
	}
	ca := testenv.NewCA(t)
	seen := make(chan string, 16)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "api.replicas.test")}}
	up.StartTLS()
	defer up.Close()
	_, upPort, _ := net.SplitHostPort(up.Listener.Addr().String())

	states := map[string]string{}
	replica := func(name string) (Ready, *brokerapi.Client) {
		t.Helper()
		state := t.TempDir()
		states[name] = state
		cfg, err := config.Parse([]byte(fmt.Sprintf(`version: v1
state_dir: %q
admin: {listen: %q}
vault: {address: %q}
tokens:
  refresh: 1s
  keys: {source: vault, path: airlock/replica-keys}
broker:
  api: {socket: %q}
  store: {type: redis, redis: {address: %q}}
  intents:
    api:
      class: read
      secret: {source: vault, path: airlock/replicas, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
      destinations: [{host: api.replicas.test, port: %s}]
proxy:
  listen: %q
  allow_cidrs: [127.0.0.0/8]
  upstream_ca_file: %q
  resolve: {api.replicas.test: [127.0.0.1]}
  intercept: {ca_file: %q, vault: {mount: secret, path: airlock/replica-intercept-ca}}
`, state, testenv.FreeAddr(t), v.Addr, filepath.Join(state, "run", "broker.sock"), rd.Addr, upPort, testenv.FreeAddr(t), ca.PEMFile,
			filepath.Join(state, "intercept-ca.pem"))))
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			t.Fatal(err)
		}
		r := serveBackground(t, cfg)
		bc, err := brokerapi.Dial("unix://"+filepath.Join(state, "run", "broker.sock"), brokerapi.DialOptions{TokenFile: filepath.Join(state, "run", "broker.token")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bc.Close() })
		return r, bc
	}
	a, apiA := replica("A")
	b, apiB := replica("B")

	through := func(r Ready, handle string) (int, string) {
		t.Helper()
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: r.Proxy, User: url.User(handle)})}}
		resp, err := c.Get("http://api.replicas.test:" + upPort + "/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("X-Airlock-Error")
	}
	iss, err := apiA.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "inv-r", Intent: "api", Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if code, e := through(b, iss.Handle); code != 200 || <-seen != "Bearer shared-secret-77" {
		t.Fatalf("A's handle through B's proxy: %d %s", code, e)
	}
	if code, _ := through(a, iss.Handle); code != 200 {
		t.Fatal("A's handle through A's proxy")
	}
	<-seen
	if _, err := apiB.RevokeInvocation(ctx, "inv-r"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		code, e := through(a, iss.Handle)
		if code == 403 && e == "handle_invalid" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a revocation on B is not enforced by A: %d %s", code, e)
		}
	}

	// The intercept CA lives in Vault: both replicas published the same
	// bundle, and a client trusting A's bundle opens a tunnel through B.
	bundleA, errA := os.ReadFile(filepath.Join(states["A"], "intercept-ca.pem"))
	bundleB, errB := os.ReadFile(filepath.Join(states["B"], "intercept-ca.pem"))
	if errA != nil || errB != nil || string(bundleA) != string(bundleB) || strings.Contains(string(bundleA), "PRIVATE KEY") {
		t.Fatalf("published bundles differ or hold a key: %v %v", errA, errB)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundleA)
	iss2, err := apiA.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "inv-r2", Intent: "api", Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots},
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: b.Proxy, User: url.User(iss2.Handle)})}}
	resp, err := hc.Get("https://api.replicas.test:" + upPort + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || <-seen != "Bearer shared-secret-77" {
		t.Fatalf("https through B with A's bundle: %d", resp.StatusCode)
	}

	// Tokens: minted on A, verified with B's JWKS; a rotation on A is
	// picked up by B within tokens.refresh.
	verifierB, err := tokens.NewVerifier(&tokens.JWKSClient{URL: "http://" + b.Admin + tokens.JWKSPath}, tokens.VerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mint := func(api *brokerapi.Client) string {
		tok, err := api.MintToken(ctx, broker.TokenRequest{Audience: tokens.AudienceSampling, Deadline: time.Now().Add(time.Minute),
			Binding: tokens.Binding{UserID: "u", ExecutaToolID: "p/t", ToolInvokeID: "i"}, MaxTokensPerCall: 10, MaxCallsPerInvoke: 1})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Raw
	}
	if _, err := verifierB.VerifySampling(ctx, mint(apiA)); err != nil {
		t.Fatalf("A's token against B's JWKS: %v", err)
	}
	ringA, err := RingForCLI(ctx, mustConfigVaultKeys(t, v.Addr), nil)
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := ringA.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		tok := mint(apiB)
		if strings.Contains(kidOf(t, tok), newKey.ID) {
			// B's JWKS now publishes the new key (a verifier that has not
			// cached the old set sees it at once).
			fresh, err := tokens.NewVerifier(&tokens.JWKSClient{URL: "http://" + b.Admin + tokens.JWKSPath}, tokens.VerifierOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range []string{tok, mint(apiA)} {
				if _, err := fresh.VerifySampling(ctx, tk); err != nil {
					t.Fatalf("a token with the rotated key against B's JWKS: %v", err)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B never signed with the key rotated elsewhere")
		}
	}
}

func mustConfigVaultKeys(t *testing.T, addr string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf("version: v1\nstate_dir: %q\nvault: {address: %q}\ntokens: {keys: {source: vault, path: airlock/replica-keys}}\n",
		t.TempDir(), addr)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// kidOf reads a JWT's kid without verifying it.
func kidOf(t *testing.T, tok string) string {
	t.Helper()
	head, _, _ := strings.Cut(tok, ".")
	b, err := base64URL(head)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func base64URL(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
