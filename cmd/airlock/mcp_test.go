package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// An agent that starts `airlock mcp` as its MCP server (the official
// TypeScript SDK's stdio client) reaches airlock dev's tools over the
// control API's unix socket, with the token the config names: it lists
// them, calls one, and is refused by the policy with Airlock's code.
func TestMCPStdio(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte("version: v1\nrules:\n  - name: no-forbidden\n    effect: deny\n"+
		"    when: 'input.project == \"forbidden\"'\n  - name: rest\n    effect: allow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "version: v1\nadmin: {listen: \""+testenv.FreeAddr(t)+"\"}\nhost:\n  policy: "+policy+"\n  mcp: {enabled: true}\n")
	env := append(os.Environ(), "XDG_STATE_HOME="+state, "AIRLOCK_CONFIG=", "AIRLOCK_CONTROL=", "AIRLOCK_CONTROL_TOKEN_FILE=")
	dev := exec.Command(airlockBin, "dev", "--config", cfg, "--provider", providerBin, "--executa", executaBin)
	dev.Env = env
	stdout, _ := dev.StdoutPipe()
	logs := &testenv.SyncBuffer{}
	dev.Stderr = logs
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = dev.Process.Signal(syscall.SIGINT)
		if err := dev.Wait(); err != nil {
			t.Errorf("airlock dev: %v\n%s", err, logs.String())
		}
	}()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "Ctrl-C stops everything") {
				ready <- true
				sent = true
			}
		}
		if !sent {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("airlock dev exited:\n%s", logs.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("airlock dev not ready:\n%s", logs.String())
	}
	command, _ := json.Marshal([]string{airlockBin, "mcp", "--config", cfg})
	node := exec.Command("node", "../../internal/daemon/testdata/mcp_client.cjs", "stdio")
	node.Env = append(env, "AIRLOCK_TEST_MCP_MODULE="+testenv.NodeModule(t, "@modelcontextprotocol/sdk", "1.32.2"),
		"AIRLOCK_TEST_MCP_COMMAND="+string(command), "AIRLOCK_TEST_MCP_STEPS=v1,refused")
	var stderr bytes.Buffer
	node.Stderr = &stderr
	b, err := node.Output()
	if err != nil {
		t.Fatalf("TypeScript client over airlock mcp: %v\n%s\n%s", err, b, stderr.String())
	}
	var got struct {
		list, v1, refused map[string]any
	}
	for line := range strings.Lines(string(b)) {
		var s map[string]any
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("client line %q: %v", line, err)
		}
		switch s["step"] {
		case "list":
			got.list = s
		case "v1":
			got.v1 = s
		case "refused":
			got.refused = s
		}
	}
	if tools, _ := got.list["tools"].([]any); len(tools) < 3 {
		t.Fatalf("listed over stdio: %v", got.list)
	}
	if st, _ := got.v1["structured"].(map[string]any); got.v1["isError"] != false || st["status"] != "STATUS_SUCCEEDED" {
		t.Fatalf("call over stdio: %v", got.v1)
	}
	if st, _ := got.refused["structured"].(map[string]any); got.refused["isError"] != true || st["error"] != "policy_denied" {
		t.Fatalf("refusal over stdio: %v", got.refused)
	}
}
