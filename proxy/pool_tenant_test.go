package proxy

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// strayServer is a desynchronised HTTP/1.1 upstream for name (TLS, a
// certificate from ca, no h2) that reflects each request's Authorization
// in its answer, and that, on a connection which has already answered a
// request, sends one stray response — reflecting the previous request's
// Authorization — ahead of the next answer: a stray response that comes
// some time after a complete one, at the worst moment, after the
// proxy's reuse check and with the next request already written. It
// counts the connections it accepted.
type strayServer struct {
	port  int
	conns atomic.Int32
}

func startStrayServer(t *testing.T, ca *testenv.CA, name string) *strayServer {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, name)}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s := &strayServer{port: l.Addr().(*net.TCPAddr).Port}
	answer := func(status int, body string) string {
		return "HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				prev := ""
				for n := 0; ; n++ {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, r.Body)
					auth := r.Header.Get("Authorization")
					status := http.StatusOK
					if r.Header.Get("Upgrade") != "" {
						status = http.StatusUnauthorized // a WebSocket handshake refused
					}
					out := answer(status, "answer for "+auth)
					if n > 0 {
						out = answer(http.StatusOK, "stray answer for "+prev) + out
					}
					prev = auth
					if _, err := io.WriteString(c, out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

// secretOfC is plugin C's secret, bound to the intent other.write; the
// fixture's testSecret is plugin A's (api.write).
const secretOfC = "sk-other-9d8e7f6a5b4c3d2e"

// Nothing upstream is shared between plugins or credentials. Plugin A
// calls a desynchronised upstream that reflects Authorization; then
// plugin C calls it: C never reads A's answer (with A's secret, which
// C's echo guard does not know), in the plain mode, inside a tunnel, and
// over HTTP/2, because C's request never takes A's connection. A's own
// next request does take A's connection (the pool still pools), so the
// worst the upstream can do is confuse A with itself; and A with
// another credential gets a connection of its own.
func TestUpstreamNeverSharedAcrossPlugins(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.NewCA(t)
	f := newFixtureWith(t, func(c *Config) {
		c.Intercept = InterceptConfig{CAFile: dir + "/ca.pem", CAKeyFile: dir + "/ca.key"}
	}, fixtureOpts{ca: ca, secrets: "demo/other: {token: " + secretOfC + "}\n", intents: map[string]broker.Intent{
		"other.write": {Class: broker.ClassWrite, Secret: broker.SecretRef{Source: broker.SourceFile, Path: "demo/other", Field: "token"},
			Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}},
	}})
	caFile := dir + "/ca.pem"
	for _, mode := range []struct {
		name   string
		scheme string
		ca     string
		h2     bool
	}{
		{"plain", "http", "", false},
		{"intercept", "https", caFile, false},
		{"intercept HTTP/2", "https", caFile, true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			up := startStrayServer(t, ca, "api.example.com")
			u := mode.scheme + "://api.example.com:" + strconv.Itoa(up.port) + "/v1/x"
			get := func(plugin, intent string) string {
				t.Helper()
				h := f.issueAsAt(t, plugin, intent, "inv-"+plugin, up.port)
				code, errCode, body := do(t, proxyClient(t, f.addr, h, mode.ca, mode.h2), http.MethodGet, u, nil, "")
				if code != http.StatusOK {
					t.Fatalf("%s: %d %q %s", plugin, code, errCode, body)
				}
				return body
			}
			answered := func(body string) bool { return strings.HasPrefix(body, "answer for Bearer "+Redaction) }
			if body := get("plugin-a", "api.write"); !answered(body) {
				t.Fatalf("plugin A got %q", body)
			}
			if body := get("plugin-c", "other.write"); strings.Contains(body, testSecret) || !answered(body) {
				t.Fatalf("plugin C got %q: another plugin's answer, with its secret", body)
			}
			if n := up.conns.Load(); n != 2 {
				t.Fatalf("the upstream saw %d connections for two plugins, want 2", n)
			}
			// A again: its own connection, and the stray answer is its
			// own (its secret redacted by its own guard).
			if body := get("plugin-a", "api.write"); strings.Contains(body, testSecret) || strings.Contains(body, secretOfC) {
				t.Fatalf("plugin A's second request got %q", body)
			}
			if n := up.conns.Load(); n != 2 {
				t.Fatalf("plugin A's second request opened a connection of its own (%d): the pool does not pool", n)
			}
			// Plugin A with C's intent: another credential, another
			// connection.
			if body := get("plugin-a", "other.write"); strings.Contains(body, testSecret) {
				t.Fatalf("plugin A with another credential got %q", body)
			}
			if n := up.conns.Load(); n != 3 {
				t.Fatalf("another credential of plugin A shared a connection (%d connections, want 3)", n)
			}
		})
	}
}

// A WebSocket handshake the upstream refuses leaves no connection for
// the next handshake, which may be another plugin's.
func TestWebSocketHandshakeConnectionNotReused(t *testing.T) {
	ca := testenv.NewCA(t)
	f := newFixtureWith(t, nil, fixtureOpts{ca: ca, secrets: "demo/other: {token: " + secretOfC + "}\n", intents: map[string]broker.Intent{
		"other.write": {Class: broker.ClassWrite, Secret: broker.SecretRef{Source: broker.SourceFile, Path: "demo/other", Field: "token"},
			Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}},
	}})
	up := startStrayServer(t, ca, "api.example.com")
	hdr := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key": {base64.StdEncoding.EncodeToString(make([]byte, 16))}}
	u := "http://api.example.com:" + strconv.Itoa(up.port) + "/ws"
	for i, c := range []struct{ plugin, intent string }{{"plugin-a", "api.write"}, {"plugin-c", "other.write"}} {
		h := f.issueAsAt(t, c.plugin, c.intent, "inv-ws", up.port)
		code, _, body := do(t, proxyClient(t, f.addr, h, "", false), http.MethodGet, u, hdr, "")
		if code != http.StatusUnauthorized || strings.Contains(body, testSecret) || strings.Contains(body, "stray") {
			t.Fatalf("%s's refused handshake: %d %q", c.plugin, code, body)
		}
		if n := up.conns.Load(); n != int32(i+1) {
			t.Fatalf("%d handshakes, %d upstream connections: a refused handshake's connection was reused", i+1, n)
		}
	}
}

// The idle pool holds at most max_idle_conns connections however many
// plugins and credentials come and go: past it the connection idle the
// longest closes, and a sweep leaves no empty pool behind.
func TestIdlePoolBounded(t *testing.T) {
	u, url := rawUpstream(t, func(_ int, r *http.Request, _ io.Writer) string { return okFor(r) })
	u.idle.total = 3
	for i := range 5 {
		req, _ := http.NewRequest("GET", url+"/x", nil)
		resp, err := u.RoundTrip(req, credKey{plugin: "plugin-" + strconv.Itoa(i), intent: "api.write", version: 1})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if conns, keys := u.idle.size(); conns != min(i+1, 3) || keys != conns {
			t.Fatalf("after %d plugins: %d idle connections in %d pools, want at most 3", i+1, conns, keys)
		}
	}
	u.idle.mu.Lock()
	for k := range u.idle.byKey {
		if k.cred.plugin == "plugin-0" || k.cred.plugin == "plugin-1" {
			t.Errorf("the oldest idle connections (%s) were kept over newer ones", k.cred.plugin)
		}
	}
	u.idle.mu.Unlock()
	// Taking a connection and giving it back allocates nothing (the
	// request path's benchmarks stay as they were).
	key := poolKey{authority: strings.TrimPrefix(url, "https://"), cred: credKey{plugin: "plugin-4", intent: "api.write", version: 1}}
	if n := testing.AllocsPerRun(100, func() { u.idle.put(u.idle.get(key)) }); n != 0 {
		t.Errorf("a pool round trip allocates %v times", n)
	}
	// In use, then idle past the cutoff: the sweep closes them all and
	// drops every key.
	if pc := u.idle.get(key); pc == nil {
		t.Fatal("the newest connection is not in the pool")
	} else {
		pc.Close()
	}
	u.idle.sweep(time.Now().Add(time.Hour))
	u.idle.mu.Lock()
	defer u.idle.mu.Unlock()
	if u.idle.lru.n != 0 || len(u.idle.byKey) != 0 {
		t.Fatalf("after a sweep: %d idle connections, %d keys", u.idle.lru.n, len(u.idle.byKey))
	}
}

// The per-credential HTTP/2 transports are bounded, the least recently
// used dropped first.
func TestH2TransportsBounded(t *testing.T) {
	p := newH2Pools(Config{}.WithDefaults(), &dialer{}, &tls.Config{})
	p.max = 2
	k := func(plugin string) credKey { return credKey{plugin: plugin, intent: "i", version: 1} }
	a := p.transport(k("a"))
	p.transport(k("b"))
	if p.transport(k("a")) != a {
		t.Fatal("a credential's transport was not kept")
	}
	p.transport(k("c")) // b is the least recently used
	if p.len() != 2 || p.transport(k("a")) != a {
		t.Fatalf("%d transports; a kept: %v", p.len(), p.transport(k("a")) == a)
	}
	p.mu.Lock()
	_, b := p.m[k("b")]
	p.mu.Unlock()
	if b {
		t.Fatal("the least recently used transport was kept over a newer one")
	}
}
