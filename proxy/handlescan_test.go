package proxy

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

// A handle or pass anywhere in the outgoing request but where injection
// replaces it is refused with handle_in_request, in both modes, and the
// upstream sees nothing.
func TestHandleLeftInRequestRefused(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	other := f.issue(t, "api.read", "inv-other")
	pass := f.issuePass(t)
	for _, mode := range []string{"plain", "intercept"} {
		h := f.issue(t, "api.write", "inv-left-"+mode)
		c, u := f.client(h), f.url
		if mode == "intercept" {
			c, u = f.httpsClient(t, h, caFile), f.httpsURL
		}
		for _, tt := range []struct {
			name string
			path string
			hdr  http.Header
		}{
			{"X-Api-Key as the docs once said", "/echo", http.Header{"X-Api-Key": {h}}},
			{"inside a longer value", "/echo", http.Header{"X-Token": {"token=" + h + ";"}}},
			{"another handle", "/echo", http.Header{"X-Api-Key": {other}}},
			{"the plugin pass", "/echo", http.Header{"X-Api-Key": {"Bearer " + pass}}},
			{"Basic user name", "/echo", http.Header{"X-Auth": {"Basic " + base64.StdEncoding.EncodeToString([]byte(h+":x"))}}},
			{"header name", "/echo", http.Header{"X-" + h: {"1"}}},
			{"query", "/echo?key=" + h, nil},
			{"percent-encoded query", "/echo?key=%61" + h[1:], nil},
			{"path", "/echo/" + h, nil},
		} {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				n := f.up.count()
				status, code, body := do(t, c, http.MethodGet, u(tt.path), tt.hdr, "")
				if status != http.StatusForbidden || code != CodeHandleInRequest {
					t.Fatalf("%d %q %s", status, code, body)
				}
				if strings.Contains(body, h) || strings.Contains(body, other) || strings.Contains(body, pass) {
					t.Fatalf("the refusal quotes a handle: %s", body)
				}
				if f.up.count() != n {
					t.Fatal("the request reached the upstream")
				}
			})
		}
	}
	if strings.Contains(f.audit.String(), "alh_") {
		t.Fatalf("a handle in the audit log:\n%s", f.audit.String())
	}
	// Where injection replaces it, the handle is fine: the header the
	// intent injects, and a placeholder header.
	h := f.issue(t, "api.write", "inv-left-ok")
	if status, code, _ := do(t, f.client(h), http.MethodGet, f.url("/echo"), http.Header{"Authorization": {"Bearer " + h}}, ""); status != 200 {
		t.Fatalf("handle in the injected header: %d %q", status, code)
	}
	p := f.issue(t, "api.placeholder", "inv-left-placeholder")
	if status, code, _ := do(t, f.httpsClient(t, pass, caFile), http.MethodGet, f.httpsURL("/echo"), http.Header{"Authorization": {"Bearer " + p}}, ""); status != 200 {
		t.Fatalf("placeholder: %d %q", status, code)
	}
	if status, code, _ := do(t, f.httpsClient(t, pass, caFile), http.MethodGet, f.httpsURL("/echo"),
		http.Header{"Authorization": {"Bearer " + p}, "X-Copy": {p}}, ""); status != http.StatusForbidden || code != CodeHandleInRequest {
		t.Fatalf("placeholder with a second copy elsewhere: %d %q", status, code)
	}
}

// FuzzHandleLeft: containsHandleFold agrees with containsHandle on
// lower-cased input, and neither finds a handle in a string without the
// prefix.
func FuzzHandleLeft(f *testing.F) {
	f.Add("alh_0000000000000000000000000000000000000000000AAAAAA")
	f.Add("x ALH_0000000000000000000000000000000000000000000AAAAAA y")
	f.Add("alh_alh_0000000000000000000000000000000000000000000AAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		if containsHandle(s) && !containsHandleFold(s) {
			t.Fatalf("fold missed %q", s)
		}
		if containsHandleFold(s) != containsHandle(lowerPrefix(s)) {
			t.Fatalf("fold and exact disagree on %q", s)
		}
		if !strings.Contains(strings.ToLower(s), "alh_") && containsHandleFold(s) {
			t.Fatalf("a handle without its prefix in %q", s)
		}
	})
}

// lowerPrefix lower-cases every case variant of the handle prefix in s.
func lowerPrefix(s string) string {
	b := []byte(s)
	for i := 0; i+4 <= len(b); i++ {
		if strings.EqualFold(string(b[i:i+4]), "alh_") {
			copy(b[i:], "alh_")
		}
	}
	return string(b)
}
