package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// The ops CLI against a running airlock serve: issue a handle, inspect it
// by fingerprint, explain requests (allowed, an undeclared path, a refused
// address, an intent), revoke it by fingerprint and by invocation.
func TestHandleAndExplainCLI(t *testing.T) {
	admin := testenv.FreeAddr(t)
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(secrets, []byte("demo/api: {token: demo-secret}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "run", "broker.sock")
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
admin: {listen: %q}
broker:
  api: {socket: %q}
  secrets: {file: %q}
  intents:
    demo.read:
      class: read
      secret: {source: file, path: demo/api, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
      destinations: ["https://api.demo.test/v1/", "https://internal.demo.test/"]
    demo.manifest:
      class: write
      secret: {source: file, path: demo/api, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
proxy:
  listen: %q
  resolve: {api.demo.test: [93.184.216.34], internal.demo.test: [10.1.2.3]}
`, admin, sock, secrets, testenv.FreeAddr(t)))
	startServe(t, nil, cfg, admin)
	run := func(wantCode int, args ...string) string {
		t.Helper()
		words := 1 // "explain"
		if args[0] == "handle" {
			words = 2 // "handle issue"
		}
		full := append(append(append([]string(nil), args[:words]...), "--config", cfg), args[words:]...)
		out, stderr, code := cli(t, nil, "", full...)
		if code != wantCode {
			t.Fatalf("airlock %v: exit %d, want %d\n%s%s", args, code, wantCode, out, stderr)
		}
		return out + stderr
	}
	out := run(0, "handle", "issue", "--plugin", "ops", "--invocation", "inv-ops", "--intent", "demo.read")
	handle := regexp.MustCompile(`handle:\s+(alh_\S+)`).FindStringSubmatch(out)
	fp := regexp.MustCompile(`fingerprint:\s+([0-9a-f]{16})`).FindStringSubmatch(out)
	if handle == nil || fp == nil {
		t.Fatalf("issue printed no handle or fingerprint:\n%s", out)
	}
	if out := run(0, "handle", "inspect", fp[1]); !strings.Contains(out, "state:        live") ||
		!strings.Contains(out, "plugin:       ops") || !strings.Contains(out, "https://api.demo.test:443/v1/") ||
		strings.Contains(out, handle[1]) || strings.Contains(out, "demo-secret") {
		t.Fatalf("inspect:\n%s", out)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--handle-fp", fp[1], "GET", "http://api.demo.test/v1/items"}, 0, "allowed"},
		{[]string{"--handle-fp", fp[1], "GET", "http://api.demo.test/admin"}, 1, "denied: destination_not_declared"},
		{[]string{"--handle-fp", fp[1], "POST", "http://api.demo.test/v1/items"}, 1, "denied: method_not_allowed_for_intent"},
		{[]string{"--handle-fp", fp[1], "GET", "http://internal.demo.test/x"}, 1, "10.0.0.0/8"},
		{[]string{"--intent", "demo.read", "GET", "http://other.demo.test/v1/"}, 1, "denied: destination_not_declared"},
		{[]string{"--intent", "demo.read", "GET", "http://other.demo.test/v1/"}, 1, "https://api.demo.test:443/v1/ (any method)"},
		// Destinations from the plugin's manifest: the binding allows it.
		{[]string{"--intent", "demo.manifest", "POST", "http://api.demo.test/v2/x"}, 0, "plugin's manifest"},
	} {
		if out := run(tt.code, append([]string{"explain"}, tt.args...)...); !strings.Contains(out, tt.want) {
			t.Errorf("explain %v:\n%s", tt.args, out)
		}
	}
	if out := run(0, "handle", "revoke", fp[1]); !strings.Contains(out, "revoked 1 live handle") {
		t.Fatalf("revoke by fingerprint:\n%s", out)
	}
	if out := run(0, "handle", "inspect", fp[1]); !strings.Contains(out, "state:        revoked") {
		t.Fatalf("inspect after revoke:\n%s", out)
	}
	if out := run(1, "explain", "--handle-fp", fp[1], "GET", "http://api.demo.test/v1/items"); !strings.Contains(out, "denied: handle_invalid") {
		t.Fatalf("explain a revoked handle:\n%s", out)
	}
	run(0, "handle", "issue", "--plugin", "ops", "--invocation", "inv-2", "--intent", "demo.read")
	if out := run(0, "handle", "revoke", "--invocation", "inv-2"); !strings.Contains(out, "revoked 1 live handle") {
		t.Fatalf("revoke by invocation:\n%s", out)
	}
	if out := run(1, "handle", "inspect", "0123456789abcdef"); !strings.Contains(out, "handle_unknown") {
		t.Fatalf("unknown fingerprint:\n%s", out)
	}
	run(1, "handle", "inspect", "not-a-fingerprint")
}
