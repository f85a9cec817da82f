package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/broker"
)

// Audit lines name the destination port and the mode: plain, the
// CONNECT that opens a tunnel, a request inside it.
func TestAuditPortAndMode(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	h := f.issue(t, "api.write", "inv-audit-mode")
	if status, code, _ := do(t, f.client(h), http.MethodGet, f.url("/x"), nil, ""); status != 200 {
		t.Fatalf("plain: %d %q", status, code)
	}
	if status, code, _ := do(t, f.httpsClient(t, h, caFile), http.MethodGet, f.httpsURL("/x"), nil, ""); status != 200 {
		t.Fatalf("intercept: %d %q", status, code)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(f.audit.String()), "\n") {
		var rec struct {
			Mode, Method string
			Port         int
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Port != f.up.port {
			t.Errorf("port %d, want %d: %s", rec.Port, f.up.port, line)
		}
		got = append(got, rec.Mode+" "+rec.Method)
	}
	if want := "plain GET,connect CONNECT,intercept GET"; strings.Join(got, ",") != want {
		t.Fatalf("modes %q, want %q", got, want)
	}
}

// explain models both modes: an https:// URL is an intercepted CONNECT
// (when interception is on), and a plugin pass opens the tunnel but is
// no request's handle.
func TestExplainConnectAndPass(t *testing.T) {
	f, _ := newInterceptFixture(t)
	h := f.issue(t, "api.write", "inv-explain")
	g, err := f.b.Resolve(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	pass := f.issuePass(t)
	pg, err := f.b.Resolve(context.Background(), pass)
	if err != nil {
		t.Fatal(err)
	}
	plainOnly := newFixture(t, nil)
	for _, tt := range []struct {
		name     string
		s        *Server
		g        *broker.Grant
		url      string
		allowed  bool
		code     string
		contains string
	}{
		{"handle, https", f.proxy, g, f.httpsURL("/x"), true, "", "intercepted CONNECT"},
		{"handle, http", f.proxy, g, f.url("/x"), true, "", "plain"},
		{"handle, https, undeclared port", f.proxy, g, "https://api.example.com:8443/x", false, CodeDestination, "CONNECT host and port"},
		{"pass, https", f.proxy, pg, f.httpsURL("/x"), false, CodePassNotAHandle, "the pass declares"},
		{"pass, http", f.proxy, pg, f.url("/x"), false, CodePassNotAHandle, "plugin pass"},
		{"pass, https, undeclared host", f.proxy, pg, "https://other.example.net/x", false, CodeDestination, "not declared"},
		{"https without interception", plainOnly.proxy, g, f.httpsURL("/x"), false, CodeConnectNotAllowed, "not enabled"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ex := tt.s.Explain(context.Background(), tt.g, "GET", tt.url)
			var all []string
			for _, s := range ex.Steps {
				all = append(all, s.Check+": "+s.Detail)
			}
			text := strings.Join(all, "\n")
			if ex.Allowed != tt.allowed || ex.Code != tt.code || !strings.Contains(text, tt.contains) {
				t.Fatalf("allowed=%v code=%q, want %v %q with %q:\n%s", ex.Allowed, ex.Code, tt.allowed, tt.code, tt.contains, text)
			}
			if strings.Contains(text, "no longer configured") {
				t.Fatalf("misread as a missing intent:\n%s", text)
			}
		})
	}
}
