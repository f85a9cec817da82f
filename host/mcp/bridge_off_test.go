package mcp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A host whose control API is up with the MCP endpoint turned off gets
// the bridge's own message naming the setting, not the SDK's "Not Found";
// a host that answers otherwise keeps the connect error.
func TestBridgeNamesTheOffEndpoint(t *testing.T) {
	for _, tc := range []struct {
		status int
		off    bool
	}{{http.StatusNotFound, true}, {http.StatusInternalServerError, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "no", tc.status)
		}))
		local, _ := mcp.NewInMemoryTransports()
		err := Bridge(context.Background(), local, srv.URL+Path, srv.Client(), "test")
		srv.Close()
		if err == nil || errors.Is(err, ErrEndpointOff) != tc.off {
			t.Fatalf("status %d: %v", tc.status, err)
		}
	}
}
