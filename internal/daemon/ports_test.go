package daemon

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hostcontrol "github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/pluginv1"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/testenv"
)

const notesHost = "notes.airlock.test"

// buildSet runs the real protoc as docs/plugin-v1.md does: in dir, with
// the repository's proto directory for numinance/plugin/v1, every import
// included.
func buildSet(t *testing.T, dir, file string) string {
	t.Helper()
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		testenv.Missing(t, "protoc")
	}
	proto, _ := filepath.Abs("../../proto")
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(file), ".proto")+".binpb")
	cmd := exec.Command(protoc, "-I", ".", "-I", proto, "--include_imports", "--descriptor_set_out="+out, file)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	return out
}

// portsConfig is a host and serve on free ports whose notes intents
// carry a file secret to the upstream at upPort, and a policy that allows
// every call.
func portsConfig(t *testing.T, ca *testenv.CA, upPort string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", dir)
	secrets, policy := filepath.Join(dir, "secrets.yaml"), filepath.Join(dir, "policy.yaml")
	os.WriteFile(secrets, []byte("notes: {token: notes-secret-7}\n"), 0o600)
	os.WriteFile(policy, []byte("version: v1\ndefault: allow\n"), 0o600)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`version: v1
admin: {listen: %q}
broker:
  secrets: {file: %q}
  intents:
    notes.read: {class: read, secret: {source: file, path: notes, field: token}, inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}}
    notes.write: {class: write, secret: {source: file, path: notes, field: token}, inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}}
proxy:
  listen: %q
  allow_cidrs: [127.0.0.0/8]
  upstream_ca_file: %q
  resolve: {%s: [127.0.0.1]}
host: {admin: %q, policy: %q}
`, testenv.FreeAddr(t), secrets, testenv.FreeAddr(t), ca.PEMFile, notesHost, testenv.FreeAddr(t), policy)))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// notesUpstream is the notes API: it wants the secret, never a handle.
func notesUpstream(t *testing.T, ca *testenv.CA) string {
	t.Helper()
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer notes-secret-7" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			var in struct{ Folder, Text string }
			json.NewDecoder(r.Body).Decode(&in)
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]string{"id": "N-2", "text": in.Text})
			return
		}
		json.NewEncoder(w).Encode([]map[string]string{{"id": "N-1", "text": "in " + r.URL.Query().Get("folder")}})
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notesHost)}}
	up.StartTLS()
	t.Cleanup(up.Close)
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	return port
}

// notesPackage lays out an installable package of the notes provider
// (or another binary) with examples/notes/manifest.yaml pointed at the
// test upstream.
func notesPackage(t *testing.T, bin, name, upPort string) string {
	t.Helper()
	pkg := t.TempDir()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	mf, err := os.ReadFile("../../examples/notes/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := strings.NewReplacer("notes.example.com", notesHost, "port: 443", "port: "+upPort, "name: example.notes", "name: "+name).Replace(string(mf))
	os.WriteFile(filepath.Join(pkg, "provider"), b, 0o755)
	os.WriteFile(filepath.Join(pkg, "manifest.yaml"), []byte(m), 0o644)
	return pkg
}

// call is one control API request; it returns the status and the body.
func call(t *testing.T, cfg *config.Config, method, path string, body any) (int, []byte) {
	t.Helper()
	ctl, base := controlClient(cfg)
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ctl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func invokeNotes(t *testing.T, cfg *config.Config, plugin, method, input string, dryRun bool) (int, hostcontrol.Event, string) {
	t.Helper()
	code, b := call(t, cfg, http.MethodPost, "/v1/invocations", hostcontrol.InvocationRequest{Plugin: plugin,
		Method: "numinance.ports.notes.v1.Notes/" + method, Input: json.RawMessage(input), DryRun: dryRun, Timeout: "2m"})
	var ev hostcontrol.Event
	_ = json.Unmarshal(b, &ev)
	return code, ev, string(b)
}

// A new port (not tickets), built from its .proto by the real protoc and
// installed into a running host through the control API, serves calls
// from the provider the docs walk through; the host's copy of the port
// governs (a WRITE method refuses a dry run; a provider whose own copy
// calls it a READ with dry runs is refused). A stored set with a bit
// flipped is refused at the next start, while the other installed port
// serves.
func TestInstalledPortServesCalls(t *testing.T) {
	notesSet := buildSet(t, "../../examples/notes", "numinance/ports/notes/v1/notes.proto")
	memoSet := buildSet(t, "testdata/memo", "memo.proto")
	ca := testenv.NewCA(t)
	upPort := notesUpstream(t, ca)
	cfg := portsConfig(t, ca, upPort)
	startServeForHost(t, cfg)
	stop, err := runHost(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if stop != nil {
			stop()
		}
	}()

	// Before the port is installed, the plugin cannot be.
	pkg := notesPackage(t, notesBin, "example.notes", upPort)
	if code, b := call(t, cfg, http.MethodPost, "/v1/plugins", hostcontrol.InstallRequest{Dir: pkg}); code != http.StatusUnprocessableEntity ||
		!strings.Contains(string(b), "the host serves no port numinance.ports.notes.v1") {
		t.Fatalf("plugin install before its port: %d %s", code, b)
	}
	code, b := call(t, cfg, http.MethodPost, "/v1/ports", hostcontrol.PortInstallRequest{Path: notesSet})
	var port pluginv1.PortResult
	if code != http.StatusOK || json.Unmarshal(b, &port) != nil || port.Name != "numinance.ports.notes.v1" || len(port.Methods) != 2 ||
		port.Methods[1].RiskClass != "RISK_CLASS_WRITE" {
		t.Fatalf("port install: %d %s", code, b)
	}
	if code, b := call(t, cfg, http.MethodPost, "/v1/plugins", hostcontrol.InstallRequest{Dir: pkg}); code != http.StatusOK ||
		!strings.Contains(string(b), `"state":"running"`) {
		t.Fatalf("plugin install: %d %s", code, b)
	}
	if code, ev, raw := invokeNotes(t, cfg, "example.notes", "ListNotes", `{"folder":"inbox"}`, false); code != http.StatusOK ||
		ev.Status != "STATUS_SUCCEEDED" || !strings.Contains(string(ev.Result), `"text":"in inbox"`) {
		t.Fatalf("ListNotes: %d %s", code, raw)
	}
	if code, ev, raw := invokeNotes(t, cfg, "example.notes", "CreateNote", `{"folder":"inbox","text":"buy milk"}`, false); code != http.StatusOK ||
		ev.Status != "STATUS_SUCCEEDED" || !strings.Contains(string(ev.Result), `"id":"N-2"`) || len(ev.EvidenceIDs) != 1 {
		t.Fatalf("CreateNote: %d %s", code, raw)
	}
	// The host's copy says CreateNote supports no dry run: refused before
	// the provider sees it.
	if code, _, raw := invokeNotes(t, cfg, "example.notes", "CreateNote", `{"folder":"inbox","text":"x"}`, true); code != http.StatusBadRequest ||
		!strings.Contains(raw, "dry run") {
		t.Fatalf("CreateNote dry run: %d %s", code, raw)
	}
	if code, ev, raw := invokeNotes(t, cfg, "example.notes", "ListNotes", `{"folder":"inbox"}`, true); code != http.StatusOK || ev.Status != "STATUS_SUCCEEDED" {
		t.Fatalf("ListNotes dry run: %d %s", code, raw)
	}
	// A provider whose own copy calls CreateNote a READ with dry runs
	// changes nothing: it is refused, and the host's rule stands.
	if code, b := call(t, cfg, http.MethodPost, "/v1/plugins", hostcontrol.InstallRequest{Dir: notesPackage(t, liarBin, "example.notes-liar", upPort)}); code != http.StatusUnprocessableEntity ||
		!strings.Contains(string(b), "differs from the host's copy of its port") {
		t.Fatalf("liar install: %d %s", code, b)
	}
	if code, _, raw := invokeNotes(t, cfg, "example.notes", "CreateNote", `{"folder":"inbox","text":"x"}`, true); code != http.StatusBadRequest {
		t.Fatalf("CreateNote dry run after the liar: %d %s", code, raw)
	}
	// A second port, sent as base64.
	memo, _ := os.ReadFile(memoSet)
	if code, b := call(t, cfg, http.MethodPost, "/v1/ports", hostcontrol.PortInstallRequest{Set: base64.StdEncoding.EncodeToString(memo)}); code != http.StatusOK {
		t.Fatalf("memo install: %d %s", code, b)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	stop = nil

	// Flip one bit of the stored notes set: the next start refuses that
	// port, names why, and serves the others.
	lf, err := pluginv1.ReadLockfile(cfg.Host.Lockfile)
	if err != nil {
		t.Fatal(err)
	}
	stored := lf.Ports["numinance.ports.notes.v1"].File
	sb, _ := os.ReadFile(stored)
	sb[len(sb)/3] ^= 0x04
	os.WriteFile(stored, sb, 0o644)
	if stop, err = runHost(t, cfg); err != nil {
		t.Fatal(err)
	}
	code, b = call(t, cfg, http.MethodGet, "/v1/ports", nil)
	var list struct{ Ports []pluginv1.PortResult }
	if code != http.StatusOK || json.Unmarshal(b, &list) != nil {
		t.Fatalf("GET /v1/ports: %d %s", code, b)
	}
	got := map[string]pluginv1.PortResult{}
	for _, p := range list.Ports {
		got[p.Name] = p
	}
	if n := got["numinance.ports.notes.v1"]; !strings.Contains(n.Refused, "does not have the digest the lockfile pins") {
		t.Fatalf("tampered port: %+v", n)
	}
	if m := got["numinance.ports.memo.v1"]; m.Refused != "" || len(m.Methods) != 1 || m.Source != "installed" {
		t.Fatalf("intact port: %+v", m)
	}
	if tk := got["numinance.ports.tickets.v1"]; tk.Source != "compiled" || len(tk.Methods) != 2 {
		t.Fatalf("compiled port: %+v", tk)
	}
	// Each change, and the refusal, is host-authored evidence.
	ev, _ := os.ReadFile(cfg.Host.Evidence)
	for _, want := range []string{`"type":"lifecycle.port_installed"`, `"port":"numinance.ports.memo.v1"`, `"type":"lifecycle.port_refused"`} {
		if !strings.Contains(string(ev), want) {
			t.Fatalf("the evidence log has no %s", want)
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		code, _, raw := invokeNotes(t, cfg, "example.notes", "ListNotes", `{"folder":"inbox"}`, false)
		if code == http.StatusServiceUnavailable && strings.Contains(raw, "plugin_failed") && strings.Contains(raw, "the host serves no port") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a call to the refused port: %d %s", code, raw)
		}
	}
}
