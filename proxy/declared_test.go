package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/broker"
)

// A destination_not_declared answer lists the refused handle's own
// destinations (its manifest's), for a request and for a CONNECT.
func TestDestinationDeniedListsDeclared(t *testing.T) {
	f, _ := newInterceptFixture(t)
	h := f.issue(t, "api.write", "inv-declared")
	want := []broker.Destination{{Host: "api.example.com", Port: f.up.port, PathPrefix: "/"}, {Host: "*.example.org", Port: f.up.port, PathPrefix: "/"}}
	decode := func(t *testing.T, body string) []broker.Destination {
		t.Helper()
		var got struct {
			Error    string
			Declared []broker.Destination
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil || got.Error != CodeDestination {
			t.Fatalf("%v: %s", err, body)
		}
		return got.Declared
	}
	same := func(a, b []broker.Destination) bool {
		return slices.EqualFunc(a, b, func(x, y broker.Destination) bool {
			return x.Host == y.Host && x.Port == y.Port && x.PathPrefix == y.PathPrefix && slices.Equal(x.Methods, y.Methods)
		})
	}
	status, _, body := do(t, f.client(h), http.MethodGet, "http://other.example.net:"+strconv.Itoa(f.up.port)+"/x", nil, "")
	if got := decode(t, body); status != http.StatusForbidden || !same(got, want) {
		t.Fatalf("%d: declared %+v, want %+v", status, got, want)
	}
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("CONNECT other.example.net:443 HTTP/1.1\r\nHost: other.example.net:443\r\nProxy-Authorization: Bearer " + h + "\r\n\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&sb)
	if got := decode(t, sb.String()); resp.StatusCode != http.StatusForbidden || !same(got, want) {
		t.Fatalf("CONNECT %d: declared %+v", resp.StatusCode, got)
	}
}

// explain --intent for an intent whose destinations come from the
// plugin's manifest (the binding declares none) checks what it can and
// says the manifest decides, instead of always denying; explain of a
// denied request lists what was declared.
func TestExplainManifestIntentAndDeclared(t *testing.T) {
	f, _ := newInterceptFixture(t)
	// As the broker builds it for --intent: the binding's destinations.
	asIntent := func(name string, class broker.Class) *broker.Grant {
		return &broker.Grant{PluginID: "(explain)", InvocationID: "(explain)", Intent: name, Class: class}
	}
	h := f.issue(t, "api.write", "inv-explain-declared")
	g, err := f.b.Resolve(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, method, url string
		g                 *broker.Grant
		allowed           bool
		code, contains    string
	}{
		{"manifest intent, http", "GET", f.url("/x"), asIntent("api.write", broker.ClassWrite), true, "", "plugin's manifest"},
		{"manifest intent, https", "POST", f.httpsURL("/x"), asIntent("api.write", broker.ClassWrite), true, "", "plugin's manifest"},
		{"manifest intent, read class", "POST", f.url("/x"), asIntent("api.read", broker.ClassRead), false, CodeMethodForIntent, "read-class"},
		{"handle, undeclared host", "GET", "http://other.example.net:" + strconv.Itoa(f.up.port) + "/x", g, false, CodeDestination,
			"which declares https://api.example.com:" + strconv.Itoa(f.up.port) + "/ (any method), https://*.example.org:"},
		{"handle, undeclared CONNECT", "GET", "https://other.example.net/x", g, false, CodeDestination, "it declares https://api.example.com:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ex := f.proxy.Explain(context.Background(), tt.g, tt.method, tt.url)
			var all []string
			for _, s := range ex.Steps {
				all = append(all, s.Check+": "+s.Detail)
			}
			text := strings.Join(all, "\n")
			if ex.Allowed != tt.allowed || ex.Code != tt.code || !strings.Contains(text, tt.contains) {
				t.Fatalf("allowed=%v code=%q, want %v %q with %q:\n%s", ex.Allowed, ex.Code, tt.allowed, tt.code, tt.contains, text)
			}
		})
	}
}
