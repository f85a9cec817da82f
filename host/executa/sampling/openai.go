package sampling

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/randid"
	"github.com/airlock-dev/airlock/internal/tracing"
)

// OpenAI calls an OpenAI-compatible chat-completions endpoint
// through Airlock's own egress proxy with a brokered credential: the API
// key never leaves the secret source and the proxy's checks apply to the
// host's own calls too.
type OpenAI struct {
	// BaseURL is http://host[:port][/prefix] (http: the proxy adds TLS).
	BaseURL string
	Model   string
	// Intent is the broker intent bound to the API key (header injection).
	Intent       string
	Destinations []broker.Destination
	Broker       broker.API
	EgressProxy  string
	// JSON says the model honours response_format.
	JSON bool
	// Log receives a failed revocation of a call's credential (nil:
	// discarded).
	Log *slog.Logger

	once   sync.Once
	client *http.Client // one for every call: connections are kept alive
}

// endpoint is the chat-completions URL: BaseURL may name the API root
// (http://api.example.com) or its /v1 (http://api.example.com/v1), as
// OpenAI's own clients take it.
func (o *OpenAI) endpoint() string {
	base := strings.TrimSuffix(o.BaseURL, "/")
	if strings.HasSuffix(base, "/v1") {
		return base + "/chat/completions"
	}
	return base + "/v1/chat/completions"
}

// httpClient is the backend's one client. The handle travels in each
// request's Proxy-Authorization, not in the proxy URL, so every call
// shares the pool of connections to the proxy.
func (o *OpenAI) httpClient(proxy string) *http.Client {
	o.once.Do(func() {
		o.client = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyURL(&url.URL{Scheme: "http", Host: proxy}),
			MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second,
		}}
	})
	return o.client
}

// CloseIdleConnections releases the kept-alive connections.
func (o *OpenAI) CloseIdleConnections() {
	if o.client != nil {
		o.client.CloseIdleConnections()
	}
}

// SupportsFormat implements Backend.
func (o *OpenAI) SupportsFormat(string) bool { return o.JSON }

// Complete implements Backend.
func (o *OpenAI) Complete(ctx context.Context, req *Request) (Completion, error) {
	// The handle is the calling plugin's, under an invocation id of its
	// own (revoked below without touching the caller's other handles)
	// that begins with the caller's: the proxy's audit line credits them.
	plugin, inv := "airlock.sampling", "sampling-"+randid.Hex(8)
	if req.Caller.Plugin != "" {
		plugin = req.Caller.Plugin
	}
	if c := req.Caller.Invocation; c != "" && len(c) <= broker.MaxIDBytes-len(inv)-1 {
		inv = c + "/" + inv
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultTimeout)
	}
	iss, err := o.Broker.Issue(ctx, broker.IssueRequest{PluginID: plugin, InvocationID: inv, Intent: o.Intent,
		Destinations: o.Destinations, Deadline: deadline})
	if err != nil {
		return Completion{}, &Error{Kind: KindUnavailable, Err: fmt.Errorf("sampling credential: %w", err)}
	}
	defer host.EndInvocation(ctx, o.Broker, o.Log, plugin, inv, deadline)
	msgs := []map[string]string{}
	if req.SystemPrompt != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": req.SystemPrompt})
	}
	for _, m := range req.Messages {
		msgs = append(msgs, map[string]string{"role": m.Role, "content": m.Content.Text})
	}
	body := map[string]any{"model": o.Model, "messages": msgs, "max_tokens": req.MaxTokens}
	if req.Temperature != nil {
		body["temperature"] = *req.Temperature
	}
	if len(req.StopSequences) > 0 {
		body["stop"] = req.StopSequences
	}
	if rf := req.ResponseFormat; rf != nil && o.JSON {
		body["response_format"] = rf
	}
	raw, _ := json.Marshal(body)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, o.endpoint(), bytes.NewReader(raw))
	if err != nil {
		return Completion{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Proxy-Authorization", "Bearer "+iss.Handle)
	if tp := tracing.Traceparent(ctx); tp != "" {
		// The sampling call's span (the plugin's reverse call): the
		// egress proxy's request span, and the model API's own if it
		// traces, join the invocation's trace.
		hreq.Header.Set("Traceparent", tp)
	}
	proxy := o.EgressProxy
	if proxy == "" {
		proxy = iss.EgressProxy
	}
	resp, err := o.httpClient(proxy).Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return Completion{}, ctx.Err()
		}
		return Completion{}, &Error{Kind: KindUnavailable, Err: errors.New("the egress proxy could not be reached")}
	}
	defer func() {
		// Read to the end so the connection goes back to the pool.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return Completion{}, statusError(resp)
	}
	var out struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&out); err != nil || len(out.Choices) == 0 {
		if ctx.Err() != nil {
			return Completion{}, ctx.Err()
		}
		return Completion{}, &Error{Kind: KindBadResponse, Status: resp.StatusCode}
	}
	stop := map[string]string{"stop": "endTurn", "length": "maxTokens"}[out.Choices[0].FinishReason]
	if stop == "" {
		stop = out.Choices[0].FinishReason
	}
	c := Completion{Text: out.Choices[0].Message.Content, Model: out.Model, StopReason: stop,
		Provider: "openai-compatible", Structured: o.JSON}
	if out.Usage != nil {
		c.InputTokens, c.OutputTokens, c.UsageReported = out.Usage.Prompt, out.Usage.Completion, true
	}
	return c, nil
}
