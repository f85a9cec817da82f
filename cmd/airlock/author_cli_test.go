package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What plugin authors tripped on: handle's help words, missing flags
// named, a missing broker socket explained, and plugins and invoke
// taking --config (host.control of the file) as the README says every
// command does.
func TestAuthorCLI(t *testing.T) {
	for _, h := range []string{"-h", "--help", "help"} {
		out, stderr, code := cli(t, nil, "", "handle", h)
		if code != 0 || !strings.Contains(out, "usage: airlock handle") || strings.Contains(stderr, "unknown subcommand") {
			t.Errorf("airlock handle %s: %d\n%s%s", h, code, out, stderr)
		}
	}
	_, stderr, code := cli(t, nil, "", "handle", "issue", "--plugin", "p")
	if code != 2 || !strings.Contains(stderr, "missing --invocation, --intent") {
		t.Errorf("issue without flags: %d\n%s", code, stderr)
	}
	missing := filepath.Join(t.TempDir(), "broker.sock")
	_, stderr, code = cli(t, nil, "", "handle", "inspect", "--broker", "unix:"+missing, "0123456789abcdef")
	if code != 1 || !strings.Contains(stderr, "no socket at "+missing) || strings.Contains(stderr, "rpc error") {
		t.Errorf("inspect with no broker socket: %d\n%s", code, stderr)
	}

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/plugins":
			fmt.Fprint(w, `{"plugins":[{"name":"mine","kind":"executa","state":"running","restarts":0,"health":"ok"}]}`)
		case "/v1/invocations":
			fmt.Fprintln(w, `{"event":"outcome","invocation_id":"i1","status":"STATUS_SUCCEEDED","result":{"ok":true}}`)
		}
	}))
	sock := filepath.Join(t.TempDir(), "control.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	tokenFile := filepath.Join(filepath.Dir(sock), "control.token")
	if err := os.WriteFile(tokenFile, []byte("a-control-token-for-the-test-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf("version: v1\nhost: {control: %q, control_token_file: %q}\n", "unix:"+sock, tokenFile))
	out, stderr, code := cli(t, []string{"AIRLOCK_CONTROL="}, "", "plugins", "--config", cfg)
	if code != 0 || !strings.Contains(out, "mine") {
		t.Errorf("plugins --config: %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = cli(t, []string{"AIRLOCK_CONTROL="}, "", "invoke", "--config", cfg, "mine", "tool")
	if code != 0 || !strings.Contains(out, "SUCCEEDED") {
		t.Errorf("invoke --config: %d\n%s%s", code, out, stderr)
	}
}
