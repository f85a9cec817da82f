package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// airlock policy test passes the committed example suite, and fails
// (exit 1, the case named FAIL) when a case does not hold.
func TestPolicyTestCLI(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "policy")
	out, errOut, code := cli(t, nil, "", "policy", "test", example)
	if code != 0 || strings.Contains(out, "FAIL") || !strings.Contains(out, "PASS: ") {
		t.Fatalf("example suite: exit %d\n%s%s", code, out, errOut)
	}

	// The same suite with one expectation turned round fails.
	dir := t.TempDir()
	for _, name := range []string{"policy.yaml", "tickets_test.yaml"} {
		b, err := os.ReadFile(filepath.Join(example, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "tickets_test.yaml" {
			b = []byte(strings.Replace(string(b), "expect: {effect: deny, rule: no-anonymous-writes}", "expect: {effect: allow}", 1))
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code = cli(t, nil, "", "policy", "test", dir)
	if code != 1 || !strings.Contains(out, "the agent without an actor is denied: FAIL (got deny by no-anonymous-writes, want allow)") ||
		!strings.Contains(out, "FAIL: 1/") {
		t.Fatalf("a failing case: exit %d\n%s%s", code, out, errOut)
	}

	// A malformed case is an error naming it; nothing is reported as run.
	if err := os.WriteFile(filepath.Join(dir, "bad_test.yaml"), []byte("cases: [{name: x, expect: {effect: maybe}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = cli(t, nil, "", "policy", "test", dir)
	if code != 1 || !strings.Contains(errOut, "bad_test.yaml: cases[0] (x): malformed test case: expect.effect") || out != "" {
		t.Fatalf("a malformed case: exit %d\n%s%s", code, out, errOut)
	}

	if _, _, code := cli(t, nil, "", "policy", "test"); code != 2 {
		t.Fatalf("no DIR: exit %d, want 2", code)
	}
	if _, _, code := cli(t, nil, "", "policy", "frobnicate"); code != 2 {
		t.Fatalf("unknown subcommand: exit %d, want 2", code)
	}
}

// airlock policy check prints the digest of a policy that loads and
// names the rule of one that does not.
func TestPolicyCheckCLI(t *testing.T) {
	out, errOut, code := cli(t, nil, "", "policy", "check", filepath.Join("..", "..", "examples", "policy", "policy.yaml"))
	if code != 0 || !strings.HasPrefix(out, "OK sha256:") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	bad := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(bad, []byte("version: v1\nrules: [{name: r, effect: allow, when: 'risk > 2'}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = cli(t, nil, "", "policy", "check", bad)
	if code != 1 || !strings.Contains(errOut, "policy.rules[0] (r).when") || !strings.Contains(errOut, "no matching overload") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}
