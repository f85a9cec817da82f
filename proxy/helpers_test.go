package proxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/internal/tracing"
)

// staticResolver answers from a map; names not in it do not exist.
type staticResolver struct {
	mu    sync.Mutex
	hosts map[string][]netip.Addr
	calls map[string]int
	// answer, when set, decides per call (for rebinding tests).
	answer func(host string, call int) []netip.Addr
}

func (r *staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	r.calls[host]++
	if r.answer != nil {
		if a := r.answer(host, r.calls[host]); a != nil {
			return a, nil
		}
	}
	if a, ok := r.hosts[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *staticResolver) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hosts == nil {
		r.hosts = map[string][]netip.Addr{}
	}
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	r.hosts[host] = as
}

// seenRequest is what the upstream received.
type seenRequest struct {
	Host   string
	Method string
	Path   string
	Query  string
	Target string // the request target exactly as received
	Header http.Header
	Body   string
}

type upstream struct {
	srv  *httptest.Server
	port int
	mu   sync.Mutex
	seen []seenRequest
	// rotated, when set, is the only Authorization the upstream accepts on
	// /protected.
	rotated string
	// hold blocks /slow until it is closed.
	hold chan struct{}
	// hungUp receives the path of a /hangup request whose context ended
	// before hold was closed (the proxy gave the request up).
	hungUp chan string
	// events feeds /events: each string is written and flushed as it
	// arrives; the body ends when the channel is closed.
	events chan string
}

func (u *upstream) last(t *testing.T) seenRequest {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		t.Fatal("the upstream received no request")
	}
	return u.seen[len(u.seen)-1]
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

func startUpstream(t testing.TB, ca *testenv.CA) *upstream {
	t.Helper()
	u := &upstream{hold: make(chan struct{}), events: make(chan string), hungUp: make(chan string, 8)}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{Host: r.Host, Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Target: r.RequestURI, Header: r.Header.Clone(), Body: string(body)})
		rotated := u.rotated
		u.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/echo"):
			// Echo the request back, as a careless API might.
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
			_ = json.NewEncoder(w).Encode(map[string]any{"authorization": r.Header.Get("Authorization"),
				"x_api_key": r.Header.Get("X-Api-Key"), "query": r.URL.RawQuery, "body": string(body)})
		case r.URL.Path == "/reformat":
			// Echo the query's api_key decoded: JSON-escaped, with CRLF
			// line ends, and in unpadded base64 and base64url, as APIs
			// that reformat what they got do.
			v := r.URL.Query().Get("api_key")
			j, _ := json.Marshal(map[string]string{"api_key": v})
			_, _ = fmt.Fprintf(w, "%s\n%s\n%s\n%s\n", j, strings.ReplaceAll(v, "\n", "\r\n"),
				base64.RawStdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)))
		case r.URL.Path == "/trailer":
			// Echo the credential in a trailer, after a streamed body.
			w.Header().Set("Trailer", "X-Echo-Trailer")
			_, _ = io.WriteString(w, "part one,")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "part two")
			w.Header().Set("X-Echo-Trailer", r.Header.Get("Authorization"))
		case r.URL.Path == "/stream":
			// No Content-Length: the proxy must frame the body itself.
			for i := range 3 {
				_, _ = fmt.Fprintf(w, "chunk %d;", i)
				w.(http.Flusher).Flush()
			}
		case r.URL.Path == "/events":
			// A stream paced by the test, as an LLM API streams tokens.
			if r.URL.Query().Has("sse") {
				w.Header().Set("Content-Type", "text/event-stream")
			}
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for {
				select {
				case ev, ok := <-u.events:
					if !ok {
						return
					}
					_, _ = io.WriteString(w, ev)
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		case r.URL.Path == "/slow":
			<-u.hold
			_, _ = io.WriteString(w, "slow")
		case strings.HasPrefix(r.URL.Path, "/hangup"):
			select {
			case <-r.Context().Done():
				u.hungUp <- r.URL.Path
			case <-u.hold:
				_, _ = io.WriteString(w, "late")
			}
		case r.URL.Path == "/redirect":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case r.URL.Path == "/protected":
			if r.Header.Get("Authorization") != rotated {
				http.Error(w, "bad credentials", http.StatusUnauthorized)
				return
			}
			_, _ = io.WriteString(w, "welcome")
		case r.URL.Path == "/bad-header-name":
			// A response head net/http would never write: a
			// Transfer-Encoding spelled with a space before its colon,
			// beside a Content-Length.
			conn, bw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = bw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding : chunked\r\nConnection: close\r\n\r\nhello")
			_ = bw.Flush()
		case r.URL.Path == "/hop":
			w.Header().Set("Connection", "X-Upstream-Hop")
			w.Header().Set("X-Upstream-Hop", "1")
			w.Header().Set("Keep-Alive", "timeout=5")
			_, _ = io.WriteString(w, "ok")
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	u.srv.TLS = tls12Config{}.config(ca, t)
	u.srv.StartTLS()
	t.Cleanup(func() {
		select {
		case <-u.hold:
		default:
			close(u.hold)
		}
		u.srv.Close()
	})
	_, port, _ := net.SplitHostPort(u.srv.Listener.Addr().String())
	u.port, _ = strconv.Atoi(port)
	return u
}

// fixture is a broker, a proxy and an upstream wired together.
type fixture struct {
	ca      *testenv.CA
	up      *upstream
	b       *broker.Broker
	res     *staticResolver
	proxy   *Server
	addr    string // proxy host:port
	audit   *testenv.SyncBuffer
	secrets string
	// extraSecrets are more entries of the secrets file (fixtureOpts).
	extraSecrets string
	cancel       context.CancelFunc
	serveErr     chan error
	// lnClosed is closed when Serve closes its listener.
	lnClosed chan struct{}
}

// recordingListener reports its first Close on closed.
type recordingListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *recordingListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

const testSecret = "sk-test-5f2c1e9a7b3d4c6e"

func newFixture(t testing.TB, mutate func(*Config)) *fixture {
	t.Helper()
	return newFixtureWith(t, mutate, fixtureOpts{})
}

// fixtureOpts add to the standard fixture: its CA (to issue certificates
// for more servers first), intents, secret-file entries and sources.
type fixtureOpts struct {
	ca      *testenv.CA
	intents map[string]broker.Intent
	secrets string // more YAML entries of the secrets file
	sources map[string]broker.SecretSource
	reg     prometheus.Registerer // the proxy's metrics; none when nil
	now     func() time.Time      // the broker's clock; time.Now when nil
	// auditSink takes the audit lines; by default they are written, as
	// they come, to the fixture's audit buffer.
	auditSink AuditSink
	// ledger is the proxy's ledger; nil: the broker's store, if it keeps
	// one.
	ledger broker.Ledger
	// store is the broker's handle store; a memory store when nil.
	store broker.Store
	// tracing makes the requests' spans (trace_test.go); off when nil.
	tracing *tracing.Tracing
}

func newFixtureWith(t testing.TB, mutate func(*Config), o fixtureOpts) *fixture {
	t.Helper()
	if o.ca == nil {
		o.ca = testenv.NewCA(t)
	}
	f := &fixture{ca: o.ca, res: &staticResolver{}, audit: &testenv.SyncBuffer{}, extraSecrets: o.secrets}
	if o.auditSink == nil {
		o.auditSink = bufferSink{f.audit}
	}
	f.up = startUpstream(t, f.ca)
	f.res.set("api.example.com", "127.0.0.1")
	f.res.set("a.example.org", "127.0.0.1")
	f.res.set("b.a.example.org", "127.0.0.1")

	f.secrets = filepath.Join(t.TempDir(), "secrets.yaml")
	f.writeSecret(t, testSecret)
	hdr := func(name, tmpl string) broker.Inject {
		return broker.Inject{Kind: &broker.HeaderInject{Name: name, Template: tmpl}}
	}
	ref := broker.SecretRef{Source: broker.SourceFile, Path: "demo/api", Field: "token"}
	bc := broker.Config{
		EgressProxy: "127.0.0.1:0",
		Secrets:     broker.SecretsConfig{File: f.secrets, CacheTTL: time.Hour},
		Intents: map[string]broker.Intent{
			"api.write":       {Class: broker.ClassWrite, Secret: ref, Inject: hdr("Authorization", "Bearer {{secret}}")},
			"api.read":        {Class: broker.ClassRead, Secret: ref, Inject: hdr("X-Api-Key", "{{secret}}")},
			"api.basic":       {Class: broker.ClassWrite, Secret: ref, Inject: broker.Inject{Kind: &broker.BasicInject{UsernameField: "user"}}},
			"api.query":       {Class: broker.ClassRead, Secret: ref, Inject: broker.Inject{Kind: &broker.QueryInject{Name: "api_key"}}},
			"api.placeholder": {Class: broker.ClassWrite, Secret: ref, Inject: broker.Inject{Kind: &broker.PlaceholderInject{}}},
			"api.narrow": {Class: broker.ClassWrite, Secret: ref, Inject: hdr("Authorization", "Bearer {{secret}}"),
				Destinations: []broker.Destination{{Host: "api.example.com", Port: f.up.port, PathPrefix: "/v1/"}}},
		},
	}.WithDefaults()
	maps.Copy(bc.Intents, o.intents)
	if err := bc.Validate(); err != nil {
		t.Fatal(err)
	}
	sources := map[string]broker.SecretSource{broker.SourceFile: &broker.FileSource{Path: f.secrets}}
	maps.Copy(sources, o.sources)
	cache := broker.NewSecretCache(sources, time.Hour, 0, nil, nil)
	var store broker.Store = broker.NewMemoryStore(1000, time.Minute, time.Hour, o.now)
	if o.store != nil {
		store = o.store
	}
	f.b = broker.New(bc, store, cache, broker.Options{Now: o.now})

	cfg := Config{AllowCIDRs: []string{"127.0.0.0/8"}, UpstreamCAFile: f.ca.PEMFile,
		Limits: LimitsConfig{PerHandleRPS: 1000, PerPluginRPS: 1000}}
	if mutate != nil {
		mutate(&cfg)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var err error
	f.proxy, err = New(cfg, f.b, Options{Resolver: f.res, Audit: slog.New(slog.NewJSONHandler(f.audit, nil)), Registerer: o.reg,
		AuditSink: o.auditSink, Ledger: o.ledger, Tracing: o.tracing})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = l.Addr().String()
	f.lnClosed = make(chan struct{})
	rl := &recordingListener{Listener: l, closed: f.lnClosed}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.serveErr = cancel, make(chan error, 1)
	go func() { f.serveErr <- f.proxy.Serve(ctx, rl) }()
	t.Cleanup(func() {
		cancel()
		if err := <-f.serveErr; err != nil {
			t.Errorf("proxy Serve: %v", err)
		}
	})
	return f
}

func (f *fixture) writeSecret(t testing.TB, value string) {
	t.Helper()
	if err := os.WriteFile(f.secrets, []byte(fmt.Sprintf("demo/api: {token: %q, user: bot}\n", value)+f.extraSecrets), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue mints a handle for intent, valid for the upstream's host and port
// (and *.example.org) for a minute.
func (f *fixture) issue(t *testing.T, intent string, inv string) string {
	t.Helper()
	iss, err := f.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: inv, Intent: intent,
		Destinations: []broker.Destination{{Host: "api.example.com", Port: f.up.port}, {Host: "*.example.org", Port: f.up.port}},
		Deadline:     time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return iss.Handle
}

// client returns an HTTP client that uses the proxy with handle as the
// Basic user name, as HTTP_PROXY=http://<handle>@proxy would, and never
// follows redirects.
func (f *fixture) client(handle string) *http.Client {
	pu := &url.URL{Scheme: "http", Host: f.addr}
	if handle != "" {
		pu.User = url.User(handle)
	}
	return &http.Client{
		Transport:     &http.Transport{Proxy: http.ProxyURL(pu)},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

func (f *fixture) url(path string) string {
	return "http://api.example.com:" + strconv.Itoa(f.up.port) + path
}

// do sends a request and returns status, error code header and body.
func do(t *testing.T, c *http.Client, method, u string, hdr http.Header, body string) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(HeaderError), string(b)
}

func newBenchFixture(b *testing.B) *fixture { return newBenchFixtureTB(b) }

func newBenchFixtureTB(t testing.TB) *fixture {
	return newFixture(t, func(c *Config) { c.Limits.PerHandleRPS, c.Limits.PerPluginRPS = 1e9, 1e9 })
}

func (f *fixture) issueB(b *testing.B, intent string) string {
	iss, err := f.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: "inv-bench", Intent: intent,
		Destinations: []broker.Destination{{Host: "api.example.com", Port: f.up.port}}, Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	return iss.Handle
}

// bufferSink writes each audit line to w as it comes, never saturated.
type bufferSink struct{ w io.Writer }

func (b bufferSink) WriteLine(line []byte) { _, _ = b.w.Write(line) }
func (bufferSink) Saturated() bool         { return false }
