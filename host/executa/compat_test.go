package executa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/launch"
	"github.com/airlock-dev/airlock/internal/testenv"

	"golang.org/x/net/http/httpproxy"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/executa/aps"
	"github.com/airlock-dev/airlock/host/executa/sampling"
	"github.com/airlock-dev/airlock/internal/egressenv"
)

// compatServices are the host services an SDK-style plugin uses: APS
// storage, files/* on a real listener, a fixture sampling backend.
type compatServices struct {
	opts  Options
	files *aps.Files
}

func newCompatServices(t *testing.T, f *fixture) *compatServices {
	t.Helper()
	dir := t.TempDir()
	kv, err := aps.Open(filepath.Join(dir, "aps.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	files := &aps.Files{KV: kv, Dir: filepath.Join(dir, "files")}
	srv := httptest.NewServer(files.Handler())
	t.Cleanup(srv.Close)
	files.BaseURL = srv.URL
	fixture := filepath.Join(dir, "sampling.jsonl")
	os.WriteFile(fixture, []byte(`{"match":"go","text":"long","model":"fx","inputTokens":100,"outputTokens":8000}
{"match":"violate","text":"{\"summary\":1,\"extra\":true}","model":"fx","json":true,"inputTokens":5,"outputTokens":5}
{"match":"","text":"{\"summary\":\"ok\"}","model":"fx","json":true,"inputTokens":5,"outputTokens":5}
`), 0o600)
	backend, err := sampling.LoadFixture(fixture)
	if err != nil {
		t.Fatal(err)
	}
	return &compatServices{files: files, opts: Options{Broker: f.b, Secrets: f.b, Tokens: broker.LocalMinter{Issuer: f.issuer},
		Verifier: f.verifier, EgressProxy: f.proxy, InterceptCAFile: f.caFile, KV: kv, Files: files, Sampling: backend}}
}

func (cs *compatServices) start(t *testing.T, cfg PluginConfig) *Process {
	t.Helper()
	p, err := Start(context.Background(), cfg, cs.opts)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

func sdkPython(word string) PluginConfig {
	script, _ := filepath.Abs("testdata/compat/sdk_style.py")
	return PluginConfig{Name: "compat-py", Command: testenv.Python(), Args: []string{script, word},
		Credentials: map[string]string{"API_KEY": "api"}}
}

func invokeData(t *testing.T, p *Process, tool, args string) map[string]any {
	t.Helper()
	r, err := p.Invoke(context.Background(), InvokeRequest{Tool: tool, Arguments: json.RawMessage(args)})
	if err != nil || !r.Success {
		t.Fatalf("%s: %+v %v", tool, r, err)
	}
	return data(t, r)
}

// A plugin written the way the published SDKs write them works unmodified:
// every accepted variant is exercised against a real Python process.
func TestSDKStylePythonPlugin(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-operators-shell")
	t.Setenv("EDITOR", "vi")
	f := newFixture(t)
	cs := newCompatServices(t, f)
	cfg := sdkPython("healthy")
	cfg.Env = map[string]string{"COMPAT_MODE": "on"}
	p := cs.start(t, cfg)

	// describe: no name, an object runtime; initialize: client_capabilities.
	if p.Manifest.Name != "" || p.Manifest.Runtime.Type != "uv" {
		t.Fatalf("manifest: %+v", p.Manifest)
	}
	if _, ok := p.Capabilities["sampling"]; !ok || p.Protocol != ProtocolV2 {
		t.Fatalf("sampling not negotiated from client_capabilities: %s %v", p.Protocol, p.Capabilities)
	}
	if err := p.Health(context.Background()); err != nil {
		t.Fatalf("health \"healthy\": %v", err)
	}

	// invoke_id in params; a handle for the secret, the default for the setting;
	// the minimal environment plus the configured value.
	r, err := p.Invoke(context.Background(), InvokeRequest{InvokeID: "inv-compat-1", Tool: "whoami"})
	if err != nil || !r.Success {
		t.Fatalf("whoami: %+v %v", r, err)
	}
	who := data(t, r)
	if who["invoke_id"] != "inv-compat-1" || who["context_invoke_id"] != "inv-compat-1" || who["units"] != "metric" ||
		who["key_is_handle"] != true || who["compat_mode"] != "on" {
		t.Fatalf("whoami: %v", who)
	}
	env := strings.Join(toStrings(who["env"]), " ")
	for _, want := range []string{"HTTP_PROXY", "HTTPS_PROXY", "SSL_CERT_FILE", "NO_PROXY", "TMPDIR", "PATH", "COMPAT_MODE"} {
		if !strings.Contains(env, want) {
			t.Errorf("%s missing from the plugin's environment: %s", want, env)
		}
	}
	if strings.Contains(env, "OPENAI_API_KEY") || strings.Contains(env, "EDITOR") {
		t.Fatalf("the operator's environment reached the plugin: %s", env)
	}

	// The handle works through the proxy, urllib honouring HTTP_PROXY.
	fetched := invokeData(t, p, "fetch", `{"url":"`+f.apiURL+`"}`)
	if got := <-f.seen; got != "Bearer "+apiSecret || fetched["status"] != float64(200) {
		t.Fatalf("fetch: upstream saw %q, plugin got %v", got, fetched)
	}
	// An https:// URL through CONNECT interception: the host gave the
	// plugin HTTPS_PROXY and the intercept CA (SSL_CERT_FILE, a copy in
	// its private directory); the plugin puts its handle in the proxy URL.
	httpsURL := strings.Replace(f.apiURL, "http://", "https://", 1)
	fetched = invokeData(t, p, "fetch", `{"url":"`+httpsURL+`","handle_in_proxy":true}`)
	if got := <-f.seen; got != "Bearer "+apiSecret || fetched["status"] != float64(200) {
		t.Fatalf("https fetch: upstream saw %q, plugin got %v", got, fetched)
	}
	// The same with the host's HTTPS_PROXY untouched: the plugin pass in
	// its userinfo attributes the CONNECT, the handle (a placeholder API
	// key) travels only inside the tunnel.
	fetched = invokeData(t, p, "fetch", `{"url":"`+httpsURL+`"}`)
	if got := <-f.seen; got != "Bearer "+apiSecret || fetched["status"] != float64(200) {
		t.Fatalf("https fetch with the pass: upstream saw %q, plugin got %v", got, fetched)
	}
	// Past the pass's first expiry the same call works: the host renews
	// the pass while the plugin runs (here at a health probe, between two
	// jumps of the broker's clock that each stay within the pass's life).
	f.clock.Advance(passTTL * 2 / 3)
	if err := p.Health(context.Background()); err != nil {
		t.Fatalf("the health probe renewing the pass: %v", err)
	}
	f.clock.Advance(passTTL * 2 / 3)
	fetched = invokeData(t, p, "fetch", `{"url":"`+httpsURL+`"}`)
	if got := <-f.seen; got != "Bearer "+apiSecret || fetched["status"] != float64(200) {
		t.Fatalf("https fetch with the pass after its first expiry: upstream saw %q, plugin got %v", got, fetched)
	}
	// A large answer through file transport, unnegotiated as the SDK does.
	if big := invokeData(t, p, "big", `{"kb":700}`); len(big["blob"].(string)) != 700*1024 {
		t.Fatal("file transport answer lost")
	}
	// Storage with if_match; a stale etag is refused.
	kv := invokeData(t, p, "kv", `{"key":"compat/a"}`)
	if kv["stale_write"] != float64(CodeStoragePrecondition) || kv["etags_differ"] != true ||
		kv["value"].(map[string]any)["n"] != float64(2) {
		t.Fatalf("kv: %v", kv)
	}
	// files: put_url fetched with urllib while HTTP_PROXY is set.
	up := invokeData(t, p, "upload", `{"path":"notes/a.txt","text":"hello from urllib"}`)
	if up["read_back"] != "hello from urllib" || up["complete"] != "notes/a.txt" {
		t.Fatalf("upload: %v", up)
	}
	// Sampling with a JSON schema: structuredValid is the schema's verdict.
	for text, want := range map[string]bool{"fine": true, "violate": false} {
		s := invokeData(t, p, "sample_schema", `{"text":"`+text+`"}`)
		if rf := s["responseFormat"].(map[string]any); rf["structuredValid"] != want || rf["applied"] != "json_schema" {
			t.Errorf("%s: responseFormat %v, want structuredValid %v", text, rf, want)
		}
	}
	// Two invokes in flight: reverse calls are matched by the invoke_id
	// the plugin read from params (metadata.executa_invoke_id).
	var wg sync.WaitGroup
	for _, key := range []string{"compat/x", "compat/y"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.Invoke(context.Background(), InvokeRequest{Tool: "kv", Arguments: json.RawMessage(`{"key":"` + key + `"}`)})
			if err != nil || !r.Success {
				t.Errorf("concurrent kv %s: %+v %v", key, r, err)
			}
		}()
	}
	wg.Wait()
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// The operator's setting wins over the manifest default; a setting is
// never delivered for a sensitive credential; a required credential bound
// to nothing refuses the call before the plugin sees it.
func TestSettingsAndUnboundCredentials(t *testing.T) {
	f := newFixture(t)
	cs := newCompatServices(t, f)
	cfg := sdkPython("ok")
	cfg.Settings = map[string]string{"UNITS": "imperial"}
	p := cs.start(t, cfg)
	if who := invokeData(t, p, "whoami", `{}`); who["units"] != "imperial" {
		t.Fatalf("setting: %v", who)
	}
	unbound := sdkPython("ok")
	unbound.Credentials = nil
	unbound.Settings = map[string]string{"API_KEY": "plaintext-not-for-a-secret"}
	p2 := cs.start(t, unbound)
	_, err := p2.Invoke(context.Background(), InvokeRequest{Tool: "whoami"})
	var ue *UnboundError
	if !errors.As(err, &ue) || len(ue.Index) != 1 || ue.Index[0] != 0 || strings.Contains(err.Error(), "API_KEY") {
		t.Fatalf("unbound required credential: %v", err)
	}
}

// Health words: the SDKs' words are healthy, "initializing" is not ready,
// anything else is unhealthy and never echoed.
func TestHealthWords(t *testing.T) {
	f := newFixture(t)
	cs := newCompatServices(t, f)
	for word, want := range map[string]error{"ok": nil, "HEALTHY": nil, "ready": nil, "initializing": ErrNotReady,
		"error": ErrUnhealthy, "on-fire": ErrUnhealthy} {
		p := cs.start(t, sdkPython(word))
		err := p.Health(context.Background())
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", word, err, want)
		}
		if err != nil && strings.Contains(err.Error(), word) {
			t.Errorf("%q echoed: %v", word, err)
		}
	}
}

// The Node flavour: client_capabilities, params.invoke_id, sampling, and
// the presigned PUT from the http module with the proxy variables set.
func TestSDKStyleNodePlugin(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required (make tools installs it)")
	}
	f := newFixture(t)
	cs := newCompatServices(t, f)
	script, _ := filepath.Abs("testdata/compat/sdk_style.js")
	p := cs.start(t, PluginConfig{Name: "compat-node", Command: node, Args: []string{script}})
	if p.Manifest.Runtime.Type != "npm" || p.Protocol != ProtocolV2 {
		t.Fatalf("manifest %+v protocol %s", p.Manifest, p.Protocol)
	}
	if err := p.Health(context.Background()); err != nil {
		t.Fatalf("health ok: %v", err)
	}
	r, err := p.Invoke(context.Background(), InvokeRequest{InvokeID: "inv-node", Tool: "whoami"})
	if err != nil || data(t, r)["invoke_id"] != "inv-node" || data(t, r)["no_proxy"] == nil {
		t.Fatalf("whoami: %+v %v", r, err)
	}
	if s := invokeData(t, p, "sample", `{"text":"hi"}`); s["model"] != "fx" {
		t.Fatalf("sample: %v", s)
	}
	if up := invokeData(t, p, "upload", `{"path":"n.txt","text":"from node"}`); up["put_status"] != float64(200) || up["complete"] != "n.txt" {
		t.Fatalf("upload: %v", up)
	}
}

// A Go client in a plugin, with the proxy variables the host sets, PUTs
// to the presigned URL directly; an empty file (size_bytes 0) is a file.
func TestPresignedPUTFromGoClient(t *testing.T) {
	f := newFixture(t)
	cs := newCompatServices(t, f)
	proxyFunc := (&httpproxy.Config{HTTPProxy: "http://" + f.proxy, NoProxy: launch.NoProxy(cs.files.DirectHosts()...)}).ProxyFunc()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: func(r *http.Request) (*url.URL, error) { return proxyFunc(r.URL) }}}
	for name, body := range map[string]string{"go.txt": "from go", "empty.txt": ""} {
		up, err := cs.files.Begin("user/u1", name, "", int64(len(body)))
		if err != nil {
			t.Fatalf("%s upload_begin: %v", name, err)
		}
		req, _ := http.NewRequest(http.MethodPut, up.URL, bytes.NewReader([]byte(body)))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s PUT: %d", name, resp.StatusCode)
		}
		if _, err := cs.files.Complete("user/u1", name, resp.Header.Get("ETag")); err != nil {
			t.Fatalf("%s complete: %v", name, err)
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Concurrent sampling calls reserve their maxTokens before they are sent:
// together they cannot spend past the per-invoke budget.
func TestSamplingBudgetReservedAcrossConcurrentCalls(t *testing.T) {
	f := newFixture(t)
	cs := newCompatServices(t, f)
	p := cs.start(t, sdkPython("ok"))
	d := invokeData(t, p, "sample_many", `{"n":8,"max_tokens":8192}`)
	ok, refused := 0, 0
	for _, c := range d["codes"].([]any) {
		switch c {
		case float64(0):
			ok++
		case float64(CodeSamplingMaxTokens):
			refused++
		default:
			t.Fatalf("unexpected code %v", c)
		}
	}
	// Each admitted call spends 8,100 tokens: at most three fit in 32,000.
	if ok < 1 || ok*8100 > MaxTokensPerInvoke || ok+refused != 8 {
		t.Fatalf("%d admitted, %d refused: the budget was overrun or nothing ran", ok, refused)
	}
}

// A plugin whose pass is lost (revoked here) answers its next health
// probe unhealthy, so the supervisor restarts it with a new pass.
func TestLostPassUnhealthy(t *testing.T) {
	f := newFixture(t)
	cs := newCompatServices(t, f)
	p := cs.start(t, sdkPython("healthy"))
	ctx := context.Background()
	if err := p.Health(ctx); err != nil {
		t.Fatalf("with its pass: %v", err)
	}
	if _, err := f.b.RevokePlugin(ctx, "compat-py"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := p.Health(ctx)
		if errors.Is(err, ErrUnhealthy) && errors.Is(err, egressenv.ErrPassLost) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health after the pass was revoked: %v", err)
		}
	}
}
