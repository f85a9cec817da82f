package mcp_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
)

// authServer is an OAuth 2.1 authorization server for one public
// client: authorization code with PKCE (S256), access tokens ES256 JWTs
// whose audience is the resource the client asked for.
type authServer struct {
	srv  *httptest.Server
	key  *ecdsa.PrivateKey
	mu   sync.Mutex
	code map[string][2]string // code -> PKCE challenge, resource
	// resources are the resource parameters of the authorization and
	// token requests, in order.
	resources []string
}

func newAuthServer(t *testing.T) *authServer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	a := &authServer{key: k, code: map[string][2]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		iss := a.srv.URL
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": iss, "authorization_endpoint": iss + "/authorize",
			"token_endpoint": iss + "/token", "jwks_uri": iss + "/jwks", "response_types_supported": []string{"code"},
			"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"none"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != "agent-app" || q.Get("code_challenge_method") != "S256" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		code := rand.Text()
		a.mu.Lock()
		a.code[code] = [2]string{q.Get("code_challenge"), q.Get("resource")}
		a.resources = append(a.resources, q.Get("resource"))
		a.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		back.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}}.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		a.mu.Lock()
		c, ok := a.code[r.PostForm.Get("code")]
		delete(a.code, r.PostForm.Get("code"))
		a.resources = append(a.resources, r.PostForm.Get("resource"))
		a.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c[0] || r.PostForm.Get("resource") != c[1] {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
			return
		}
		s, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k, KeyID: "k1"}},
			(&jose.SignerOptions{}).WithType("JWT"))
		now := time.Now()
		tok, _ := jwt.Signed(s).Claims(map[string]any{"iss": a.srv.URL, "aud": c[1], "sub": "agent-7",
			"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}).Serialize()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 300})
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

// The Go SDK's client, knowing only the endpoint and its own client id,
// finds from the 401 where to get a token (the protected resource
// metadata names the issuer), gets one for the endpoint from the
// authorization server, and calls a tool as the token's subject.
func TestOAuthDiscoveryWithGoSDK(t *testing.T) {
	as := newAuthServer(t)
	var resource string
	f := newFixtureServe(t, hostmcp.Options{}, allowAll, func(h *host.Host) error { return addStub(h, "stub") },
		func(h http.Handler) (string, map[string]string) {
			srv := httptest.NewUnstartedServer(nil)
			resource = "http://" + srv.Listener.Addr().String() + hostmcp.Path
			keys, err := control.NewJWKS(control.JWKSOptions{URL: as.srv.URL + "/jwks"})
			if err != nil {
				t.Fatal(err)
			}
			v, err := control.NewJWTVerifier(control.JWTOptions{Issuer: as.srv.URL, Audience: resource, Keys: keys})
			if err != nil {
				t.Fatal(err)
			}
			res, err := control.NewProtectedResource(resource, []string{as.srv.URL}, nil)
			if err != nil {
				t.Fatal(err)
			}
			srv.Config.Handler = control.Authenticate(h, control.AuthOptions{JWT: v, Resource: res}, nil)
			srv.Start()
			t.Cleanup(srv.Close)
			return resource, nil
		})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer noRedirect.CloseIdleConnections()
	oh, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient: &oauthex.ClientCredentials{ClientID: "agent-app"},
		RedirectURL:         "http://127.0.0.1:9/callback",
		// The user's browser: the authorization server approves at
		// once and redirects back with the code.
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
			resp, err := noRedirect.Do(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			loc, err := resp.Location()
			if err != nil {
				return nil, errors.New("the authorization server did not redirect back")
			}
			return &auth.AuthorizationResult{Code: loc.Query().Get("code"), State: loc.Query().Get("state")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "oauth-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.url, OAuthHandler: oh}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "stub__echo", Arguments: map[string]any{"say": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := res.StructuredContent.(map[string]any); res.IsError || out["status"] != "STATUS_SUCCEEDED" {
		t.Fatalf("result: %v", res.StructuredContent)
	}
	as.mu.Lock()
	asked := append([]string(nil), as.resources...)
	as.mu.Unlock()
	if len(asked) != 2 || asked[0] != resource || asked[1] != resource {
		t.Fatalf("the client asked the authorization server for %q, want the endpoint %s", asked, resource)
	}
	if rec := records(t, f.evPath, "invocation.start"); len(rec) != 1 || rec[0]["principal"] != "jwt:"+as.srv.URL+"#agent-7" {
		t.Fatalf("evidence of the call: %v", rec)
	}
}
