package executa

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"log/slog"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/executa/sampling"
	"github.com/airlock-dev/airlock/internal/testenv"
)

func (f *fixture) setChat(h http.HandlerFunc) { f.chat.Store(&h) }

// sampleVia calls sampling/createMessage from the Python test plugin and
// returns the plugin's view of the answer.
func sampleVia(t *testing.T, p *Process, params string) map[string]any {
	t.Helper()
	r, err := p.Invoke(context.Background(), InvokeRequest{Tool: "reverse", Arguments: json.RawMessage(
		`{"method":"sampling/createMessage","params":` + params + `}`)})
	if err != nil {
		t.Fatal(err)
	}
	return data(t, r)
}

const ping = `{"messages":[{"role":"user","content":{"type":"text","text":"ping"}}],"maxTokens":20}`

// Each way an OpenAI-compatible backend fails reaches the plugin as its
// own errorCode (retryAfter when the backend gave one) and the operator
// as one log line, never with the key.
func TestOpenAIBackendFailures(t *testing.T) {
	f := newFixture(t)
	in, _ := f.b.Intent("openai")
	logs := &testenv.SyncBuffer{}
	backend := &sampling.OpenAI{BaseURL: "http://api.example.com:" + strconv.Itoa(f.port) + "/v1", Model: "gpt-test", Intent: "openai",
		Destinations: in.Destinations, Broker: f.b, EgressProxy: f.proxy}
	p, err := Start(context.Background(), py("good"), Options{Broker: f.b, Secrets: f.b, Tokens: localMinter(f), Verifier: f.verifier,
		EgressProxy: f.proxy, Sampling: backend, SamplingTimeout: 700 * time.Millisecond, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	for _, tt := range []struct {
		name      string
		handler   http.HandlerFunc
		code      float64
		errorCode string
	}{
		{"unauthorized", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "bad key", http.StatusUnauthorized) }, CodeSamplingProviderError, sampling.KindUnauthorized},
		{"rate limited", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "7")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		}, CodeSamplingProviderError, sampling.KindRateLimited},
		{"server error", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "oops", http.StatusInternalServerError) }, CodeSamplingProviderError, sampling.KindUpstream},
		{"malformed answer", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"choices":"nope"`)) }, CodeSamplingProviderError, sampling.KindBadResponse},
		{"timeout", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, CodeSamplingTimeout, "TIMEOUT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f.setChat(tt.handler)
			before := strings.Count(logs.String(), "sampling backend")
			d := sampleVia(t, p, ping)
			if d["code"] != tt.code || d["errorCode"] != tt.errorCode {
				t.Fatalf("got %v %v, want %v %s", d["code"], d["errorCode"], tt.code, tt.errorCode)
			}
			if n := strings.Count(logs.String(), "sampling backend") - before; n != 1 {
				t.Fatalf("%d operator log lines for one failure:\n%s", n, logs.String())
			}
		})
	}
	// The key is unavailable (no such intent): its own code, and the
	// backend is never called.
	bad := &sampling.OpenAI{BaseURL: backend.BaseURL, Model: "m", Intent: "missing", Broker: f.b, EgressProxy: f.proxy}
	p2, err := Start(context.Background(), py("good"), Options{Broker: f.b, Secrets: f.b, Tokens: localMinter(f), Verifier: f.verifier,
		EgressProxy: f.proxy, Sampling: bad})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Shutdown()
	if d := sampleVia(t, p2, ping); d["errorCode"] != sampling.KindUnavailable {
		t.Fatalf("credential unavailable: %v", d)
	}
	if strings.Contains(logs.String(), "sk-openai-in-vault") {
		t.Fatal("the key reached the log")
	}
}

// retryAfter reaches the plugin in error.data.
func TestRetryAfterReachesPlugin(t *testing.T) {
	p := &Process{log: slog.New(slog.DiscardHandler)}
	e := p.samplingFailure(context.Background(), context.Background(), &sampling.Error{Kind: sampling.KindRateLimited, Status: 429, RetryAfter: 7 * time.Second})
	var d map[string]any
	_ = json.Unmarshal(e.Data, &d)
	if e.Code != CodeSamplingProviderError || d["errorCode"] != sampling.KindRateLimited || d["retryAfter"] != float64(7) || d["status"] != float64(429) {
		t.Fatalf("%+v %v", e, d)
	}
}

// A sampling call ends with its invoke: the backend's context is done at
// the invoke's deadline, not after the sampling timeout.
func TestSamplingEndsWithInvoke(t *testing.T) {
	f := newFixture(t)
	ended := make(chan time.Duration, 1)
	f.sampling = backendFunc(func(ctx context.Context) {
		start := time.Now()
		<-ctx.Done()
		ended <- time.Since(start)
	})
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	go p.Invoke(context.Background(), InvokeRequest{Tool: "reverse", Deadline: time.Now().Add(time.Second),
		Arguments: json.RawMessage(`{"method":"sampling/createMessage","params":` + ping + `}`)})
	select {
	case d := <-ended:
		if d > 3*time.Second {
			t.Fatalf("the backend call outlived its invoke by %s", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the backend call was never cancelled")
	}
}

type backendFunc func(ctx context.Context)

func (b backendFunc) Complete(ctx context.Context, _ *sampling.Request) (sampling.Completion, error) {
	b(ctx)
	return sampling.Completion{}, ctx.Err()
}

func (b backendFunc) SupportsFormat(string) bool { return false }

func localMinter(f *fixture) broker.LocalMinter { return broker.LocalMinter{Issuer: f.issuer} }
