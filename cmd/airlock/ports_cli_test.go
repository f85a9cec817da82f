package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/host/pluginv1"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// protocSet builds the notes example's descriptor set with the real
// protoc, as docs/plugin-v1.md does; extra flags change its bytes.
func protocSet(t *testing.T, extra ...string) string {
	t.Helper()
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		testenv.Missing(t, "protoc")
	}
	proto, _ := filepath.Abs("../../proto")
	out := filepath.Join(t.TempDir(), "notes.binpb")
	args := append([]string{"-I", ".", "-I", proto, "--include_imports", "--descriptor_set_out=" + out}, extra...)
	cmd := exec.Command(protoc, append(args, "numinance/ports/notes/v1/notes.proto")...)
	cmd.Dir = "../../examples/notes"
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	return out
}

// airlock ports: the review before install, the answer it waits for,
// list, show, check-config, a refused replacement, a tampered set, and
// remove — with no host running (the control API path is the daemon's
// test).
func TestPortsCLI(t *testing.T) {
	state := t.TempDir()
	cfg := writeConfig(t, "version: v1\nstate_dir: "+state+"\n")
	set := protocSet(t)
	if _, errOut, code := cli(t, nil, "", "ports", "-h"); code != 0 || !strings.Contains(errOut, "usage: airlock ports install") {
		t.Fatalf("ports -h: %d %s", code, errOut)
	}
	out, errOut, code := cli(t, nil, "n\n", "ports", "install", "--config", cfg, set)
	if code != 1 || !strings.Contains(out, "numinance.ports.notes.v1.Notes/CreateNote  WRITE  CALL  unsupported  WRITE        notes.created") ||
		!strings.Contains(errOut, "not installed") {
		t.Fatalf("install answered n: %d\n%s%s", code, out, errOut)
	}
	lock := filepath.Join(state, "plugins.lock.json")
	if lf, _ := pluginv1.ReadLockfile(lock); len(lf.Ports) != 0 {
		t.Fatal("a declined install installed the port")
	}
	if out, errOut, code := cli(t, nil, "", "ports", "install", "--config", cfg, set, "--yes"); code != 0 ||
		!strings.Contains(out, "installed port numinance.ports.notes.v1") {
		t.Fatalf("install --yes: %d\n%s%s", code, out, errOut)
	}
	other := protocSet(t, "--include_source_info") // the same port, other bytes
	if _, errOut, code := cli(t, nil, "", "ports", "install", "--config", cfg, "--yes", other); code != 1 ||
		!strings.Contains(errOut, "installed with another digest") {
		t.Fatalf("another digest: %d %s", code, errOut)
	}
	if out, errOut, code := cli(t, nil, "", "ports", "install", "--config", cfg, "--yes", "--replace", other); code != 0 ||
		!strings.Contains(out, "replaced port numinance.ports.notes.v1") {
		t.Fatalf("--replace: %d\n%s%s", code, out, errOut)
	}
	out, _, code = cli(t, nil, "", "ports", "list", "--config", cfg)
	if code != 0 || !strings.Contains(out, "numinance.ports.tickets.v1  compiled") || !regexp.MustCompile(`numinance\.ports\.notes\.v1 +installed +[0-9a-f]{16} .* ok`).MatchString(out) {
		t.Fatalf("list:\n%s", out)
	}
	if out, _, code := cli(t, nil, "", "ports", "show", "--config", cfg, "numinance.ports.notes.v1"); code != 0 || !strings.Contains(out, "Notes/ListNotes   READ") {
		t.Fatalf("show:\n%s", out)
	}
	if out, _, code := cli(t, nil, "", "check-config", cfg); code != 0 || !strings.Contains(out, "ports: numinance.ports.notes.v1 installed") {
		t.Fatalf("check-config:\n%s", out)
	}
	lf, _ := pluginv1.ReadLockfile(lock)
	stored := lf.Ports["numinance.ports.notes.v1"].File
	b, _ := os.ReadFile(stored)
	b[10] ^= 0x80
	os.WriteFile(stored, b, 0o600)
	if out, _, code := cli(t, nil, "", "ports", "list", "--config", cfg); code != 0 || !strings.Contains(out, "refused: port numinance.ports.notes.v1: the stored descriptor set does not have the digest the lockfile pins") {
		t.Fatalf("list of a tampered set:\n%s", out)
	}
	// A warning, not a failed check: the host starts and serves the rest.
	if out, _, code := cli(t, nil, "", "check-config", cfg); code != 0 || !strings.Contains(out, "ports: WARNING: port numinance.ports.notes.v1") {
		t.Fatalf("check-config with a tampered set: %d\n%s", code, out)
	}
	if _, errOut, code := cli(t, nil, "", "ports", "remove", "--config", cfg, "numinance.ports.tickets.v1"); code != 1 || !strings.Contains(errOut, "compiled into the host") {
		t.Fatalf("remove tickets: %d %s", code, errOut)
	}
	if out, errOut, code := cli(t, nil, "", "ports", "remove", "--config", cfg, "numinance.ports.notes.v1"); code != 0 || !strings.Contains(out, "removed port") {
		t.Fatalf("remove: %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(stored); !os.IsNotExist(err) {
		t.Fatalf("the removed port's set is still stored: %v", err)
	}
}
