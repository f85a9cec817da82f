package mcp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/host"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
)

// An agent on the bridge (what `airlock mcp` serves on stdio) sees the
// host's tools, calls them as the bridge's principal, is refused with
// Airlock's code, hears of list changes, and ending its session ends the
// bridge.
func TestBridge(t *testing.T) {
	f := newFixture(t, "version: v1\nrules:\n  - name: no-denied\n    effect: deny\n    plugins: [denied]\n  - name: rest\n    effect: allow\n",
		func(h *host.Host) error {
			if err := addStub(h, "stub"); err != nil {
				return err
			}
			return addStub(h, "denied")
		}, "agent")
	local, agent := mcp.NewInMemoryTransports()
	hc := &http.Client{Transport: bearer{token: f.tokens["agent"], next: http.DefaultTransport}}
	defer hc.CloseIdleConnections()
	done := make(chan error, 1)
	go func() { done <- hostmcp.Bridge(context.Background(), local, f.url, hc, "test") }()

	changed := make(chan struct{}, 64)
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	ctx := context.Background()
	cs, err := c.Connect(ctx, agent, nil)
	if err != nil {
		t.Fatal(err)
	}
	tool := waitTool(t, cs, changed, "stub__echo", true)
	if tool.Meta[hostmcp.MetaPlugin] != "stub" || tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
		t.Fatalf("the host's tool, bridged: %+v", tool)
	}
	// A numeric progress token (what the TypeScript SDK sends).
	params := &mcp.CallToolParams{Name: "stub__echo", Arguments: map[string]any{"say": "hi"}, Meta: mcp.Meta{"progressToken": 7}}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := res.StructuredContent.(map[string]any); res.IsError || out["status"] != "STATUS_SUCCEEDED" {
		t.Fatalf("bridged call: %+v", res)
	}
	if rec := records(t, f.evPath, "invocation.start"); len(rec) != 1 || rec[0]["principal"] != "agent" {
		t.Fatalf("the call's principal: %v", rec)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "denied__echo", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := res.StructuredContent.(map[string]any); !res.IsError || out["error"] != "policy_denied" ||
		res.Meta[hostmcp.MetaRefusal] != "policy_denied" {
		t.Fatalf("bridged refusal: %+v", res)
	}
	const marker = "REQUEST-VALUE-41d7"
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: marker, Arguments: map[string]any{}}); err == nil ||
		strings.Contains(err.Error(), marker) {
		t.Errorf("a bridged call of an unknown tool: %v", err)
	}
	if err := addStub(f.h, "late"); err != nil {
		t.Fatal(err)
	}
	waitTool(t, cs, changed, "late__echo", true)
	cs.Close()
	if err := <-done; err != nil {
		t.Fatalf("Bridge after the agent left: %v", err)
	}
}
