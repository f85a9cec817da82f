package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/daemon"
	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/internal/tracing/tracingtest"
)

const traceSecret = "trace-e2e-secret-7f3a9c"

// One trace from a control-API call to the upstream, across airlock host
// and airlock serve as two processes exporting to one OTLP receiver: the
// control call, the invocation, its policy decision and credential
// issue (host), the broker API call over the socket and the proxy's
// request with its upstream exchange (serve), each a child of the one
// before it; the provider sent its request with the invocation's
// traceparent, which reached the upstream as sent. The evidence records
// of the invocation carry the trace id, and no span holds the secret, a
// handle or the control token.
func TestTraceAcrossHostAndServe(t *testing.T) {
	rcv := tracingtest.NewReceiver(t)
	ca := testenv.NewCA(t)
	upTraceparent := make(chan string, 4)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+traceSecret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		upTraceparent <- r.Header.Get("Traceparent")
		json.NewEncoder(w).Encode([]map[string]string{{"id": "T-1", "title": "traced"}})
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "tickets.demo.airlock.test")}}
	up.StartTLS()
	defer up.Close()
	_, upPort, _ := net.SplitHostPort(up.Listener.Addr().String())

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte("version: v1\ndefault: allow\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "secrets.yaml"), []byte("tickets: {token: "+traceSecret+"}\n"), 0o600)
	admin := testenv.FreeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
state_dir: %q
admin: {listen: %q}
tracing: {endpoint: %q}
broker:
  api: {socket: %q}
  secrets: {file: %q}
  intents:
    tickets.read:
      class: read
      secret: {source: file, path: tickets, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
    tickets.write:
      class: write
      secret: {source: file, path: tickets, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
proxy:
  listen: %q
  allow_cidrs: [127.0.0.0/8]
  upstream_ca_file: %q
  resolve: {tickets.demo.airlock.test: [127.0.0.1]}
host:
  admin: 127.0.0.1:0
  policy: %q
`, filepath.Join(dir, "state"), admin, rcv.URL(), filepath.Join(dir, "run", "broker.sock"), filepath.Join(dir, "secrets.yaml"),
		testenv.FreeAddr(t), ca.PEMFile, filepath.Join(dir, "policy.yaml")))
	startServeProcess(t, nil, cfg, admin)

	installProvider(t, cfg, upPort)
	_, hostLogs := startHostProcess(t, cfg)
	tokenFile := filepath.Join(dir, "state", "run", "control.token")
	ctl, base := daemon.ControlClient("unix:"+filepath.Join(dir, "state", "run", "control.sock"), daemon.ControlClientOptions{TokenFile: tokenFile})
	ctl.Timeout = time.Minute
	const trace, caller = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	var answer []byte
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		req, _ := http.NewRequest("POST", base+"/v1/invocations", strings.NewReader(
			`{"plugin":"example.tickets","method":"numinance.ports.tickets.v1.Tickets/ListTickets","input":{"project":"core"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", "00-"+trace+"-"+caller+"-01")
		resp, err := ctl.Do(req)
		if err == nil {
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				answer = b.Bytes()
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no invocation: %v\n%s", err, hostLogs.String())
		}
	}
	if !bytes.Contains(answer, []byte("STATUS_SUCCEEDED")) {
		t.Fatalf("invocation: %s\n%s", answer, hostLogs.String())
	}
	tp := <-upTraceparent
	if !strings.HasPrefix(tp, "00-"+trace+"-") {
		t.Fatalf("the upstream got traceparent %q, not one of the caller's trace", tp)
	}

	// The spans arrive in batches from both processes.
	want := []string{"airlock.control", "airlock.invocation", "airlock.policy", "airlock.credential.issue",
		"airlock.broker.IssueHandle", "airlock.proxy.request", "airlock.upstream.exchange"}
	byName := map[string]tracingtest.Span{}
	missing := func() bool {
		for _, n := range want {
			if _, ok := byName[n]; !ok {
				return true
			}
		}
		return false
	}
	// Each process exports in its own batches: wait for every name.
	for deadline := time.Now().Add(30 * time.Second); missing(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("spans of the trace: %v, want %v", keys(byName), want)
		}
		for _, s := range rcv.Spans() {
			if s.TraceID == trace && (s.Name != "airlock.control" || s.Attrs["airlock.control.resource"] == "/v1/invocations") {
				byName[s.Name] = s
			}
		}
	}
	parent := map[string]string{"airlock.control": "", "airlock.invocation": "airlock.control", "airlock.policy": "airlock.invocation",
		"airlock.credential.issue": "airlock.invocation", "airlock.broker.IssueHandle": "airlock.credential.issue",
		"airlock.proxy.request": "airlock.invocation", "airlock.upstream.exchange": "airlock.proxy.request"}
	for name, p := range parent {
		s := byName[name]
		wantParent := caller
		if p != "" {
			wantParent = byName[p].SpanID
		}
		if s.ParentSpanID != wantParent {
			t.Errorf("%s (%s) has parent %s, want %s's", name, s.Service, s.ParentSpanID, cmpOr(p, "the caller"))
		}
	}
	for name, svc := range map[string]string{"airlock.invocation": "airlock-host", "airlock.credential.issue": "airlock-host",
		"airlock.broker.IssueHandle": "airlock-serve", "airlock.proxy.request": "airlock-serve"} {
		if byName[name].Service != svc {
			t.Errorf("%s exported by %q, want %s", name, byName[name].Service, svc)
		}
	}
	inv := byName["airlock.invocation"].Attrs
	if inv["airlock.plugin"] != "example.tickets" || inv["airlock.status"] != "STATUS_SUCCEEDED" ||
		byName["airlock.credential.issue"].Attrs["airlock.handle_fp"] == "" || byName["airlock.policy"].Attrs["airlock.decision"] != "allow" {
		t.Errorf("attributes: invocation %v, credential %v, policy %v", inv, byName["airlock.credential.issue"].Attrs, byName["airlock.policy"].Attrs)
	}
	token, _ := os.ReadFile(tokenFile)
	for _, s := range rcv.Spans() {
		for _, v := range s.Strings() {
			if strings.Contains(v, traceSecret) || strings.Contains(v, "alh_") || strings.Contains(v, strings.TrimSpace(string(token))) {
				t.Errorf("span %s carries a secret, handle or token: %q", s.Name, v)
			}
		}
	}
	// The invocation's evidence records name the trace.
	ev, _ := os.ReadFile(filepath.Join(dir, "state", "evidence.jsonl"))
	var named int
	for _, line := range strings.Split(string(ev), "\n") {
		if (strings.Contains(line, `"type":"invocation.start"`) || strings.Contains(line, `"type":"invocation.outcome"`)) &&
			strings.Contains(line, `"trace_id":"`+trace+`"`) {
			named++
		}
	}
	if named != 2 {
		t.Errorf("%d invocation records name the trace, want 2:\n%s", named, ev)
	}
}

func keys(m map[string]tracingtest.Span) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
