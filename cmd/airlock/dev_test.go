package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// airlock dev, as make run starts it: a credentialed call end to end with
// airlock invoke, evidence that verifies, and a clean stop on SIGINT.
func TestDevEndToEnd(t *testing.T) {
	control := freeAddr(t)
	state := t.TempDir()
	cfg := writeConfig(t, "version: v1\nadmin: {listen: \""+freeAddr(t)+"\"}\n")
	cmd := exec.Command(airlockBin, "dev", "--config", cfg, "--provider", providerBin, "--executa", executaBin, "--control", control)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	stdout, _ := cmd.StdoutPipe()
	logs := &testenv.SyncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out <- sc.Text()
		}
		close(out)
	}()
	var seen strings.Builder
	waitFor := func(want string) {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			select {
			case line, ok := <-out:
				if !ok {
					t.Fatalf("airlock dev exited before %q:\n%s", want, seen.String())
				}
				seen.WriteString(line + "\n")
				if strings.Contains(line, want) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q in time:\n%s", want, seen.String())
			}
		}
	}
	waitFor("Ctrl-C stops everything")
	res, stderr, code := cli(t, []string{"AIRLOCK_CONTROL=http://" + control}, "", "invoke",
		"example.tickets", "numinance.ports.tickets.v1.Tickets/ListTickets", `{"project":"demo"}`)
	if code != 0 || !strings.Contains(res, "SUCCEEDED") || !strings.Contains(res, "DEMO-1") {
		t.Fatalf("invoke: %d\n%s\n%s", code, res, stderr)
	}
	waitFor("carried the demo secret")
	waitFor("invocation.outcome")

	// The sample Executa plugin, each command dev printed (http:// and
	// https://): a handle through the proxy, sampling, storage.
	inputs := regexp.MustCompile(`summarize '([^']*)'`).FindAllStringSubmatch(seen.String(), -1)
	if len(inputs) != 2 || !strings.Contains(inputs[0][1], `"http://`) || !strings.Contains(inputs[1][1], `"https://`) {
		t.Fatalf("dev printed %d Executa commands, want http:// and https://:\n%s", len(inputs), seen.String())
	}
	for _, in := range inputs {
		res, stderr, code = cli(t, []string{"AIRLOCK_CONTROL=http://" + control}, "", "invoke", "executa-tickets", "summarize", in[1])
		if code != 0 || !strings.Contains(res, "SUCCEEDED") || !strings.Contains(res, "user/last_summary") || !strings.Contains(res, "airlock-dev-fixture") {
			t.Fatalf("executa invoke %s: %d\n%s\n%s", in[1], code, res, stderr)
		}
	}
	_, stderr, code = cli(t, []string{"AIRLOCK_CONTROL=http://" + control}, "", "invoke",
		"example.tickets", "numinance.ports.tickets.v1.Tickets/Nope")
	if code != 1 || !strings.Contains(stderr, "method_not_dispatchable") {
		t.Fatalf("unknown method: %d %s", code, stderr)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	waitFor("airlock dev stopped")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, logs.String())
	}
	evidence := filepath.Join(state, "airlock", "dev", "evidence.jsonl")
	verify, stderr, code := cli(t, nil, "", "evidence", "verify", evidence)
	if code != 0 || !strings.Contains(verify, "OK") {
		t.Fatalf("evidence verify: %d %s %s", code, verify, stderr)
	}
	b, _ := os.ReadFile(evidence)
	if !strings.Contains(string(b), "credential.issued") || strings.Contains(string(b), "demo_") {
		t.Fatal("evidence lacks the credential record or holds the secret")
	}
}
