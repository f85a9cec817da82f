package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// Serve with AuditOut writes each request's audit line there (from its
// writer, flushed by the time Serve returns), and with Pprof serves the
// profiling endpoints on the admin listener only, never on the proxy's.
func TestServeAuditOutAndPprof(t *testing.T) {
	leaks := testenv.CheckGoroutines(t)
	cfg := testConfig(t)
	audit := &testenv.SyncBuffer{}
	ready := make(chan Ready, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, cfg, Options{AuditOut: audit, Pprof: true, OnReady: func(r Ready) { ready <- r }})
	}()
	var r Ready
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
	get := func(u string) int {
		t.Helper()
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("http://" + r.Admin + "/debug/pprof/"); code != http.StatusOK {
		t.Fatalf("admin /debug/pprof/: %d", code)
	}
	// The proxy answers its own paths as a forward proxy: refused, never
	// a profile.
	if code := get("http://" + r.Proxy + "/debug/pprof/"); code == http.StatusOK {
		t.Fatal("the proxy port serves /debug/pprof/")
	}
	req, _ := http.NewRequest("GET", "http://api.example.com/v1/x", nil)
	tr := &http.Transport{Proxy: func(*http.Request) (*url.URL, error) { return url.Parse("http://" + r.Proxy) }}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("no handle: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	var found bool
	for _, l := range strings.Split(strings.TrimSpace(audit.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		if m["log"] == "audit" && m["msg"] == "egress" && m["host"] == "api.example.com" && m["code"] == "handle_missing" && m["status"] == 407.0 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no audit line for the refused request:\n%s", audit.String())
	}
	leaks()
}
