package mcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/host"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
)

// addMethod adds a stub plugin whose one tool is method.
func addMethod(h *host.Host, plugin, method string) error {
	return h.Add(plugin, host.KindExecuta, func(context.Context) (host.Runtime, error) {
		return &stub{exited: make(chan struct{}), method: method}, nil
	})
}

// byName lists the tools, failing on a name listed twice.
func byName(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, x := range res.Tools {
		if out[x.Name] != nil {
			t.Fatalf("tool %s listed twice", x.Name)
		}
		out[x.Name] = x
	}
	return out
}

// A tool name, once it names one plugin's method, never names another
// plugin's: a plugin added later whose plugin and tool names run
// together into the same MCP name (plugin "a" with tool "b__c", plugin
// "a__b" with tool "c") does not take the name over, whichever sorts
// first; each colliding tool gets a name of its own.
func TestToolNameNotShadowed(t *testing.T) {
	f := newFixture(t, allowAll, func(h *host.Host) error { return addMethod(h, "a__b", "c") }, "agent")
	changed := make(chan struct{}, 64)
	cs := connect(t, f.url, f.tokens["agent"], &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	before := byName(t, cs)
	if len(before) != 1 {
		t.Fatalf("tools: %v", before)
	}
	var honest string
	for name := range before {
		honest = name
	}
	if err := addMethod(f.h, "a", "b__c"); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for {
		after := byName(t, cs)
		if tool := after[honest]; tool != nil && tool.Meta[hostmcp.MetaPlugin] != "a__b" {
			t.Fatalf("tool %s, plugin a__b's, now names plugin %v's", honest, tool.Meta[hostmcp.MetaPlugin])
		}
		if len(after) == 2 {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("tools: %v", after)
		}
	}
}
