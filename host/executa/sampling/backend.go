package sampling

import (
	"context"
	"encoding/json"
	"time"
)

// DefaultTimeout bounds a backend call whose context carries no deadline
// (host/executa's sampling timeout, when not configured).
const DefaultTimeout = 60 * time.Second

// Request is sampling/createMessage's params.
type Request struct {
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
	// Caller is who asked, set by the host (never read from the
	// plugin's params): a backend that reaches its API through the
	// proxy names them in the handle it mints, so the audit line credits
	// the calling plugin and invocation.
	Caller Caller `json:"-"`
}

// Caller is the plugin and host invocation a sampling call serves.
type Caller struct {
	Plugin, Invocation string
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
	// UsageReported says the backend gave InputTokens and OutputTokens.
	// Without it the call is counted at what was reserved for it, never
	// as free.
	UsageReported bool
}

// Backend produces completions. A failure is an *Error when the backend
// knows why, or the context's error when the call was cancelled.
type Backend interface {
	Complete(ctx context.Context, req *Request) (Completion, error)
	SupportsFormat(kind string) bool
}
