package executa

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/sandbox"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/executa/sampling"
	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/internal/tracing"
	"github.com/airlock-dev/airlock/proxy"
	"github.com/airlock-dev/airlock/tokens"
)

var goPlugin string

func TestMain(m *testing.M) {
	sandbox.Init() // plugins start through a re-executed test binary
	dir := testenv.Binaries("executa-test-", testenv.Binary{Path: &goPlugin, Pkg: "./testdata/goplugin"})
	code := testenv.MainNoLeaks(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

const apiSecret = "sk-executa-9f8e7d6c5b4a"

type fixture struct {
	b        *broker.Broker
	issuer   *tokens.Issuer
	verifier *tokens.Verifier
	proxy    string
	apiURL   string
	caFile   string // the proxy's intercept CA certificate
	seen     chan string
	// chat, when set, answers /v1/chat/completions instead of the echo.
	chat     atomic.Pointer[http.HandlerFunc]
	sampling sampling.Backend
	port     int
	ring     *tokens.Ring
	audit    *testenv.SyncBuffer // the proxy's audit lines
	// clock is the broker's: a test jumps it past a pass's expiry
	// instead of sleeping there.
	clock *testenv.SkewClock
}

// passTTL is long enough that the host's own renewals (at a third of
// the pass's life, on the real clock) do not happen between a test's
// jumps of the broker's clock, and short enough that a jump past it
// stays before the invocations' real deadlines (60 s).
const passTTL = 30 * time.Second

// newFixture starts the fixture's upstream, broker and egress proxy; the
// proxy traces to tr when one is given.
func newFixture(t *testing.T, tr ...*tracing.Tracing) *fixture {
	t.Helper()
	f := &fixture{seen: make(chan string, 8), audit: &testenv.SyncBuffer{}, clock: new(testenv.SkewClock)}
	ca := testenv.NewCA(t)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case f.seen <- r.Header.Get("Authorization"):
		default:
		}
		if h := f.chat.Load(); h != nil && r.URL.Path == "/v1/chat/completions" {
			(*h)(w, r)
			return
		}
		if r.URL.Path == "/v1/chat/completions" {
			if r.Header.Get("Authorization") != "Bearer sk-openai-in-vault" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			var in struct {
				Model    string                     `json:"model"`
				Messages []struct{ Content string } `json:"messages"`
			}
			json.NewDecoder(r.Body).Decode(&in)
			json.NewEncoder(w).Encode(map[string]any{"model": in.Model, "choices": []any{map[string]any{
				"message": map[string]string{"content": "echo: " + in.Messages[len(in.Messages)-1].Content}, "finish_reason": "stop"}},
				"usage": map[string]int{"prompt_tokens": 7, "completion_tokens": 2}})
			return
		}
		fmt.Fprintf(w, "upstream got %s", r.Header.Get("Authorization"))
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "api.example.com")}}
	up.StartTLS()
	t.Cleanup(up.Close)
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	f.apiURL = "http://api.example.com:" + port + "/v1/data"

	secrets := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(secrets, []byte("x/api: {token: "+apiSecret+"}\nx/openai: {key: sk-openai-in-vault}\n"), 0o600)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	f.proxy = l.Addr().String()
	bc := broker.Config{EgressProxy: f.proxy, PassTTL: passTTL, Secrets: broker.SecretsConfig{File: secrets}, Intents: map[string]broker.Intent{
		"api": {Class: broker.ClassRead, Secret: broker.SecretRef{Source: broker.SourceFile, Path: "x/api", Field: "token"},
			Inject:       broker.Inject{Kind: &broker.PlaceholderInject{}},
			Destinations: []broker.Destination{{Host: "api.example.com", Port: p}}},
		"openai": {Class: broker.ClassWrite, Secret: broker.SecretRef{Source: broker.SourceFile, Path: "x/openai", Field: "key"},
			Inject:       broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}},
			Destinations: []broker.Destination{{Host: "api.example.com", Port: p, PathPrefix: "/v1/chat/"}}},
	}}.WithDefaults()
	f.port = p
	cache := broker.NewSecretCache(map[string]broker.SecretSource{broker.SourceFile: &broker.FileSource{Path: secrets}}, time.Minute, 0, nil, nil)
	f.b = broker.New(bc, broker.NewMemoryStore(100, time.Minute, time.Hour, nil), cache, broker.Options{Now: f.clock.Now})
	var pt *tracing.Tracing
	if len(tr) > 0 {
		pt = tr[0]
	}
	caDir := t.TempDir()
	f.caFile = filepath.Join(caDir, "intercept-ca.pem")
	px, err := proxy.New(proxy.Config{AllowCIDRs: []string{"127.0.0.0/8"}, UpstreamCAFile: ca.PEMFile,
		Resolve: map[string][]string{"api.example.com": {"127.0.0.1"}},
		// Far beyond any test: a request the proxy gives up on ends
		// because its client did, never at this timeout.
		Upstream:  proxy.UpstreamConfig{ResponseTimeout: 10 * time.Minute},
		Intercept: proxy.InterceptConfig{CAFile: f.caFile, CAKeyFile: filepath.Join(caDir, "intercept-ca.key")}}.WithDefaults(), f.b,
		proxy.Options{Audit: slog.New(slog.NewJSONHandler(f.audit, nil)), Tracing: pt})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { px.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	ring, _ := tokens.NewRing(context.Background(), &tokens.MemorySource{}, tokens.RingOptions{Retention: time.Hour})
	f.ring = ring
	f.issuer = tokens.NewIssuer(ring, tokens.IssuerOptions{})
	f.verifier, _ = tokens.NewVerifier(ring, tokens.VerifierOptions{})
	return f
}

func (f *fixture) start(t *testing.T, cfg PluginConfig, timeouts Timeouts) (*Process, error) {
	t.Helper()
	p, err := Start(context.Background(), cfg, Options{Broker: f.b, Secrets: f.b, Tokens: broker.LocalMinter{Issuer: f.issuer}, Verifier: f.verifier,
		EgressProxy: f.proxy, Timeouts: timeouts, Sampling: f.sampling})
	if err == nil {
		t.Cleanup(func() { _ = p.Shutdown() })
	}
	return p, err
}

func py(behavior string) PluginConfig {
	script, _ := filepath.Abs("testdata/plugin.py") // plugins run in a private working directory
	return PluginConfig{Name: "py-tool", Command: testenv.Python(), Args: []string{script, behavior},
		Credentials: map[string]string{"API_KEY": "api"}}
}

func data(t *testing.T, r *InvokeResult) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatalf("data %s: %v", r.Data, err)
	}
	return d
}

func TestGoPlugin(t *testing.T) {
	f := newFixture(t)
	p, err := f.start(t, PluginConfig{Name: "go-tool", Command: goPlugin}, Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Protocol != ProtocolV2 || !strings.Contains(string(p.ServerInfo), "go-tool") {
		t.Fatalf("protocol %s server_info %s", p.Protocol, p.ServerInfo)
	}
	r, err := p.Invoke(context.Background(), InvokeRequest{Tool: "hello", Arguments: json.RawMessage(`{"who":"airlock"}`)})
	if err != nil || !r.Success || data(t, r)["greeting"] != "hello airlock" || data(t, r)["invoke_id"] != r.InvokeID || len(r.InvokeID) != 32 {
		t.Fatalf("invoke: %+v %v", r, err)
	}
	if err := p.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.Shutdown()
	if time.Since(start) > 3*time.Second {
		t.Fatal("a plugin that exits at EOF took the SIGTERM path")
	}
}

// The plugin gets a handle, never the secret; the proxy swaps it in; the
// handle dies with the invoke. A v2 session whose manifest declares the
// capabilities gets both tokens, bound to the invoke.
func TestPythonBrokeredCredentialAndTokens(t *testing.T) {
	f := newFixture(t)
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Protocol != ProtocolV2 || !strings.Contains(string(p.ServerInfo), "py-tool") {
		t.Fatalf("protocol %s serverInfo %s", p.Protocol, p.ServerInfo)
	}
	ctx := context.Background()
	r, err := p.Invoke(ctx, InvokeRequest{Tool: "fetch", Arguments: json.RawMessage(`{"url":"` + f.apiURL + `"}`)})
	if err != nil || !r.Success {
		t.Fatalf("fetch: %+v %v", r, err)
	}
	if got := <-f.seen; got != "Bearer "+apiSecret {
		t.Fatalf("upstream saw %q", got)
	}
	if strings.Contains(string(r.Data), apiSecret) || !strings.Contains(string(r.Data), "[REDACTED]") {
		t.Fatalf("the plugin saw %s", r.Data)
	}

	r, err = p.Invoke(ctx, InvokeRequest{Tool: "context", UserID: "u-7", AppID: "app-1", AppSlug: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	d := data(t, r)
	if d["invoke_id"] != r.InvokeID || fmt.Sprint(d["credentials"]) != "[API_KEY]" {
		t.Fatalf("context %v", d)
	}
	sc, err := f.verifier.VerifySampling(ctx, d["sampling_token"].(string))
	if err != nil || sc.ToolInvokeID != r.InvokeID || sc.UserID != "u-7" || sc.ExecutaToolID != "py-tool/context" {
		t.Fatalf("sampling token: %+v %v", sc, err)
	}
	st, err := f.verifier.VerifyStorage(ctx, d["storage_token"].(string))
	if err != nil || !st.HasScope(tokens.ScopeApp) || st.AppSlug != "notes" {
		t.Fatalf("storage token: %+v %v", st, err)
	}
	if _, err := f.verifier.VerifySampling(ctx, d["storage_token"].(string)); !errors.Is(err, tokens.ErrAudience) {
		t.Fatalf("storage token as sampling: %v", err)
	}
}

func TestFallbackToV1(t *testing.T) {
	f := newFixture(t)
	for _, tt := range []struct{ behavior string }{{"v1"}, {"silent-init"}} {
		t.Run(tt.behavior, func(t *testing.T) {
			p, err := f.start(t, py(tt.behavior), Timeouts{Initialize: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if p.Protocol != ProtocolV11 {
				t.Fatalf("protocol %s", p.Protocol)
			}
			r, err := p.Invoke(context.Background(), InvokeRequest{Tool: "context"})
			if err != nil {
				t.Fatal(err)
			}
			if d := data(t, r); d["sampling_token"] != "" || d["storage_token"] != "" {
				t.Fatalf("a v1 session got tokens: %v", d)
			}
			r, err = p.Invoke(context.Background(), InvokeRequest{Tool: "reverse", Arguments: json.RawMessage(`{"method":"storage/get"}`)})
			if err != nil || data(t, r)["code"] != float64(CodeMethodNotFound) {
				t.Fatalf("reverse RPC on v1: %+v %v", r, err)
			}
		})
	}
}

func TestReverseRPCGates(t *testing.T) {
	f := newFixture(t)
	good, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	bare, err := f.start(t, py("no-caps"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	scopeOnly, err := f.start(t, py("scope-only"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		p         *Process
		args      string
		code      float64
		errorCode string
	}{
		// aps.scope.* alone is minted a storage_token, so storage/* must
		// pass the same gate (one predicate): past it, the call reaches
		// the storage service, which has no store in this fixture.
		{"storage with aps.scope.* alone passes the gate", scopeOnly, `{"method":"storage/get","params":{"key":"k","scope":"user"}}`, CodeStorageUpstream, "UPSTREAM_ERROR"},
		{"sampling without llm.sample", bare, `{"method":"sampling/createMessage"}`, CodeNotNegotiated, "NOT_NEGOTIATED"},
		{"storage without aps.kv", bare, `{"method":"storage/get"}`, CodeStorageNotGranted, "STORAGE_NOT_GRANTED"},
		{"files without aps.files", good, `{"method":"files/list"}`, CodeStorageNotGranted, "STORAGE_NOT_GRANTED"},
		{"unknown invoke id", good, `{"method":"storage/get","invoke_id":"not-an-invoke"}`, CodeInvalidParams, "UNKNOWN_INVOKE_CONTEXT"},
		{"sampling past the gate, no backend", good, `{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10}}`, CodeSamplingProviderError, "PROVIDER_ERROR"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.p.Invoke(context.Background(), InvokeRequest{Tool: "reverse", Arguments: json.RawMessage(tt.args)})
			if err != nil {
				t.Fatal(err)
			}
			d := data(t, r)
			if d["code"] != tt.code || d["errorCode"] != tt.errorCode {
				t.Fatalf("got %v %v, want %v %s", d["code"], d["errorCode"], tt.code, tt.errorCode)
			}
		})
	}
}

func TestBrokenPlugins(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	t.Run("noise and oversized lines", func(t *testing.T) {
		p, err := f.start(t, py("noise"), Timeouts{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Invoke(ctx, InvokeRequest{Tool: "context"}); err != nil {
			t.Fatalf("after garbage frames: %v", err)
		}
	})
	t.Run("oversized response ends its call at once", func(t *testing.T) {
		p, err := f.start(t, py("good"), Timeouts{})
		if err != nil {
			t.Fatal(err)
		}
		// The tool's timeout is 120 s: an answer that waited for it would
		// end in ErrTimeout, not in the specific refusal.
		if _, err = p.Invoke(ctx, InvokeRequest{Tool: "oversized"}); !errors.Is(err, ErrResponseTooLarge) {
			t.Fatalf("oversized response: %v", err)
		}
		if _, err := p.Invoke(ctx, InvokeRequest{Tool: "context"}); err != nil {
			t.Fatalf("the next call after an oversized frame: %v", err)
		}
	})
	t.Run("bad capability", func(t *testing.T) {
		_, err := f.start(t, py("bad-capability"), Timeouts{})
		if err == nil || !strings.Contains(err.Error(), "storage scopes are a platform constant") || strings.Contains(err.Error(), ":;") ||
			strings.Contains(err.Error(), "\n") {
			t.Fatalf("storage.user: %v", err)
		}
	})
	t.Run("exits after one response", func(t *testing.T) {
		p, err := f.start(t, py("exit-after-one"), Timeouts{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Invoke(ctx, InvokeRequest{Tool: "context"}); err != nil {
			t.Fatal(err)
		}
		<-p.Exited()
		// Status 0 is not a fault: the plugin starts cold on the next call.
		if err := p.Fault(); err != nil {
			t.Fatalf("fault: %v", err)
		}
	})
	t.Run("crash mid-invoke", func(t *testing.T) {
		p, err := f.start(t, py("crash"), Timeouts{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Invoke(ctx, InvokeRequest{Tool: "context"}); !errors.Is(err, ErrPluginExited) {
			t.Fatalf("crash: %v", err)
		}
		<-p.Exited()
		if err := p.Fault(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
			t.Fatalf("reason: %v", err)
		}
	})
	t.Run("tool timeout", func(t *testing.T) {
		p, err := f.start(t, py("good"), Timeouts{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Invoke(ctx, InvokeRequest{Tool: "slow"}); !errors.Is(err, ErrTimeout) {
			t.Fatalf("slow tool: %v", err)
		}
	})
	t.Run("ignores stdin EOF and SIGTERM", func(t *testing.T) {
		p, err := Start(ctx, py("ignore-eof"), Options{Broker: f.b, Secrets: f.b, EgressProxy: f.proxy,
			Timeouts: Timeouts{StdinGrace: 300 * time.Millisecond, TermGrace: 300 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		p.Shutdown()
		el := time.Since(start)
		if el < 550*time.Millisecond || el > 5*time.Second {
			t.Fatalf("shutdown took %s; want stdin grace + SIGTERM grace, then SIGKILL", el)
		}
		select {
		case <-p.Exited():
		default:
			t.Fatal("still running")
		}
	})
}

func TestFileTransportAndCredentialsLifetime(t *testing.T) {
	f := newFixture(t)
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := p.Invoke(ctx, InvokeRequest{Tool: "filetransport", Arguments: json.RawMessage(`{"where":"tmp"}`)})
	if err != nil || !strings.Contains(string(r.Data), strings.Repeat("y", 1000)) {
		t.Fatalf("file transport from the plugin's temp dir: %v %v", r, err)
	}
	// A frame file outside the plugin's directory (the sandbox keeps the
	// plugin from writing one there; the test plants it) is refused.
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "ft.json"), []byte(`{"jsonrpc":"2.0","id":"2","result":{"success":true,"data":{}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	elsewhere, _ := json.Marshal(map[string]string{"where": outside})
	_, err = p.Invoke(ctx, InvokeRequest{Tool: "filetransport", Arguments: elsewhere})
	if !errors.Is(err, ErrFileTransportRefused) {
		t.Fatalf("a file outside the plugin's temp dir: %v", err)
	}
	// A credential is delivered as a handle (revoked when the invocation
	// ends, by the invoke path: TestExecutaCallPolicyAndEvidence).
	r, err = p.Invoke(ctx, InvokeRequest{Tool: "handle"})
	if err != nil {
		t.Fatal(err)
	}
	h := data(t, r)["handle"].(string)
	if !strings.HasPrefix(h, broker.HandlePrefix) {
		t.Fatalf("credential is not a handle: %q", h)
	}
	// Raw delivery only by explicit opt-in.
	raw := py("good")
	raw.Credentials = nil
	raw.RawCredentials = map[string]string{"API_KEY": "api"}
	p2, err := f.start(t, raw, Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	r, err = p2.Invoke(ctx, InvokeRequest{Tool: "handle"})
	if err != nil || data(t, r)["handle"] != apiSecret {
		t.Fatalf("raw opt-in: %v %v", r, err)
	}
}

func TestCorrelationAndExpiredTokens(t *testing.T) {
	f := newFixture(t)
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	// Two invokes in flight, a reverse request without invoke_id: ambiguous.
	p.mu.Lock()
	p.invokes["a"], p.invokes["b"] = &liveInvoke{id: "a"}, &liveInvoke{id: "b"}
	p.mu.Unlock()
	if _, e := p.correlate(json.RawMessage(`{}`)); e == nil || !strings.Contains(string(e.Data), "MISSING_INVOKE_CONTEXT") {
		t.Fatalf("two in flight, no id: %v", e)
	}
	if inv, e := p.correlate(json.RawMessage(`{"metadata":{"executa_invoke_id":"b"}}`)); e != nil || inv.id != "b" {
		t.Fatalf("metadata.executa_invoke_id: %v %v", inv, e)
	}
	p.mu.Lock()
	delete(p.invokes, "a")
	delete(p.invokes, "b")
	p.mu.Unlock()
	// An expired sampling token is refused.
	live := &liveInvoke{id: "x", binding: tokens.Binding{UserID: "u", ExecutaToolID: "py-tool/reverse", ToolInvokeID: "x"}}
	tok, _, err := f.issuer.MintSampling(tokens.SamplingGrant{Binding: live.binding, Deadline: time.Now().Add(time.Second),
		MaxTokensPerCall: 100, MaxCallsPerInvoke: 8})
	if err != nil {
		t.Fatal(err)
	}
	live.samplingToken = tok
	later, _ := tokens.NewVerifier(verifierKeys{f}, tokens.VerifierOptions{Now: func() time.Time { return time.Now().Add(10 * time.Minute) }})
	p.opts.Verifier = later
	_, e := p.sample(context.Background(), live, json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"maxTokens":5}`))
	if e == nil || e.Code != CodeSamplingNotGranted {
		t.Fatalf("expired sampling token: %v", e)
	}
}

// verifierKeys reuses the fixture verifier's keys through a ring-backed
// issuer: mint with f.issuer, verify with another clock.
type verifierKeys struct{ f *fixture }

func (v verifierKeys) VerificationKey(ctx context.Context, kid string) (tokens.VerificationKey, error) {
	return v.f.ring.VerificationKey(ctx, kid)
}
