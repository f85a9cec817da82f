package proxy

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// issuePass mints the plugin pass a host puts in HTTPS_PROXY, for the
// upstream's host and port only.
func (f *fixture) issuePass(t *testing.T) string {
	t.Helper()
	iss, err := f.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: "pass-1", Pass: true,
		Destinations: []broker.Destination{{Host: "api.example.com", Port: f.up.port}}})
	if err != nil {
		t.Fatal(err)
	}
	return iss.Handle
}

// A placeholder intent whose handle travels only inside the tunnel: the
// plugin pass in HTTPS_PROXY attributes the CONNECT, the request's own
// handle (the SDK's API key) is resolved and replaced inside.
func TestPassPlaceholderClient(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	pass := f.issuePass(t)
	h := f.issue(t, "api.placeholder", "inv-pass-ph")
	c := f.httpsClient(t, pass, caFile)
	code, errCode, body := do(t, c, http.MethodPost, f.httpsURL("/v1/chat"), http.Header{"Authorization": {"Bearer " + h}}, `{}`)
	if code != http.StatusOK || errCode != "" {
		t.Fatalf("status %d code %q: %s", code, errCode, body)
	}
	if got := f.up.last(t).Header.Get("Authorization"); got != "Bearer "+testSecret {
		t.Fatalf("upstream Authorization = %q", got)
	}

	// Inside a pass's tunnel a request without a handle of its own is not
	// given the pass: it has no credential.
	if code, errCode, _ := do(t, c, http.MethodGet, f.httpsURL("/ok"), nil, ""); code != http.StatusProxyAuthRequired || errCode != CodeHandleMissing {
		t.Fatalf("no handle inside a pass tunnel: %d %q", code, errCode)
	}
}

// The pass opens tunnels to its own destinations only, and is nothing
// else: not a handle for a plain request, not a handle inside a tunnel.
func TestPassRefusals(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	pass := f.issuePass(t)
	port := strconv.Itoa(f.up.port)
	for _, target := range []string{"other.example.net:" + port, "b.a.example.org:" + port, "api.example.com:" + strconv.Itoa(f.up.port^1)} {
		if _, status, code := rawConnect(t, f.addr, target, pass); status != http.StatusForbidden || code != CodeDestination {
			t.Fatalf("CONNECT %s with the pass: %d %q", target, status, code)
		}
	}
	if n := f.proxy.ca.Load().leaves.size(); n != 0 {
		t.Fatalf("%d certificates minted for refused CONNECTs", n)
	}
	if code, errCode, _ := do(t, f.client(pass), http.MethodGet, f.url("/ok"), nil, ""); code != http.StatusForbidden || errCode != CodePassNotAHandle {
		t.Fatalf("the pass as a plain request's handle: %d %q", code, errCode)
	}
	c := f.httpsClient(t, pass, caFile)
	if code, errCode, _ := do(t, c, http.MethodGet, f.httpsURL("/ok"), http.Header{"X-Api-Key": {pass}}, ""); code != http.StatusForbidden || errCode != CodePassNotAHandle {
		t.Fatalf("the pass as a handle inside its tunnel: %d %q", code, errCode)
	}
	if _, err := f.b.RevokePlugin(context.Background(), "plugin-1"); err != nil {
		t.Fatal(err)
	}
	if _, status, code := rawConnect(t, f.addr, "api.example.com:"+port, pass); status != http.StatusForbidden || code != CodeHandleInvalid {
		t.Fatalf("CONNECT with a revoked pass: %d %q", status, code)
	}
}

// Node's https module inside a tunnel it opens with its own http module
// (Node 20 reads no proxy variable): the plugin pass from HTTPS_PROXY on
// the CONNECT, the intercept CA from NODE_EXTRA_CA_CERTS, the handle as
// the API key of a placeholder intent.
func TestPassNodeHTTPS(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Missing(t, "node")
	}
	f, caFile := newInterceptFixture(t)
	pass := f.issuePass(t)
	h := f.issue(t, "api.placeholder", "inv-node-https")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "testdata/node_https.js", f.httpsURL("/echo"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "HTTPS_PROXY=http://airlock:" + pass + "@" + f.addr,
		"NODE_EXTRA_CA_CERTS=" + caFile, "API_KEY=" + h}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "200\n") {
		t.Fatalf("node: %v\n%s", err, out)
	}
	if strings.Contains(string(out), testSecret) || !strings.Contains(string(out), Redaction) {
		t.Fatalf("node saw the secret or no redaction:\n%s", out)
	}
	if got := f.up.last(t).Header.Get("Authorization"); got != "Bearer "+testSecret {
		t.Fatalf("upstream saw Authorization %q", got)
	}
}
