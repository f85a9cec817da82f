package executa

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/tokens"
)

// Sampling error codes of the notes.
const (
	CodeSamplingNotGranted    = -32001
	CodeSamplingQuota         = -32002
	CodeSamplingInvalid       = -32004
	CodeSamplingTimeout       = -32005
	CodeSamplingMaxCalls      = -32006
	CodeSamplingMaxTokens     = -32007
	CodeSamplingUnsupportedRF = -32010
)

// Sampling limits.
const (
	MaxSamplingMessages   = 64
	MaxSamplingTokens     = 8192
	MaxCallsPerInvoke     = 8
	MaxTokensPerInvoke    = 32000
	MaxSchemaBytes        = 32 << 10
	MaxSchemaDepth        = 8
	MaxSchemaNodes        = 512
	DefaultSamplingWindow = 60 * time.Second
)

var schemaName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// SamplingRequest is sampling/createMessage's params.
type SamplingRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"messages"`
	MaxTokens      int             `json:"maxTokens"`
	SystemPrompt   string          `json:"systemPrompt,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"`
	StopSequences  []string        `json:"stopSequences,omitempty"`
	IncludeContext string          `json:"includeContext,omitempty"`
	ResponseFormat *ResponseFormat `json:"responseFormat,omitempty"`
	OnUnsupported  string          `json:"onUnsupported,omitempty"`
	SamplingToken  string          `json:"sampling_token,omitempty"`
	InvokeID       string          `json:"invoke_id,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
}

// ResponseFormat asks for structured output.
type ResponseFormat struct {
	Type       string `json:"type"` // json_object | json_schema
	JSONSchema *struct {
		Name   string          `json:"name"`
		Strict bool            `json:"strict"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema,omitempty"`
}

// Completion is what a backend returns.
type Completion struct {
	Text         string
	Model        string
	StopReason   string
	InputTokens  int
	OutputTokens int
	Provider     string
	Structured   bool // the backend honoured a response format
}

// SamplingBackend produces completions.
type SamplingBackend interface {
	Complete(ctx context.Context, req *SamplingRequest) (Completion, error)
	SupportsFormat(kind string) bool
}

// FixtureBackend answers from a JSONL file of canned responses, for dev
// and tests: each line {"match": "...", "text": "...", "model": "..."}; the
// first whose match is in the last user message (or empty) answers.
type FixtureBackend struct {
	entries []fixtureEntry
}

type fixtureEntry struct {
	Match        string `json:"match"`
	Text         string `json:"text"`
	Model        string `json:"model"`
	InputTokens  int    `json:"inputTokens"`
	OutputTokens int    `json:"outputTokens"`
	JSON         bool   `json:"json"`
}

// LoadFixtureBackend reads a JSONL fixture file.
func LoadFixtureBackend(path string) (*FixtureBackend, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fb := &FixtureBackend{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var e fixtureEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("sampling fixture %s line %d: not a JSON object", path, n)
		}
		fb.entries = append(fb.entries, e)
	}
	return fb, sc.Err()
}

// Complete implements SamplingBackend.
func (fb *FixtureBackend) Complete(_ context.Context, req *SamplingRequest) (Completion, error) {
	last := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			last = m.Content.Text
		}
	}
	for _, e := range fb.entries {
		if e.Match == "" || strings.Contains(last, e.Match) {
			model := e.Model
			if model == "" {
				model = "fixture"
			}
			return Completion{Text: e.Text, Model: model, StopReason: "endTurn", InputTokens: e.InputTokens,
				OutputTokens: e.OutputTokens, Provider: "fixture", Structured: e.JSON}, nil
		}
	}
	return Completion{}, errors.New("no fixture matches")
}

// SupportsFormat implements SamplingBackend: fixtures marked json can
// answer structured requests.
func (fb *FixtureBackend) SupportsFormat(string) bool {
	for _, e := range fb.entries {
		if e.JSON {
			return true
		}
	}
	return false
}

// samplingBudget is one invoke's use of sampling.
type samplingBudget struct {
	mu      sync.Mutex
	calls   int
	tokens  int
	storage int // storage RPCs
}

// sample handles sampling/createMessage after the gates passed.
func (p *Process) sample(ctx context.Context, inv *liveInvoke, params json.RawMessage) (any, *RPCError) {
	bad := func(msg string) *RPCError { return rpcError(CodeSamplingInvalid, msg, "INVALID_REQUEST") }
	var req SamplingRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, bad("params are not a sampling request")
	}
	claims, msg := p.grant(ctx, inv, req.SamplingToken, inv.samplingToken, "sampling", (*tokens.Verifier).VerifySampling)
	if claims == nil {
		return nil, rpcError(CodeSamplingNotGranted, msg, "NOT_GRANTED")
	}
	if n := len(req.Messages); n == 0 || n > MaxSamplingMessages {
		return nil, bad(fmt.Sprintf("messages: between 1 and %d", MaxSamplingMessages))
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" && m.Role != "system" {
			return nil, bad(fmt.Sprintf("messages[%d].role: user, assistant or system", i))
		}
		if m.Content.Type != "text" {
			return nil, bad(fmt.Sprintf("messages[%d].content.type: only text", i))
		}
	}
	if req.MaxTokens < 1 || req.MaxTokens > MaxSamplingTokens || req.MaxTokens > claims.MaxTokensPerCall {
		return nil, bad("maxTokens: between 1 and the negotiated maxTokensPerCall")
	}
	if req.IncludeContext != "" && req.IncludeContext != "none" {
		return nil, bad(`includeContext: only "none"`)
	}
	switch req.OnUnsupported {
	case "", "error", "json_object", "text":
	default:
		return nil, bad("onUnsupported: error, json_object or text")
	}
	requested := ""
	if rf := req.ResponseFormat; rf != nil {
		requested = rf.Type
		switch rf.Type {
		case "json_object":
		case "json_schema":
			if rf.JSONSchema == nil || !schemaName.MatchString(rf.JSONSchema.Name) {
				return nil, bad("responseFormat.json_schema.name: ^[a-zA-Z0-9_-]{1,64}$")
			}
			if err := checkSchema(rf.JSONSchema.Schema); err != nil {
				return nil, bad("responseFormat.json_schema.schema: " + err.Error())
			}
		default:
			return nil, bad("responseFormat.type: json_object or json_schema")
		}
	}
	// Per-invoke caps: hitting either ends sampling for the invoke.
	inv.budget.mu.Lock()
	if inv.budget.calls >= min(claims.MaxCallsPerInvoke, MaxCallsPerInvoke) {
		inv.budget.mu.Unlock()
		return nil, rpcError(CodeSamplingMaxCalls, "sampling call limit for this invoke reached", "MAX_CALLS_EXCEEDED")
	}
	if inv.budget.tokens >= MaxTokensPerInvoke {
		inv.budget.mu.Unlock()
		return nil, rpcError(CodeSamplingMaxTokens, "sampling token budget for this invoke spent", "MAX_TOKENS_EXCEEDED")
	}
	inv.budget.calls++
	inv.budget.mu.Unlock()

	applied, downgraded := requested, false
	if requested != "" && (p.opts.Sampling == nil || !p.opts.Sampling.SupportsFormat(requested)) {
		switch req.OnUnsupported {
		case "", "error":
			data, _ := json.Marshal(map[string]string{"errorCode": "UNSUPPORTED_RESPONSE_FORMAT", "requested": requested, "modelName": "configured backend"})
			return nil, &RPCError{Code: CodeSamplingUnsupportedRF, Message: "the backend does not support this response format", Data: data}
		case "text":
			applied, downgraded = "text", true
		case "json_object":
			applied, downgraded = "json_object", requested != "json_object"
		}
	}
	if p.opts.Sampling == nil {
		return nil, rpcError(CodeSamplingProviderError, "no sampling backend is configured on this host", "PROVIDER_ERROR")
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, DefaultSamplingWindow)
	defer cancel()
	c, err := p.opts.Sampling.Complete(cctx, &req)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, rpcError(CodeSamplingTimeout, "the sampling backend timed out", "TIMEOUT")
	}
	if err != nil {
		return nil, rpcError(CodeSamplingProviderError, "the sampling backend failed", "PROVIDER_ERROR")
	}
	inv.budget.mu.Lock()
	inv.budget.tokens += c.InputTokens + c.OutputTokens
	inv.budget.mu.Unlock()
	structuredValid := applied == "json_object" || applied == "json_schema"
	if structuredValid {
		structuredValid = json.Valid([]byte(c.Text))
	}
	return map[string]any{
		"role": "assistant", "content": map[string]string{"type": "text", "text": c.Text}, "model": c.Model,
		"stopReason": c.StopReason,
		"usage":      map[string]int{"inputTokens": c.InputTokens, "outputTokens": c.OutputTokens, "totalTokens": c.InputTokens + c.OutputTokens},
		"_meta": map[string]any{"provider": c.Provider, "latencyMs": time.Since(start).Milliseconds(),
			"responseFormat": map[string]any{"requested": requested, "applied": applied, "structuredValid": structuredValid, "downgraded": downgraded}},
	}, nil
}

// checkSchema applies the notes' JSON schema limits: size, depth, nodes.
func checkSchema(raw json.RawMessage) error {
	if len(raw) > MaxSchemaBytes {
		return fmt.Errorf("larger than %d bytes", MaxSchemaBytes)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return errors.New("not JSON")
	}
	nodes := 0
	var walk func(v any, depth int) error
	walk = func(v any, depth int) error {
		nodes++
		if nodes > MaxSchemaNodes {
			return fmt.Errorf("more than %d nodes", MaxSchemaNodes)
		}
		if depth > MaxSchemaDepth {
			return fmt.Errorf("deeper than %d", MaxSchemaDepth)
		}
		switch x := v.(type) {
		case map[string]any:
			for _, c := range x {
				if err := walk(c, depth+1); err != nil {
					return err
				}
			}
		case []any:
			for _, c := range x {
				if err := walk(c, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(v, 1)
}
