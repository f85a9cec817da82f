package sampling_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/host/executa/sampling"
)

// A fixture backend answers sampling calls from canned lines: what
// `airlock dev` and tests configure instead of a model.
func ExampleLoadFixture() {
	dir, _ := os.MkdirTemp("", "sampling-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "fixture.jsonl")
	_ = os.WriteFile(path, []byte(`{"match":"summarize","text":"3 open tickets","model":"fixture-1","inputTokens":12,"outputTokens":4}`+"\n"), 0o600)
	backend, err := sampling.LoadFixture(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	var req sampling.Request
	_ = json.Unmarshal([]byte(`{"messages":[{"role":"user","content":{"type":"text","text":"summarize the tickets"}}],"maxTokens":50}`), &req)
	c, err := backend.Complete(context.Background(), &req)
	fmt.Println(c.Text, c.Model, c.InputTokens+c.OutputTokens, err)
	// Output: 3 open tickets fixture-1 16 <nil>
}

// A backend says why it failed with an *Error: the plugin learns its
// kind and when to retry, never the provider's body.
func ExampleError() {
	var err error = &sampling.Error{Kind: sampling.KindRateLimited, Status: 429, RetryAfter: 7 * time.Second}
	var e *sampling.Error
	if errors.As(err, &e) {
		fmt.Println(e.Kind, e.RetryAfter)
	}
	fmt.Println(err)
	// Output:
	// PROVIDER_RATE_LIMITED 7s
	// sampling backend: PROVIDER_RATE_LIMITED (HTTP 429)
}
