package sampling

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// fakeBroker mints one handle per call and records what it was asked.
type fakeBroker struct {
	mu       sync.Mutex
	issued   []broker.IssueRequest
	revoked  []string
	issueErr error
}

func (b *fakeBroker) Issue(_ context.Context, req broker.IssueRequest) (broker.Issued, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.issueErr != nil {
		return broker.Issued{}, b.issueErr
	}
	b.issued = append(b.issued, req)
	return broker.Issued{Handle: "h-" + req.InvocationID}, nil
}

func (b *fakeBroker) RevokeInvocation(_ context.Context, id string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.revoked = append(b.revoked, id)
	return 1, nil
}

func (b *fakeBroker) RevokePlugin(context.Context, string) (int, error) { return 0, nil }

// fakeProxy stands for the egress proxy: it receives the backend's
// forward-proxy requests (absolute URIs) and answers them with chat.
type fakeProxy struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []*http.Request
	body []map[string]any
	chat http.HandlerFunc
}

func newFakeProxy(t *testing.T, chat http.HandlerFunc) *fakeProxy {
	t.Helper()
	p := &fakeProxy{chat: chat}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		p.mu.Lock()
		p.seen = append(p.seen, r)
		p.body = append(p.body, body)
		p.mu.Unlock()
		p.chat(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakeProxy) addr() string { return p.srv.Listener.Addr().String() }

// requests are the requests seen so far and their JSON bodies.
func (p *fakeProxy) requests() ([]*http.Request, []map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*http.Request(nil), p.seen...), append([]map[string]any(nil), p.body...)
}

func answer(text, finish string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"model": "m-1", "choices": []any{map[string]any{
			"message": map[string]string{"content": text}, "finish_reason": finish}},
			"usage": map[string]int{"prompt_tokens": 7, "completion_tokens": 2}})
	}
}

func request(text string) *Request {
	req := &Request{MaxTokens: 5, SystemPrompt: "be brief"}
	req.Messages = make([]struct {
		Role    string `json:"role"`
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}, 1)
	req.Messages[0].Role, req.Messages[0].Content.Type, req.Messages[0].Content.Text = "user", "text", text
	return req
}

// A call mints a handle for the calling plugin under an invocation of its
// own that begins with the caller's, sends it to the proxy (never a key),
// revokes it when the call ends, and maps the answer.
func TestOpenAICompletes(t *testing.T) {
	px := newFakeProxy(t, answer("pong", "stop"))
	b := &fakeBroker{}
	dests := []broker.Destination{{Host: "api.example.com", Port: 443}}
	o := &OpenAI{BaseURL: "http://api.example.com/v1", Model: "gpt-test", Intent: "openai", Destinations: dests,
		Broker: b, EgressProxy: px.addr()}
	defer o.CloseIdleConnections()
	req := request("ping")
	req.Caller = Caller{Plugin: "tickets", Invocation: "inv-1"}
	c, err := o.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if c.Text != "pong" || c.Model != "m-1" || c.StopReason != "endTurn" || c.Provider != "openai-compatible" ||
		!c.UsageReported || c.InputTokens != 7 || c.OutputTokens != 2 || c.Structured {
		t.Fatalf("completion %+v", c)
	}
	if len(b.issued) != 1 {
		t.Fatalf("%d handles issued", len(b.issued))
	}
	iss := b.issued[0]
	if iss.PluginID != "tickets" || !strings.HasPrefix(iss.InvocationID, "inv-1/sampling-") || iss.Intent != "openai" ||
		len(iss.Destinations) != 1 || iss.Destinations[0].Host != dests[0].Host || iss.Deadline.IsZero() {
		t.Fatalf("issue request %+v", iss)
	}
	if len(b.revoked) != 1 || b.revoked[0] != iss.InvocationID {
		t.Fatalf("revoked %v, want the call's own invocation %q", b.revoked, iss.InvocationID)
	}
	seen, body := px.requests()
	r := seen[0]
	if r.Method != http.MethodPost || r.RequestURI != "http://api.example.com/v1/chat/completions" {
		t.Fatalf("request %s %s", r.Method, r.RequestURI)
	}
	if got := r.Header.Get("Proxy-Authorization"); got != "Bearer h-"+iss.InvocationID {
		t.Fatalf("Proxy-Authorization %q", got)
	}
	msgs, _ := body[0]["messages"].([]any)
	if body[0]["model"] != "gpt-test" || len(msgs) != 2 || body[0]["response_format"] != nil {
		t.Fatalf("body %v", body[0])
	}
}

// Without a caller the handle is the host's own ("airlock.sampling").
func TestOpenAIWithoutCaller(t *testing.T) {
	px := newFakeProxy(t, answer("ok", "length"))
	b := &fakeBroker{}
	o := &OpenAI{BaseURL: "http://api.example.com", Model: "m", Intent: "openai", Broker: b, EgressProxy: px.addr(), JSON: true}
	defer o.CloseIdleConnections()
	req := request("x")
	req.ResponseFormat = &ResponseFormat{Type: "json_object"}
	c, err := o.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if c.StopReason != "maxTokens" || !c.Structured || !o.SupportsFormat("json_object") {
		t.Fatalf("completion %+v", c)
	}
	if b.issued[0].PluginID != "airlock.sampling" || !strings.HasPrefix(b.issued[0].InvocationID, "sampling-") {
		t.Fatalf("issue request %+v", b.issued[0])
	}
	if _, body := px.requests(); body[0]["response_format"] == nil {
		t.Fatal("response_format not sent to a backend that honours it")
	}
}

// Each way the backend fails is an *Error of its own kind, never holding
// the backend's body.
func TestOpenAIFailures(t *testing.T) {
	for _, tt := range []struct {
		name  string
		chat  http.HandlerFunc
		kind  string
		retry time.Duration
	}{
		{"unauthorized", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "secret-body", http.StatusUnauthorized) }, KindUnauthorized, 0},
		{"forbidden", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "secret-body", http.StatusForbidden) }, KindUnauthorized, 0},
		{"rate limited", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "7")
			http.Error(w, "secret-body", http.StatusTooManyRequests)
		}, KindRateLimited, 7 * time.Second},
		{"server error", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "secret-body", http.StatusBadGateway) }, KindUpstream, 0},
		{"proxy refused", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Airlock-Error", "destination_denied")
			http.Error(w, "secret-body", http.StatusForbidden)
		}, KindUnavailable, 0},
		{"malformed answer", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"choices":"nope"`)) }, KindBadResponse, 0},
		{"no choices", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"choices":[]}`)) }, KindBadResponse, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			px := newFakeProxy(t, tt.chat)
			b := &fakeBroker{}
			o := &OpenAI{BaseURL: "http://api.example.com/v1", Model: "m", Intent: "openai", Broker: b, EgressProxy: px.addr()}
			defer o.CloseIdleConnections()
			_, err := o.Complete(context.Background(), request("x"))
			var e *Error
			if !errors.As(err, &e) || e.Kind != tt.kind || e.RetryAfter != tt.retry {
				t.Fatalf("got %v (%#v), want kind %s retry %v", err, e, tt.kind, tt.retry)
			}
			if strings.Contains(err.Error(), "secret-body") {
				t.Fatalf("the backend's body reached the error: %v", err)
			}
			if len(b.revoked) != 1 {
				t.Fatalf("the call's handle was not revoked: %v", b.revoked)
			}
		})
	}
}

// No handle, or no proxy: Unavailable, and nothing is sent.
func TestOpenAIUnavailable(t *testing.T) {
	px := newFakeProxy(t, answer("never", "stop"))
	o := &OpenAI{BaseURL: "http://api.example.com", Model: "m", Intent: "openai",
		Broker: &fakeBroker{issueErr: errors.New("no such intent")}, EgressProxy: px.addr()}
	var e *Error
	if _, err := o.Complete(context.Background(), request("x")); !errors.As(err, &e) || e.Kind != KindUnavailable {
		t.Fatalf("no handle: %v", err)
	}
	if seen, _ := px.requests(); len(seen) != 0 {
		t.Fatal("a call without a handle reached the proxy")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	o = &OpenAI{BaseURL: "http://api.example.com", Model: "m", Intent: "openai", Broker: &fakeBroker{}, EgressProxy: closed}
	defer o.CloseIdleConnections()
	if _, err := o.Complete(context.Background(), request("x")); !errors.As(err, &e) || e.Kind != KindUnavailable {
		t.Fatalf("no proxy: %v", err)
	}
}

// A cancelled call is the context's error, not a backend failure.
func TestOpenAICancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	px := newFakeProxy(t, func(w http.ResponseWriter, r *http.Request) {
		cancel()
		<-r.Context().Done()
	})
	o := &OpenAI{BaseURL: "http://api.example.com", Model: "m", Intent: "openai", Broker: &fakeBroker{}, EgressProxy: px.addr()}
	defer o.CloseIdleConnections()
	if _, err := o.Complete(ctx, request("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
}

// One client for every call: connections to the proxy are kept alive
// (the host's open files do not grow per call), and a base_url with or
// without /v1 reaches /v1/chat/completions.
func TestOpenAIReusesConnections(t *testing.T) {
	px := newFakeProxy(t, answer("ok", "stop"))
	for _, base := range []string{"", "/v1", "/v1/"} {
		o := &OpenAI{BaseURL: "http://api.example.com" + base, Model: "m", Intent: "openai", Broker: &fakeBroker{}, EgressProxy: px.addr()}
		complete := func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := o.Complete(ctx, request("x")); err != nil {
				t.Fatalf("base %q: %v", base, err)
			}
		}
		complete()
		fds := openFiles(t)
		for i := 0; i < 20; i++ {
			complete()
		}
		if grew := openFiles(t) - fds; grew > 2 {
			t.Fatalf("base %q: open files grew by %d over 20 calls", base, grew)
		}
		o.CloseIdleConnections()
	}
	seen, _ := px.requests()
	for _, r := range seen {
		if r.URL.Path != "/v1/chat/completions" {
			t.Fatalf("a call reached %s", r.URL.Path)
		}
	}
	if len(seen) != 63 {
		t.Fatalf("%d calls, want 63", len(seen))
	}
}

func openFiles(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2099, 10, 21, 7, 28, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "7": 7 * time.Second, "-1": 0, "soon": 0,
		"Wed, 21 Oct 2099 07:28:30 GMT": 30 * time.Second, "Wed, 21 Oct 2099 07:27:00 GMT": 0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}
