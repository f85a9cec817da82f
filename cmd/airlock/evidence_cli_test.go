package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/host"
)

func TestEvidenceVerifyCLI(t *testing.T) {
	p := filepath.Join(t.TempDir(), "evidence.jsonl")
	l, err := host.OpenEvidenceLog(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"lifecycle.launch", "policy.decision", "credential.issued"} {
		if _, err := l.Append(host.Record{Type: typ, Plugin: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	head := l.Head()
	l.Close()
	out, stderr, code := cli(t, nil, "", "evidence", "verify", "--head", head, p)
	if code != 0 || !strings.Contains(out, "OK: 3 records") {
		t.Fatalf("intact: %d %s %s", code, out, stderr)
	}
	b, _ := os.ReadFile(p)
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(p, []byte(lines[0]+lines[2]), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = cli(t, nil, "", "evidence", "verify", p)
	if code != 1 || !strings.Contains(stderr, "line 2") {
		t.Fatalf("deleted record: %d %s", code, stderr)
	}
	if err := os.WriteFile(p, []byte(lines[0]+lines[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = cli(t, nil, "", "evidence", "verify", "--head", head, p)
	if code != 1 || !strings.Contains(stderr, "removed from the end") {
		t.Fatalf("truncated tail: %d %s", code, stderr)
	}
}
