package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Rotating the intercept CA from the command line: status creates it,
// stage adds a next CA, promote makes it the signer; a promote with
// nothing staged says so.
func TestInterceptCACLI(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf("version: v1\nproxy:\n  intercept: {ca_file: %q, ca_key_file: %q}\n",
		filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")))
	run := func(want int, action string) string {
		t.Helper()
		out, stderr, code := cli(t, nil, "", "intercept-ca", action, "--config", cfg)
		if code != want {
			t.Fatalf("intercept-ca %s: exit %d, want %d\n%s%s", action, code, want, out, stderr)
		}
		if strings.Contains(out+stderr, "PRIVATE KEY") {
			t.Fatal("the CA key was printed")
		}
		return out + stderr
	}
	signer := regexp.MustCompile(`signer:\s+.*sha256 ([0-9a-f]{64})`)
	staged := regexp.MustCompile(`staged:\s+.*sha256 ([0-9a-f]{64})`)
	first := signer.FindStringSubmatch(run(0, "status"))
	if first == nil {
		t.Fatal("status printed no signer")
	}
	out := run(0, "stage")
	next := staged.FindStringSubmatch(out)
	if next == nil || signer.FindStringSubmatch(out)[1] != first[1] || strings.Count(out, "trusted:") != 2 {
		t.Fatalf("stage:\n%s", out)
	}
	if got := signer.FindStringSubmatch(run(0, "promote")); got == nil || got[1] != next[1] {
		t.Fatalf("after promote the signer is %v, want %s", got, next[1])
	}
	if out := run(1, "promote"); !strings.Contains(out, "no next CA is staged") {
		t.Fatalf("promote with nothing staged:\n%s", out)
	}
	run(2, "rotate")
}
