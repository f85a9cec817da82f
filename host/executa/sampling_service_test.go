package executa

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/executa/sampling"
)

func TestSamplingService(t *testing.T) {
	f := newFixture(t)
	fixture := filepath.Join(t.TempDir(), "fixture.jsonl")
	os.WriteFile(fixture, []byte(`{"match":"weather","text":"Sunny.","model":"fixture-1","inputTokens":12,"outputTokens":3}
{"match":"","text":"{\"ok\":true}","json":true,"inputTokens":5000,"outputTokens":1000}
`), 0o600)
	var err error
	if f.sampling, err = sampling.LoadFixture(fixture); err != nil {
		t.Fatal(err)
	}
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	msg := `"messages":[{"role":"user","content":{"type":"text","text":"what is the weather"}}]`
	call := func(args string) map[string]any {
		t.Helper()
		r, err := p.Invoke(context.Background(), InvokeRequest{Tool: "reverse", Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		return data(t, r)
	}
	d := call(`{"method":"sampling/createMessage","params":{` + msg + `,"maxTokens":100}}`)
	res, _ := d["result"].(map[string]any)
	if d["code"] != nil || res["model"] != "fixture-1" || res["content"].(map[string]any)["text"] != "Sunny." ||
		res["usage"].(map[string]any)["totalTokens"] != float64(15) {
		t.Fatalf("sampling result: %v", d)
	}
	for _, tt := range []struct {
		name, args string
		code       float64
		errorCode  string
		message    string // what the message must contain ("": not checked)
	}{
		{"storage token presented for sampling", `{"method":"sampling/createMessage","swap_tokens":true,"params":{` + msg + `,"maxTokens":10}}`, CodeSamplingNotGranted, "NOT_GRANTED", ""},
		{"maxTokens over the cap", `{"method":"sampling/createMessage","params":{` + msg + `,"maxTokens":99999}}`, CodeSamplingInvalid, "INVALID_REQUEST",
			"between 1 and 8192 (the negotiated maxTokensPerCall)"},
		{"bad role", `{"method":"sampling/createMessage","params":{"messages":[{"role":"tool","content":{"type":"text","text":"x"}}],"maxTokens":10}}`, CodeSamplingInvalid, "INVALID_REQUEST", ""},
		{"includeContext", `{"method":"sampling/createMessage","params":{` + msg + `,"maxTokens":10,"includeContext":"allServers"}}`, CodeSamplingInvalid, "INVALID_REQUEST", ""},
		{"schema name", `{"method":"sampling/createMessage","params":{` + msg + `,"maxTokens":10,"responseFormat":{"type":"json_schema","json_schema":{"name":"bad name!","schema":{}}}}}`, CodeSamplingInvalid, "INVALID_REQUEST", ""},
		{"nine calls in one invoke", `{"method":"sampling/createMessage","repeat":9,"params":{` + msg + `,"maxTokens":10}}`, CodeSamplingMaxCalls, "MAX_CALLS_EXCEEDED", ""},
		{"token budget", `{"method":"sampling/createMessage","repeat":7,"params":{"messages":[{"role":"user","content":{"type":"text","text":"json please"}}],"maxTokens":10}}`, CodeSamplingMaxTokens, "MAX_TOKENS_EXCEEDED", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := call(tt.args)
			if d["code"] != tt.code || d["errorCode"] != tt.errorCode {
				t.Fatalf("got %v %v, want %v %s", d["code"], d["errorCode"], tt.code, tt.errorCode)
			}
			if msg, _ := d["message"].(string); !strings.Contains(msg, tt.message) {
				t.Fatalf("message %q lacks %q", msg, tt.message)
			}
		})
	}
}

// The OpenAI-compatible backend reaches its API through Airlock's own
// proxy with a brokered key: the key stays in the secret source.
func TestOpenAIBackendThroughProxy(t *testing.T) {
	f := newFixture(t)
	in, _ := f.b.Intent("openai")
	issued := &issueRecorder{API: f.b}
	f.sampling = &sampling.OpenAI{BaseURL: "http://api.example.com:" + strconv.Itoa(f.port), Model: "gpt-test", Intent: "openai",
		Destinations: in.Destinations, Broker: issued, EgressProxy: f.proxy}
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Invoke(context.Background(), InvokeRequest{Tool: "reverse", Arguments: json.RawMessage(
		`{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"ping"}}],"maxTokens":20}}`)})
	if err != nil {
		t.Fatal(err)
	}
	d := data(t, r)
	res, _ := d["result"].(map[string]any)
	if d["code"] != nil || res["model"] != "gpt-test" || res["content"].(map[string]any)["text"] != "echo: ping" || res["stopReason"] != "endTurn" {
		t.Fatalf("sampling through the proxy: %v", d)
	}
	if got := <-f.seen; got != "Bearer sk-openai-in-vault" {
		t.Fatalf("the API saw %q", got)
	}
	// The backend's handle, and so the proxy's audit line, credits the
	// calling plugin and invocation, not a host-wide "airlock.sampling".
	issued.mu.Lock()
	defer issued.mu.Unlock()
	if len(issued.reqs) != 1 || issued.reqs[0].PluginID != p.cfg.Name ||
		!strings.HasPrefix(issued.reqs[0].InvocationID, r.InvokeID+"/sampling-") {
		t.Fatalf("sampling handle issued as %+v, want plugin %s and invocation %s/…", issued.reqs, p.cfg.Name, r.InvokeID)
	}
}

// issueRecorder records what is issued through it.
type issueRecorder struct {
	broker.API
	mu   sync.Mutex
	reqs []broker.IssueRequest
}

func (r *issueRecorder) Issue(ctx context.Context, req broker.IssueRequest) (broker.Issued, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.API.Issue(ctx, req)
}
