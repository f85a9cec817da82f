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

// airlock dev, as make run starts it: each command its banner prints
// works as printed (the control API is a unix socket with a token; the
// commands find both), evidence verifies, and SIGINT stops it cleanly.
func TestDevEndToEnd(t *testing.T) {
	state := t.TempDir()
	cfg := writeConfig(t, "version: v1\nadmin: {listen: \""+testenv.FreeAddr(t)+"\"}\n")
	cmd := exec.Command(airlockBin, "dev", "--config", cfg, "--provider", providerBin, "--executa", executaBin)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state, "AIRLOCK_CONFIG=", "AIRLOCK_CONTROL=", "AIRLOCK_CONTROL_TOKEN_FILE=")
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
	if !strings.Contains(seen.String(), "control API      unix:"+filepath.Join(state, "airlock", "run", "control.sock")) {
		t.Fatalf("dev's control API is not the unix socket under the state directory:\n%s", seen.String())
	}
	// Run every command the banner printed, as a user would paste it.
	shell := func(line string) (string, int) {
		t.Helper()
		c := exec.Command("sh", "-c", line)
		c.Env = append(os.Environ(), "XDG_STATE_HOME="+state, "AIRLOCK_CONFIG=", "AIRLOCK_CONTROL=", "AIRLOCK_CONTROL_TOKEN_FILE=")
		b, err := c.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(b), code
	}
	commands := regexp.MustCompile(`(?m)^  (\S+ (?:invoke|plugins) .*?)(?:   \(.*\))?$`).FindAllStringSubmatch(seen.String(), -1)
	var executa int
	for _, c := range commands {
		res, code := shell(c[1])
		switch {
		case strings.Contains(c[1], " plugins"):
			if code != 0 || !strings.Contains(res, "example.tickets") {
				t.Fatalf("%s: exit %d\n%s", c[1], code, res)
			}
		case strings.Contains(c[1], "executa-tickets"):
			executa++
			if code != 0 || !strings.Contains(res, "SUCCEEDED") || !strings.Contains(res, "user/last_summary") || !strings.Contains(res, "airlock-dev-fixture") {
				t.Fatalf("%s: exit %d\n%s", c[1], code, res)
			}
		default:
			if code != 0 || !strings.Contains(res, "SUCCEEDED") || !strings.Contains(res, "DEMO-1") {
				t.Fatalf("%s: exit %d\n%s", c[1], code, res)
			}
		}
	}
	if len(commands) != 4 || executa != 2 {
		t.Fatalf("dev printed %d commands (%d Executa), want the provider's, http:// and https:// Executa, and plugins:\n%s",
			len(commands), executa, seen.String())
	}
	waitFor("carried the demo secret")
	waitFor("invocation.outcome")

	_, stderr, code := cli(t, []string{"XDG_STATE_HOME=" + state}, "", "invoke", "--config", cfg,
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
