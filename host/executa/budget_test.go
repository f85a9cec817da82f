package executa

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host/executa/sampling"
)

// usageBackend answers every call; with reported set it says what the
// call used (a quarter token per prompt byte, as English text runs),
// else it says nothing of usage.
type usageBackend struct {
	reported bool
	calls    atomic.Int32
}

func (b *usageBackend) Complete(_ context.Context, req *sampling.Request) (sampling.Completion, error) {
	b.calls.Add(1)
	c := sampling.Completion{Text: "ok", Model: "m", StopReason: "endTurn", Provider: "test"}
	if b.reported {
		c.InputTokens, c.OutputTokens, c.UsageReported = len(req.Messages[0].Content.Text)/4, 10, true
	}
	return c, nil
}

func (b *usageBackend) SupportsFormat(string) bool { return false }

func samplingCall(text string, maxTokens, repeat int) string {
	return `{"method":"sampling/createMessage","repeat":` + itoa(repeat) + `,"params":{"messages":[{"role":"user","content":{"type":"text","text":` +
		strconvQuote(text) + `}}],"maxTokens":` + itoa(maxTokens) + `}}`
}

// The prompt is reserved with maxTokens: a prompt whose bytes alone pass
// the per-invoke budget is refused before it is sent.
func TestSamplingReservesThePrompt(t *testing.T) {
	f := newFixture(t)
	backend := &usageBackend{reported: true}
	f.sampling = backend
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	d := sampleRaw(t, p, samplingCall(strings.Repeat("x", MaxTokensPerInvoke+1000), 100, 1))
	if d["code"] != float64(CodeSamplingMaxTokens) || backend.calls.Load() != 0 {
		t.Fatalf("a prompt beyond the budget: %v, %d backend calls", d, backend.calls.Load())
	}
	d = sampleRaw(t, p, samplingCall("ping", 100, 1))
	if d["code"] != nil || backend.calls.Load() != 1 {
		t.Fatalf("a small prompt: %v", d)
	}
}

// A backend that reports no usage is not counted as free: each call
// costs what was reserved for it (its prompt estimate and maxTokens), so
// three calls of 1,000 prompt bytes and 8,000 maxTokens fill the 32,000
// budget and the fourth is refused.
func TestSamplingWithoutUsageCountsTheReservation(t *testing.T) {
	f := newFixture(t)
	backend := &usageBackend{}
	f.sampling = backend
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	d := sampleRaw(t, p, samplingCall(strings.Repeat("y", 1000), 8000, 5))
	codes := d["codes"].([]any)
	want := []any{nil, nil, nil, float64(CodeSamplingMaxTokens), float64(CodeSamplingMaxTokens)}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("codes %v, want %v", codes, want)
		}
	}
	if backend.calls.Load() != 3 {
		t.Fatalf("%d backend calls, want 3", backend.calls.Load())
	}
	d = sampleRaw(t, p, samplingCall("ping", 10, 1))
	res := d["result"].(map[string]any)
	usage := res["usage"].(map[string]any)
	if res["_meta"].(map[string]any)["usageEstimated"] != true || usage["outputTokens"] != float64(10) || usage["inputTokens"].(float64) < 4 {
		t.Fatalf("an unreported usage is shown as counted: %v", res)
	}
}

func sampleRaw(t *testing.T, p *Process, args string) map[string]any {
	t.Helper()
	r, err := p.Invoke(context.Background(), InvokeRequest{Tool: "reverse", Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	return data(t, r)
}

// A backend that counts far more than the prompt's estimate (20,000
// prompt tokens for a 3 KB prompt): of 8 calls sent at once, the first
// runs alone and overshoots its reservation, and the others are then
// admitted one at a time while the budget lasts, so the total settled
// stays within the cap plus one call's overshoot, and no two calls reach
// the backend at once.
func TestSamplingOvercountingBackendIsSerialised(t *testing.T) {
	const promptCount, completionCount = 20000, 1
	f := newFixture(t)
	var (
		mu                         sync.Mutex
		inflight, most, backendHit int
	)
	arrived := make(chan struct{}, 16)
	f.setChat(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inflight++
		backendHit++
		most = max(most, inflight)
		mu.Unlock()
		select {
		case arrived <- struct{}{}:
		default:
		}
		// Hold the answer until another call arrives (or a while has
		// passed), so that calls let through side by side meet here.
		hold := time.After(2 * time.Second)
	wait:
		for {
			mu.Lock()
			n := inflight
			mu.Unlock()
			if n >= 2 {
				break
			}
			select {
			case <-arrived:
			case <-hold:
				break wait
			}
		}
		mu.Lock()
		inflight--
		mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"model": "m", "choices": []any{map[string]any{
			"message": map[string]string{"content": "ok"}, "finish_reason": "stop"}},
			"usage": map[string]int{"prompt_tokens": promptCount, "completion_tokens": completionCount}})
	})
	in, _ := f.b.Intent("openai")
	cs := newCompatServices(t, f)
	cs.opts.Sampling = &sampling.OpenAI{BaseURL: "http://api.example.com:" + strconv.Itoa(f.port) + "/v1", Model: "m", Intent: "openai",
		Destinations: in.Destinations, Broker: f.b, EgressProxy: f.proxy}
	p := cs.start(t, sdkPython("ok"))
	text, maxTokens := strings.Repeat("z", 3<<10), 100
	d := invokeData(t, p, "sample_many", `{"n":8,"max_tokens":`+itoa(maxTokens)+`,"text":"`+text+`"}`)
	granted := 0
	for _, c := range d["codes"].([]any) {
		switch c {
		case float64(0):
			granted++
		case float64(CodeSamplingMaxTokens):
		default:
			t.Fatalf("unexpected code %v in %v", c, d["codes"])
		}
	}
	var req sampling.Request
	json.Unmarshal([]byte(`{"messages":[{"role":"user","content":{"type":"text","text":"`+text+`"}}]}`), &req)
	used := promptCount + completionCount
	overshoot := used - (promptTokens(&req) + maxTokens)
	mu.Lock()
	defer mu.Unlock()
	if granted == 0 || granted*used > MaxTokensPerInvoke+overshoot || backendHit != granted {
		t.Fatalf("%d of 8 granted (%d reached the backend): %d tokens settled against a cap of %d (+%d, one call's overshoot)",
			granted, backendHit, granted*used, MaxTokensPerInvoke, overshoot)
	}
	if most != 1 {
		t.Fatalf("%d calls reached the backend at once, after a call settled above its reservation", most)
	}
}

// Serialising is only for a backend that counted more than reserved: once
// a call settles within its reservation, the calls waiting behind the
// invoke's first are sent side by side.
func TestSamplingWithinTheEstimateRunsInParallel(t *testing.T) {
	f := newFixture(t)
	var (
		mu             sync.Mutex
		inflight, most int
		hits           int
	)
	arrived := make(chan struct{}, 16)
	f.setChat(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inflight++
		hits++
		first := hits == 1
		most = max(most, inflight)
		mu.Unlock()
		select {
		case arrived <- struct{}{}:
		default:
		}
		// The first answers at once; the others wait for company (or a
		// generous while), so calls sent side by side meet here.
		hold := time.After(10 * time.Second)
	wait:
		for !first {
			mu.Lock()
			n := inflight
			mu.Unlock()
			if n >= 2 {
				break
			}
			select {
			case <-arrived:
			case <-hold:
				break wait
			}
		}
		mu.Lock()
		inflight--
		mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"model": "m", "choices": []any{map[string]any{
			"message": map[string]string{"content": "ok"}, "finish_reason": "stop"}},
			"usage": map[string]int{"prompt_tokens": 5, "completion_tokens": 5}})
	})
	in, _ := f.b.Intent("openai")
	cs := newCompatServices(t, f)
	cs.opts.Sampling = &sampling.OpenAI{BaseURL: "http://api.example.com:" + strconv.Itoa(f.port) + "/v1", Model: "m", Intent: "openai",
		Destinations: in.Destinations, Broker: f.b, EgressProxy: f.proxy}
	p := cs.start(t, sdkPython("ok"))
	d := invokeData(t, p, "sample_many", `{"n":4,"max_tokens":100}`)
	for _, c := range d["codes"].([]any) {
		if c != float64(0) {
			t.Fatalf("codes %v, want all granted", d["codes"])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most < 2 {
		t.Fatal("calls within the estimate were serialised")
	}
}
