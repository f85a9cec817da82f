package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host/evidence"
)

func TestEvidenceVerifyCLI(t *testing.T) {
	p := filepath.Join(t.TempDir(), "evidence.jsonl")
	l, err := evidence.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"lifecycle.launch", "policy.decision", "credential.issued"} {
		if _, err := l.Append(evidence.Record{Type: typ, Plugin: "p"}); err != nil {
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

// What verify tells an auditor: the records no signature covers yet, and
// which records a saved head covers; an empty log fails with --jwks.
func TestEvidenceVerifyCLIReports(t *testing.T) {
	dir := t.TempDir()
	key, err := evidence.LoadKey(filepath.Join(dir, "evidence-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwks, key.JWKS(), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "evidence.jsonl")
	l, err := evidence.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	append3 := func() {
		for range 3 {
			if _, err := l.Append(evidence.Record{Type: "invocation.start", Plugin: "p"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	append3()
	out, stderr, code := cli(t, nil, "", "evidence", "verify", p)
	if code != 0 || !strings.Contains(out, "WARNING: 3 records (1-3) follow the last checkpoint") {
		t.Fatalf("no checkpoint yet: %d %s %s", code, out, stderr)
	}
	cp, err := l.Checkpoint(key)
	if err != nil {
		t.Fatal(err)
	}
	head := filepath.Join(dir, "head.json")
	b, _ := json.Marshal(cp)
	if err := os.WriteFile(head, b, 0o600); err != nil {
		t.Fatal(err)
	}
	append3()
	l.Close()
	out, stderr, code = cli(t, nil, "", "evidence", "verify", "--jwks", jwks, "--head", head, p)
	if code != 0 || !strings.Contains(out, "saved head: covers records 1-3 (head "+cp.Head) ||
		!strings.Contains(out, "holds it as record 4, and 3 records after it") ||
		!strings.Contains(out, "WARNING: 3 records (5-7) follow the last checkpoint") {
		t.Fatalf("saved head: %d %s %s", code, out, stderr)
	}
	// The verdict line itself says when the saved head was signed.
	if first, _, _ := strings.Cut(out, "\n"); !strings.Contains(first, "saved head signed "+cp.Time.UTC().Format(time.RFC3339)) {
		t.Fatalf("the verdict line does not show the saved head's signing time: %q", first)
	}

	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = cli(t, nil, "", "evidence", "verify", "--jwks", jwks, empty)
	if code != 1 || !strings.Contains(stderr, "the log is empty") {
		t.Fatalf("empty log with --jwks: %d %s", code, stderr)
	}
}

// A log with a torn tail (a write that failed part-way and was never cut
// back) fails verify as incomplete; `evidence repair` cuts it back and
// records the cut, and the log verifies again.
func TestEvidenceRepairCLI(t *testing.T) {
	p := filepath.Join(t.TempDir(), "evidence.jsonl")
	l, err := evidence.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := l.Append(evidence.Record{Type: "policy.decision", Plugin: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":3,"id":"ev-`)
	f.Close()
	_, stderr, code := cli(t, nil, "", "evidence", "verify", p)
	if code != 1 || !strings.Contains(stderr, "incomplete") {
		t.Fatalf("torn tail: %d %s", code, stderr)
	}
	out, stderr, code := cli(t, nil, "", "evidence", "repair", p)
	if code != 0 || !strings.Contains(out, "cut 18 bytes of failed writes (at the end); the log now ends with record 3, which records the cut (evidence.repair)") {
		t.Fatalf("repair: %d %s %s", code, out, stderr)
	}
	out, stderr, code = cli(t, nil, "", "evidence", "verify", p)
	if code != 0 || !strings.Contains(out, "OK: 3 records") {
		t.Fatalf("after repair: %d %s %s", code, out, stderr)
	}
	if out, _, code = cli(t, nil, "", "evidence", "repair", p); code != 0 || !strings.Contains(out, "nothing to repair") {
		t.Fatalf("second repair: %d %s", code, out)
	}
}

// A log rotated by renaming (as logrotate does) is verified as one
// chain across its files, in any order; a missing segment fails.
func TestEvidenceVerifyRotatedCLI(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "evidence.jsonl")
	l, err := evidence.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendOne := func() {
		if _, err := l.Append(evidence.Record{Type: "invocation.start", Plugin: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	appendOne()
	appendOne()
	for _, to := range []string{p + ".2", p + ".1"} {
		if err := os.Rename(p, to); err != nil {
			t.Fatal(err)
		}
		appendOne() // the rename is followed: a new segment, then this record
	}
	out, stderr, code := cli(t, nil, "", "evidence", "verify", p, p+".1", p+".2")
	if code != 0 || !strings.HasPrefix(out, "OK: 6 records (1-6) in 3 files") {
		t.Fatalf("three segments: %d %s %s", code, out, stderr)
	}
	out, stderr, code = cli(t, nil, "", "evidence", "verify", p)
	if code != 0 || !strings.HasPrefix(out, "OK: 2 records (5-6, a segment") {
		t.Fatalf("the latest segment alone: %d %s %s", code, out, stderr)
	}
	_, stderr, code = cli(t, nil, "", "evidence", "verify", p+".2", p)
	if code != 1 || !strings.Contains(stderr, "a segment is missing") {
		t.Fatalf("a missing segment: %d %s", code, stderr)
	}
}

// A host that finds its evidence log rotated and not yet followed (the
// rename happened while it was down, or it was killed right after)
// goes on with the same chain, across a SIGKILL before its first
// record, and the files verify as one log.
func TestHostRestartAfterRotationKeepsChain(t *testing.T) {
	dir := t.TempDir()
	evLog := filepath.Join(dir, "evidence.jsonl")
	l, err := evidence.Open(evLog)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Append(evidence.Record{Type: "invocation.start", Plugin: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	if err := os.Rename(evLog, evLog+".1"); err != nil {
		t.Fatal(err)
	}
	cfg, serveAdmin, _ := serveHostConfig(t, dir, fmt.Sprintf("  evidence: %q\n", evLog))
	startServeProcess(t, nil, cfg, serveAdmin)

	// Killed before its first record: the file it made is still empty.
	host, logs := startHostProcess(t, cfg)
	waitLog(t, logs, 0, "airlock host running")
	if !strings.Contains(logs.String(), "goes on from the rotated segment") || !strings.Contains(logs.String(), evLog+".1") {
		t.Fatalf("the host does not say it goes on from the rotated segment:\n%s", logs.String())
	}
	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()

	host, logs = startHostProcess(t, cfg)
	waitLog(t, logs, 0, "airlock host running")
	if err := host.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := host.Wait(); err != nil {
		t.Fatalf("host: %v\n%s", err, logs.String())
	}
	// Its last checkpoint follows the segment record that links the files.
	out, stderr, code := cli(t, nil, "", "evidence", "verify", evLog, evLog+".1")
	if code != 0 || !strings.HasPrefix(out, "OK: 5 records (1-5) in 2 files") {
		t.Fatalf("the rotated log across the restarts: %d %s %s", code, out, stderr)
	}
}
