package proxy

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/airlock-dev/airlock/broker"
)

// serveSandbox hands the proxy a listener of plugin's own, as its host
// does (ServeSandbox), and returns its address.
func (f *fixture) serveSandbox(t *testing.T, plugin string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.proxy.ServeSandbox(ctx, plugin, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeSandbox: %v", err)
		}
	})
	return l.Addr().String()
}

// issueAs mints a handle for plugin (a pass when intent is ""), for the
// upstream's host and port, in invocation inv.
func (f *fixture) issueAs(t *testing.T, plugin, intent, inv string) string {
	t.Helper()
	return f.issueAsAt(t, plugin, intent, inv, f.up.port)
}

// issueAsAt is issueAs for api.example.com on port.
func (f *fixture) issueAsAt(t *testing.T, plugin, intent, inv string, port int) string {
	t.Helper()
	iss, err := f.b.Issue(context.Background(), broker.IssueRequest{PluginID: plugin, InvocationID: inv, Intent: intent, Pass: intent == "",
		Destinations: []broker.Destination{{Host: "api.example.com", Port: port}}, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return iss.Handle
}

// proxyClient is a Go client whose HTTP_PROXY and HTTPS_PROXY are
// cred@addr, trusting the intercept CA in caFile ("" none), speaking
// HTTP/2 inside tunnels when h2.
func proxyClient(t *testing.T, addr, cred, caFile string, h2 bool) *http.Client {
	t.Helper()
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr, User: url.User(cred)}), ForceAttemptHTTP2: h2}
	if caFile != "" {
		tr.TLSClientConfig = &tls.Config{RootCAs: interceptPool(t, caFile)}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// A handle works only for the plugin it was issued to. Plugin b, on its
// own listener, presents plugin a's live handle or pass in every way a
// request can carry one: each is refused 403 handle_not_this_plugins,
// audited under b (never naming a's invocation or intent) and counted
// under b; b's own credentials pass; and on the shared listener a
// handle stands for whoever holds it, as before.
func TestForeignCredentialRefusedOnPluginListener(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	f := newFixtureWith(t, func(c *Config) {
		c.Intercept = InterceptConfig{CAFile: dir + "/ca.pem", CAKeyFile: dir + "/ca.key"}
	}, fixtureOpts{reg: reg})
	caFile := dir + "/ca.pem"
	bAddr := f.serveSandbox(t, "plugin-b")

	aHandle := f.issueAs(t, "plugin-a", "api.write", "inv-of-a")
	aPlaceholder := f.issueAs(t, "plugin-a", "api.placeholder", "inv-of-a")
	aPass := f.issueAs(t, "plugin-a", "", "pass-of-a")
	bHandle := f.issueAs(t, "plugin-b", "api.write", "inv-of-b")
	bPass := f.issueAs(t, "plugin-b", "", "pass-of-b")

	wsHeader := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key": {base64.StdEncoding.EncodeToString(make([]byte, 16))}}
	cases := []struct {
		name   string
		client *http.Client
		url    string
		header http.Header
	}{
		{"plain absolute-form", proxyClient(t, bAddr, aHandle, "", false), f.url("/ok"), nil},
		{"WebSocket handshake", proxyClient(t, bAddr, aHandle, "", false), f.url("/ws"), wsHeader},
		{"CONNECT with a's handle", proxyClient(t, bAddr, aHandle, caFile, false), f.httpsURL("/ok"), nil},
		{"CONNECT with a's pass", proxyClient(t, bAddr, aPass, caFile, false), f.httpsURL("/ok"), nil},
		{"inside b's tunnel, HTTP/1.1", proxyClient(t, bAddr, bPass, caFile, false), f.httpsURL("/v1/chat"),
			http.Header{"Authorization": {"Bearer " + aPlaceholder}}},
		{"inside b's tunnel, HTTP/2", proxyClient(t, bAddr, bPass, caFile, true), f.httpsURL("/v1/chat"),
			http.Header{"Authorization": {"Bearer " + aPlaceholder}}},
	}
	before := f.up.count()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
			for k, v := range tc.header {
				req.Header[k] = v
			}
			resp, err := tc.client.Do(req)
			if strings.HasPrefix(tc.name, "CONNECT") {
				// Go's client reports a refused CONNECT as an error
				// naming the status; the code is in the audit line.
				if err == nil || !strings.Contains(err.Error(), "Forbidden") {
					t.Fatalf("CONNECT with plugin a's credential: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get(HeaderError) != CodeHandleNotThisPlugins {
				t.Fatalf("plugin a's credential on plugin b's listener: %d %q", resp.StatusCode, resp.Header.Get(HeaderError))
			}
		})
	}
	if n := f.up.count(); n != before {
		t.Fatalf("the upstream received %d requests made with plugin a's credentials", n-before)
	}
	lines := 0
	for _, line := range strings.Split(f.audit.String(), "\n") {
		if !strings.Contains(line, CodeHandleNotThisPlugins) {
			continue
		}
		lines++
		if !strings.Contains(line, `"plugin":"plugin-b"`) || strings.Contains(line, "inv-of-a") || strings.Contains(line, "pass-of-a") ||
			!strings.Contains(line, `"intent":""`) || strings.Contains(line, aHandle) {
			t.Errorf("audit line of a refusal: %s", line)
		}
	}
	if lines != len(cases) {
		t.Errorf("%d audit lines say %s, want %d:\n%s", lines, CodeHandleNotThisPlugins, len(cases), f.audit.String())
	}
	if got := testutil.ToFloat64(f.proxy.metrics.foreignCreds.WithLabelValues("plugin-b")); got != float64(len(cases)) {
		t.Errorf("airlock_proxy_handle_not_this_plugins_total{plugin=plugin-b} = %v, want %d", got, len(cases))
	}

	// b's own handle and pass work on its listener, in both modes.
	for _, c := range []struct {
		name   string
		client *http.Client
		url    string
	}{
		{"plain", proxyClient(t, bAddr, bHandle, "", false), f.url("/ok")},
		{"intercept", proxyClient(t, bAddr, bHandle, caFile, false), f.httpsURL("/ok")},
	} {
		if code, errCode, body := do(t, c.client, http.MethodGet, c.url, nil, ""); code != http.StatusOK {
			t.Fatalf("plugin b's own handle (%s): %d %q %s", c.name, code, errCode, body)
		}
	}
	waitAudit(t, f, `"plugin":"plugin-b"`, `"invocation":"inv-of-b"`, `"status":200`)

	// On the shared listener nothing is known of the connection: a's
	// handle is a's, whoever sends it.
	if code, errCode, _ := do(t, proxyClient(t, f.addr, aHandle, "", false), http.MethodGet, f.url("/ok"), nil, ""); code != http.StatusOK {
		t.Fatalf("a's handle on the shared listener: %d %q", code, errCode)
	}
}

// A plugin's own listener is one of the proxy's while it is served: a
// request sent to its address is a loop, refused as one, and its port
// is no longer the proxy's once the listener is gone.
func TestPluginListenerIsTheProxysOwn(t *testing.T) {
	f := newFixture(t, nil)
	bAddr := f.serveSandbox(t, "plugin-b")
	_, port, _ := net.SplitHostPort(bAddr)
	p, _ := strconv.Atoi(port)
	iss, err := f.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-b", InvocationID: "inv-loop", Intent: "api.write",
		Destinations: []broker.Destination{{Host: "api.example.com", Port: p}}, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	c := proxyClient(t, bAddr, iss.Handle, "", false)
	if code, errCode, _ := do(t, c, http.MethodGet, "http://api.example.com:"+port+"/x", nil, ""); code != http.StatusForbidden || errCode != CodeSelfDial {
		t.Fatalf("a request to the plugin's own listener: %d %q", code, errCode)
	}
}

// ServeSandbox serves nobody's listener.
func TestServeSandboxNeedsPlugin(t *testing.T) {
	f := newFixture(t, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := f.proxy.ServeSandbox(context.Background(), "", l); err == nil {
		t.Fatal("ServeSandbox served a listener for no plugin")
	}
}
