package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/host"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// mcpPolicy allows the demo plugins' calls, but denies listing project
// "forbidden" and holds creating a ticket for a second person's approval.
const mcpPolicy = `version: v1
rules:
  - name: no-forbidden-project
    effect: deny
    methods: ["numinance.ports.tickets.v1.Tickets/ListTickets"]
    when: 'input.project == "forbidden"'
  - name: create-needs-approval
    effect: require_approval
    methods: ["numinance.ports.tickets.v1.Tickets/CreateTicket"]
    approvals: {count: 1, within: 10m}
  - name: rest
    effect: allow
`

// mcpDev runs airlock dev with the MCP endpoint on a TCP control API and
// principal "agent" of a token file; it returns the endpoint, the
// agent's token file and token, the demo upstream's base URL, and how
// to stop it.
func mcpDev(t *testing.T, mut ...func(*config.Config)) (endpoint, tokenFile, token, baseURL string, stop func()) {
	t.Helper()
	cfg := testConfig(t)
	for _, m := range mut {
		m(cfg)
	}
	dir := t.TempDir()
	cfg.Host.MCP.Enabled = true
	cfg.Host.Policy = filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(cfg.Host.Policy, []byte(mcpPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	token = peerauth.NewSecret()
	tokenFile = filepath.Join(dir, "agent.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A crashed plugin stays down (restarting) for the rest of the test.
	cfg.Host.Restart = host.RestartPolicy{Base: time.Hour, Max: time.Hour}
	cfg.Host.ControlPrincipals.Tokens = append(cfg.Host.ControlPrincipals.Tokens, config.ControlToken{Principal: "agent", File: tokenFile})
	control := testenv.FreeAddr(t)
	ready := make(chan Ready, 1)
	var out testenv.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Dev(ctx, cfg, DevOptions{Options: Options{Stdout: &out, OnReady: func(r Ready) { ready <- r }},
			Provider: providerBin, Executa: executaBin, Control: control})
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Dev: %v", err)
		}
	}
	t.Cleanup(stop)
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Dev: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("Dev not ready")
	}
	if !strings.Contains(out.String(), "MCP endpoint     http://"+control+hostmcp.Path) {
		t.Fatalf("the banner names no MCP endpoint:\n%s", out.String())
	}
	upstream := strings.SplitN(strings.SplitN(out.String(), "https://"+DemoHost+":", 2)[1], " ", 2)[0]
	return "http://" + control + hostmcp.Path, tokenFile, token, "http://" + DemoHost + ":" + upstream, stop
}

// The Go SDK's client and the official TypeScript SDK's client, as the
// principal of a token file, list and call the tools of both plugin
// kinds through the host's invoke path, and are refused by the policy
// and held for approval as a control API caller is; the TypeScript
// client hears of the held call by a progress notification, and of a
// plugin's crash by tools/list_changed.
func TestMCPClients(t *testing.T) {
	leaks := testenv.CheckGoroutines(t)
	endpoint, tokenFile, token, baseURL, stop := mcpDev(t)
	t.Run("go", func(t *testing.T) {
		hc, _ := ControlClient(strings.TrimSuffix(endpoint, hostmcp.Path), ControlClientOptions{TokenFile: tokenFile})
		defer hc.CloseIdleConnections()
		c := mcp.NewClient(&mcp.Implementation{Name: "airlock-test-go", Version: "1"}, nil)
		ctx := context.Background()
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]string{}
		for _, tool := range res.Tools {
			m, _ := tool.Meta[hostmcp.MetaMethod].(string)
			names[m] = tool.Name
		}
		call := func(method string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
			t.Helper()
			if names[method] == "" {
				t.Fatalf("no tool for %s among %v", method, names)
			}
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: names[method], Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			out, _ := r.StructuredContent.(map[string]any)
			return r, out
		}
		if r, out := call("numinance.ports.tickets.v1.Tickets/ListTickets", map[string]any{"project": "demo"}); r.IsError ||
			out["status"] != "STATUS_SUCCEEDED" || !strings.Contains(mustJSON(out["result"]), "DEMO-1") {
			t.Fatalf("plugin/v1 call: %v", out)
		}
		if r, out := call("summarize", map[string]any{"base_url": baseURL}); r.IsError || out["status"] != "STATUS_SUCCEEDED" {
			t.Fatalf("Executa call: %v", out)
		}
		if r, out := call("numinance.ports.tickets.v1.Tickets/ListTickets", map[string]any{"project": "forbidden"}); !r.IsError ||
			out["error"] != "policy_denied" {
			t.Fatalf("denied call: %v", out)
		}
		if r, out := call("numinance.ports.tickets.v1.Tickets/CreateTicket", map[string]any{"project": "demo", "title": "t"}); r.IsError ||
			out["status"] != "pending_approval" || out["approval"] == "" {
			t.Fatalf("held call: %v", out)
		}
	})
	t.Run("typescript", func(t *testing.T) {
		if _, err := exec.LookPath("node"); err != nil {
			t.Fatal("the TypeScript client needs node on PATH")
		}
		cmd := exec.Command("node", "testdata/mcp_client.cjs", endpoint)
		cmd.Env = append(os.Environ(), "AIRLOCK_TEST_MCP_MODULE="+testenv.NodeModule(t, "@modelcontextprotocol/sdk", "1.32.2"),
			"AIRLOCK_TEST_MCP_TOKEN="+token, "AIRLOCK_TEST_MCP_BASE_URL="+baseURL)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill() }() // a failed check leaves no client behind
		steps := map[string]tsStep{}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var s tsStep
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				t.Fatalf("client line %q: %v", sc.Text(), err)
			}
			steps[s.Step] = s
			if s.Step == "waiting" {
				crash(t, tokenFile, endpoint, DemoExecutaPlugin)
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("TypeScript client: %v\n%v\n%s", err, steps, stderr.String())
		}
		list := steps["list"].Tools
		i := slices.IndexFunc(list, func(x tsTool) bool { return x.Method == "numinance.ports.tickets.v1.Tickets/ListTickets" })
		if i < 0 || !list[i].ReadOnly || list[i].SchemaType != "object" || !slices.Contains(list[i].Untrusted, "description") ||
			!slices.ContainsFunc(list, func(x tsTool) bool { return x.Method == "summarize" }) {
			t.Fatalf("listed: %+v", list)
		}
		if s := steps["v1"]; s.IsError || s.Structured["status"] != "STATUS_SUCCEEDED" || !strings.Contains(mustJSON(s.Structured["result"]), "DEMO-1") {
			t.Fatalf("plugin/v1 call: %+v", s)
		}
		if s := steps["executa"]; s.IsError || s.Structured["status"] != "STATUS_SUCCEEDED" {
			t.Fatalf("Executa call: %+v", s)
		}
		if s := steps["refused"]; !s.IsError || s.Structured["error"] != "policy_denied" || s.Meta[hostmcp.MetaRefusal] != "policy_denied" {
			t.Fatalf("denied call: %+v", s)
		}
		s := steps["held"]
		id, _ := s.Structured["approval"].(string)
		if s.IsError || s.Structured["status"] != "pending_approval" || id == "" ||
			!slices.ContainsFunc(s.Progress, func(m string) bool { return strings.Contains(m, id) }) {
			t.Fatalf("held call: %+v", s)
		}
		// The crashed Executa plugin's tool left the list; the other
		// plugin's stayed.
		after := steps["list_changed"].Tools
		if slices.ContainsFunc(after, func(x tsTool) bool { return x.Method == "summarize" }) ||
			!slices.ContainsFunc(after, func(x tsTool) bool { return strings.HasSuffix(x.Method, "/ListTickets") }) {
			t.Fatalf("tools after the crash: %+v", after)
		}
	})
	stop()
	leaks()
}

// tsStep is a line mcp_client.cjs prints.
type tsStep struct {
	Step       string         `json:"step"`
	Tools      []tsTool       `json:"tools"`
	IsError    bool           `json:"isError"`
	Structured map[string]any `json:"structured"`
	Meta       map[string]any `json:"meta"`
	Progress   []string       `json:"progress"`
}

// crash kills plugin's process, as a crash would: found by its pid in
// the control API's plugin list.
func crash(t *testing.T, tokenFile, endpoint, plugin string) {
	t.Helper()
	c, base := ControlClient(strings.TrimSuffix(endpoint, hostmcp.Path), ControlClientOptions{TokenFile: tokenFile})
	defer c.CloseIdleConnections()
	resp, err := c.Get(base + "/v1/plugins")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Plugins []host.Status }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list.Plugins, func(s host.Status) bool { return s.Name == plugin })
	if i < 0 || list.Plugins[i].Pid == 0 {
		t.Fatalf("no running %s: %+v", plugin, list.Plugins)
	}
	if err := syscall.Kill(list.Plugins[i].Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

type tsTool struct {
	Name       string   `json:"name"`
	Method     string   `json:"method"`
	Untrusted  []string `json:"untrusted"`
	ReadOnly   bool     `json:"readOnly"`
	SchemaType string   `json:"schemaType"`
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
