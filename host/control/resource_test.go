package control_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/airlock-dev/airlock/host/control"
)

// resourceServer serves the control API behind authentication with JWTs
// of p and, withResource, the protected resource /v1/mcp on the
// server's own URL (advertising scopes); it returns the server's URL.
func resourceServer(t *testing.T, p *idp, scopes []string, withResource bool) string {
	t.Helper()
	a := newAPIHost(t)
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	o := control.AuthOptions{JWT: p.verifier(t, nil)}
	if withResource {
		res, err := control.NewProtectedResource(base+"/v1/mcp", []string{p.issuer()}, scopes)
		if err != nil {
			t.Fatal(err)
		}
		o.Resource = res
	}
	srv.Config.Handler = control.Authenticate(a.ctl, o, nil)
	srv.Start()
	t.Cleanup(srv.Close)
	return base
}

// A refused request to the resource names its metadata in
// WWW-Authenticate (RFC 9728), which anyone may read: the Go MCP SDK's
// discovery fetches and checks it. The metadata, at the resource's
// path and at the origin's, says which issuer's tokens the host takes;
// a Host header changes nothing in it.
func TestProtectedResourceDiscovery(t *testing.T) {
	p := newIDP(t)
	base := resourceServer(t, p, []string{"tools"}, true)
	ctx := context.Background()
	challenge := func(path string) string {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
		if resp.StatusCode != http.StatusUnauthorized || err != nil || len(cs) != 1 || cs[0].Scheme != "bearer" {
			t.Fatalf("%s: %d %q %v", path, resp.StatusCode, resp.Header.Values("WWW-Authenticate"), err)
		}
		return cs[0].Params["resource_metadata"]
	}
	md := challenge("/v1/mcp")
	if md != base+"/.well-known/oauth-protected-resource/v1/mcp" {
		t.Fatalf("resource_metadata %q", md)
	}
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, md, base+"/v1/mcp", http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(prm.AuthorizationServers, []string{p.issuer()}) || !slices.Equal(prm.BearerMethodsSupported, []string{"header"}) ||
		!slices.Equal(prm.ScopesSupported, []string{"tools"}) {
		t.Fatalf("metadata: %+v", prm)
	}
	// The rest of the control API is the origin's resource.
	if md := challenge("/v1/invocations"); md != base+"/.well-known/oauth-protected-resource" {
		t.Fatalf("resource_metadata of another route %q", md)
	}
	if _, err := oauthex.GetProtectedResourceMetadata(ctx, base+"/.well-known/oauth-protected-resource", base, http.DefaultClient); err != nil {
		t.Fatal(err)
	}
	// The Host header a client sends is not the resource.
	req, _ := http.NewRequest(http.MethodGet, base+"/.well-known/oauth-protected-resource/v1/mcp", nil)
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got["resource"] != base+"/v1/mcp" {
		t.Fatalf("with another Host: %v %v", got, err)
	}
	// Only GET (HEAD, and a CORS preflight) read it.
	resp, err = http.Post(md, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST to the metadata: %d", resp.StatusCode)
	}
	// A valid token still passes.
	req, _ = http.NewRequest(http.MethodGet, base+"/v1/plugins", nil)
	req.Header.Set("Authorization", "Bearer "+p.sign(jose.RS256, p.rsa, "rsa-1", nil))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with a JWT: %d", resp.StatusCode)
	}
}

// Without a protected resource there is no discovery: the well-known
// path is a route like any other, behind authentication.
func TestNoProtectedResource(t *testing.T) {
	base := resourceServer(t, newIDP(t), nil, false)
	resp, err := http.Get(base + "/.well-known/oauth-protected-resource/v1/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer realm="airlock-control"` {
		t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

func TestProtectedResourceURL(t *testing.T) {
	for _, bad := range []string{"/v1/mcp", "ftp://h/v1/mcp", "http://h.example/v1/mcp", "https://u:p@h/v1/mcp",
		"https://h/v1/mcp?x=1", "https://h/v1/mcp#f"} {
		if _, err := control.NewProtectedResource(bad, []string{"https://issuer"}, nil); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	for _, good := range []string{"https://h.example/v1/mcp", "http://127.0.0.1:7070/v1/mcp", "http://[::1]:7070/v1/mcp", "http://localhost/v1/mcp"} {
		if _, err := control.NewProtectedResource(good, []string{"https://issuer"}, nil); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
	if _, err := control.NewProtectedResource("https://h/v1/mcp", nil, nil); err == nil {
		t.Error("no authorization server: accepted")
	}
}
