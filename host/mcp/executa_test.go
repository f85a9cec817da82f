package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// A real Executa plugin's progress events reach the MCP client of the
// call they belong to as notifications/progress, in order: the host's
// reading of each event, the plugin's text quoted, inert and redacted.
// An event naming an invoke not in flight, which the plugin sends first,
// reaches no client. The control API streams the same events.
func TestExecutaProgress(t *testing.T) {
	script, err := filepath.Abs("../executa/testdata/plugin.py")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, allowAll, func(h *host.Host) error {
		return executa.Add(h, executa.PluginConfig{Name: "py", Command: testenv.Python(), Args: []string{script, "good"}},
			executa.Options{})
	}, "agent")
	progress := make(chan string, 8)
	cs := connect(t, f.url, f.tokens["agent"], &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress <- r.Params.Message
		}})
	waitTool(t, cs, nil, "py__progress_sdk", true)
	params := &mcp.CallToolParams{Name: "py__progress_sdk", Arguments: map[string]any{}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := res.StructuredContent.(map[string]any); res.IsError || out["status"] != "STATUS_SUCCEEDED" {
		t.Fatalf("result: %v", res.StructuredContent)
	}
	// Notifications are handled in the order they were sent; the result
	// may come back before the handler ran.
	next := func() string {
		t.Helper()
		select {
		case m := <-progress:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no progress notification")
			return ""
		}
	}
	first, second := next(), next()
	if !strings.HasPrefix(first, `running [plugin, untrusted: "tool_update": "step 1 of 2`) ||
		!strings.Contains(first, "alh_[REDACTED]") || strings.Contains(first, "A1b2C3d4") || !strings.HasSuffix(first, `"]`) {
		t.Fatalf("first progress: %q", first)
	}
	if r, bad := controls(first); bad {
		t.Fatalf("progress carries %U: %q", r, first)
	}
	if second != `running [plugin, untrusted: "progress": "{\"step\":2,\"total\":2}"]` {
		t.Fatalf("second progress: %q", second)
	}

	// The control API's NDJSON stream shows the same events as running
	// events, before the outcome.
	api, toks := serveMCP(t, control.NewHandler(f.h), "ops")
	req, _ := http.NewRequest(http.MethodPost, api+"/v1/invocations", strings.NewReader(`{"plugin":"py","method":"progress_sdk","input":{}}`))
	req.Header.Set("Authorization", "Bearer "+toks["ops"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []control.Event
	for dec := json.NewDecoder(resp.Body); ; {
		var e control.Event
		if err := dec.Decode(&e); err != nil {
			break
		}
		events = append(events, e)
	}
	if len(events) != 3 || events[0].Event != "running" || len(events[0].Diagnostics) != 1 ||
		events[0].Diagnostics[0].Code != "tool_update" || !strings.HasPrefix(events[0].Diagnostics[0].Message, "step 1 of 2") ||
		strings.Contains(events[0].Diagnostics[0].Message, "A1b2C3d4") || events[1].Event != "running" ||
		events[1].Diagnostics[0] != (host.Diagnostic{Code: "progress", Message: `{"step":2,"total":2}`}) ||
		events[2].Event != "outcome" || events[2].Status != string(host.CallSucceeded) {
		t.Fatalf("control API events: %+v", events)
	}
}
