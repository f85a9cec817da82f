package daemon

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	hostmcp "github.com/airlock-dev/airlock/host/mcp"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/tracing/tracingtest"
)

// withTraceparent sends a fixed traceparent on every request, as an
// agent that traces does.
type withTraceparent struct {
	rt http.RoundTripper
	tp string
}

func (w withTraceparent) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Traceparent", w.tp)
	return w.rt.RoundTrip(r)
}

// An MCP tools/call from an agent that sends a traceparent is one trace
// with the invocation it runs: the invocation's span is a child of the
// control-API span of the MCP request that carried the call.
func TestMCPCallJoinsTrace(t *testing.T) {
	rcv := tracingtest.NewReceiver(t)
	endpoint, tokenFile, _, _, stop := mcpDev(t, func(c *config.Config) { c.Tracing.Endpoint = rcv.URL() })
	defer stop()
	const trace = "5af7183fb1d4cf5f1c2f6e0a9b8c7d6e"
	hc, _ := ControlClient(strings.TrimSuffix(endpoint, hostmcp.Path), ControlClientOptions{TokenFile: tokenFile})
	defer hc.CloseIdleConnections()
	hc.Transport = withTraceparent{rt: hc.Transport, tp: "00-" + trace + "-00f067aa0ba902b7-01"}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "trace-test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for _, tool := range tools.Tools {
		if m, _ := tool.Meta[hostmcp.MetaMethod].(string); m == "numinance.ports.tickets.v1.Tickets/ListTickets" {
			name = tool.Name
		}
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"project": "demo"}})
	if err != nil || r.IsError {
		t.Fatalf("call: %+v %v", r, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		spans := rcv.Spans()
		control := map[string]bool{}
		for _, s := range spans {
			if s.Name == spanControl && s.TraceID == trace && s.Attrs["airlock.control.resource"] == hostmcp.Path {
				control[s.SpanID] = true
			}
		}
		for _, s := range spans {
			if s.Name == "airlock.invocation" && s.TraceID == trace && control[s.ParentSpanID] {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no invocation span under an MCP request's control span in trace %s: %+v", trace, spans)
		}
	}
}
