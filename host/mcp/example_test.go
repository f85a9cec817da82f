package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/peerauth"
)

// An agent lists the host's tools and calls one over MCP, as the
// principal its token names; the control API's authentication stands in
// front of the endpoint.
func ExampleServer_Handler() {
	h := host.New(host.Options{Policy: policy.AllowAll()})
	defer h.Shutdown(context.Background())
	_ = addStub(h, "stub")
	s := hostmcp.New(h, hostmcp.Options{})
	defer s.Close()

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	secret := peerauth.NewSecret()
	_ = os.WriteFile(filepath.Join(dir, "agent.token"), []byte(secret+"\n"), 0o600)
	srv := httptest.NewServer(control.Authenticate(s.Handler(), control.AuthOptions{
		Tokens: []control.TokenFile{{Principal: "agent", File: filepath.Join(dir, "agent.token")}},
	}, nil))
	defer srv.Close()

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	hc := &http.Client{Transport: bearer{token: secret, next: http.DefaultTransport}}
	defer hc.CloseIdleConnections()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cs.Close()
	tools, _ := cs.ListTools(ctx, nil)
	for _, t := range tools.Tools {
		fmt.Println(t.Name, t.Annotations.ReadOnlyHint, t.Meta[hostmcp.MetaUntrusted])
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stub__echo", Arguments: map[string]any{"say": "hi"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	out := res.StructuredContent.(map[string]any)
	fmt.Println(res.IsError, out["status"], out["result"])
	// Output:
	// stub__echo true [description inputSchema]
	// false STATUS_SUCCEEDED map[say:hi]
}
