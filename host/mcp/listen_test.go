package mcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	hostmcp "github.com/airlock-dev/airlock/host/mcp"
)

// A session's standing stream is not cut at the bound of a POST's
// answer: the Go SDK client takes list changes on its session's GET
// stream, and a change long after the call bound and one write timeout
// still reaches it. (The SDK's newer protocol takes them on a
// subscriptions/listen POST instead, which that bound would cut; the
// stateful transport this server uses does not serve it, and clients
// fall back, which this test also checks.)
func TestListenStreamOutlivesCallBound(t *testing.T) {
	const bound = 100 * time.Millisecond
	f := newFixtureOpts(t, hostmcp.Options{CallTimeout: bound, WriteTimeout: bound}, allowAll, nil, "agent")
	changed := make(chan struct{}, 64)
	cs := connect(t, f.url, f.tokens["agent"], &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	if v := cs.InitializeResult().ProtocolVersion; v >= "2026-07-28" {
		t.Fatalf("protocol %s: list changes would come on a POST, under its bound", v)
	}
	if err := addStub(f.h, "early"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("no list change for a plugin added at once")
	}
	// The session stays open past a POST's bound.
	time.Sleep(5 * bound)
	for len(changed) > 0 {
		<-changed
	}
	if err := addStub(f.h, "late"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("no list change after the POST bound: the session's stream was cut")
	}
}
