package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/evidence"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
	"github.com/airlock-dev/airlock/host/policy"
)

// fixture is a host with a policy, a ledger and an evidence log, and its
// MCP server behind the control API's authentication.
type fixture struct {
	h      *host.Host
	ledger *broker.MemoryStore
	evPath string
	url    string
	tokens map[string]string
}

// newFixture builds the fixture; setup adds plugins before the server
// first lists the tools.
func newFixture(t *testing.T, policyYAML string, setup func(h *host.Host) error, principals ...string) *fixture {
	t.Helper()
	return newFixtureOpts(t, hostmcp.Options{}, policyYAML, setup, principals...)
}

// newFixtureOpts is newFixture with the MCP server's options.
func newFixtureOpts(t *testing.T, opts hostmcp.Options, policyYAML string, setup func(h *host.Host) error,
	principals ...string) *fixture {
	t.Helper()
	return newFixtureServe(t, opts, policyYAML, setup, func(h http.Handler) (string, map[string]string) {
		return serveMCP(t, h, principals...)
	})
}

// newFixtureServe is newFixtureOpts whose MCP handler is served by
// serve, which returns the endpoint and the principals' tokens.
func newFixtureServe(t *testing.T, opts hostmcp.Options, policyYAML string, setup func(h *host.Host) error,
	serve func(http.Handler) (string, map[string]string)) *fixture {
	t.Helper()
	pol, err := policy.Parse([]byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &fixture{ledger: broker.NewMemoryStore(1000, time.Hour, time.Hour, nil), evPath: filepath.Join(dir, "evidence.jsonl")}
	ev, err := evidence.Open(f.evPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	f.h = host.New(host.Options{Policy: pol, Evidence: ev, Ledger: f.ledger, QuarantineDir: filepath.Join(dir, "quarantine"),
		Decision: host.DecisionConfig{ApprovalPoll: 10 * time.Millisecond, WatchInterval: 10 * time.Millisecond},
		Restart:  host.RestartPolicy{Base: time.Hour, Max: time.Hour}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f.h.Shutdown(ctx)
	})
	if setup != nil {
		if err := setup(f.h); err != nil {
			t.Fatal(err)
		}
	}
	s := hostmcp.New(f.h, opts)
	t.Cleanup(func() { _ = s.Close() })
	f.url, f.tokens = serve(s.Handler())
	return f
}

const allowAll = "version: v1\nrules:\n  - name: all\n    effect: allow\n"

// The tools of a plugin are listed with the plugin's schema, annotations
// from the risk class, and the plugin's text marked untrusted; a call
// runs through the invoke path as the token's principal and is recorded.
func TestListAndCall(t *testing.T) {
	f := newFixture(t, allowAll, func(h *host.Host) error { return addStub(h, "stub") }, "agent")
	cs := connect(t, f.url, f.tokens["agent"], nil)
	ctx := context.Background()
	tool := waitTool(t, cs, nil, "stub__echo", true)
	if a := tool.Annotations; a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint {
		t.Fatalf("annotations of a read-risk tool: %+v", a)
	}
	if !strings.Contains(tool.Description, "does not trust") || !strings.Contains(tool.Description, "IGNORE ALL PREVIOUS") ||
		strings.Index(tool.Description, "does not trust") > strings.Index(tool.Description, "IGNORE ALL PREVIOUS") {
		t.Fatalf("the plugin's text is not introduced as untrusted: %q", tool.Description)
	}
	if tool.Meta[hostmcp.MetaPlugin] != "stub" || tool.Meta[hostmcp.MetaMethod] != "echo" || tool.Meta[hostmcp.MetaRisk] != "read" {
		t.Fatalf("meta: %v", tool.Meta)
	}
	schema, _ := json.Marshal(tool.InputSchema)
	if !strings.Contains(string(schema), `"say"`) {
		t.Fatalf("schema: %s", schema)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stub__echo", Arguments: map[string]any{"say": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if res.IsError || out["status"] != "STATUS_SUCCEEDED" || out["untrusted_source"] != "plugin stub" {
		t.Fatalf("result: %+v %v", res, out)
	}
	if r, _ := out["result"].(map[string]any); r["say"] != "hi" {
		t.Fatalf("the plugin's result: %v", out["result"])
	}
	rec := records(t, f.evPath, "invocation.start")
	if len(rec) != 1 || rec[0]["principal"] != "agent" {
		t.Fatalf("no evidence of the call naming its principal: %v", rec)
	}
}

// A call the policy denies is a tool error with Airlock's code, naming
// nothing the request carried.
func TestRefusal(t *testing.T) {
	f := newFixture(t, "version: v1\nrules:\n  - name: no-echo\n    effect: deny\n    methods: [echo]\n",
		func(h *host.Host) error { return addStub(h, "stub") }, "agent")
	cs := connect(t, f.url, f.tokens["agent"], nil)
	waitTool(t, cs, nil, "stub__echo", true)
	const marker = "REQUEST-VALUE-7f3a"
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "stub__echo", Arguments: map[string]any{"say": marker}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if !res.IsError || out["error"] != "policy_denied" || res.Meta[hostmcp.MetaRefusal] != "policy_denied" {
		t.Fatalf("refusal: %+v %v", res, out)
	}
	b, _ := json.Marshal(res)
	if strings.Contains(string(b), marker) {
		t.Fatalf("the refusal carries a value of the request: %s", b)
	}
}

const approvalPolicy = `version: v1
rules:
  - name: privileged-needs-a-second-person
    effect: require_approval
    risk_classes: [privileged]
    approvals: {count: 1, within: 1m}
  - name: rest
    effect: allow
`

// A call held for approval answers that it is pending (not an error),
// with a progress notification naming the approval; once another
// principal approves, the same call runs.
func TestApprovalPending(t *testing.T) {
	f := newFixture(t, approvalPolicy, func(h *host.Host) error {
		_, err := addStubRisk(h, "stub", policy.RiskPrivileged)
		return err
	}, "agent")
	progress := make(chan string, 8)
	cs := connect(t, f.url, f.tokens["agent"], &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress <- r.Params.Message
		}})
	tool := waitTool(t, cs, nil, "stub__echo", true)
	if a := tool.Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Fatalf("annotations of a privileged tool: %+v", a)
	}
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: "stub__echo", Arguments: map[string]any{"say": "rm"}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.StructuredContent.(map[string]any)
	id, _ := out["approval"].(string)
	if res.IsError || out["status"] != "pending_approval" || id == "" {
		t.Fatalf("held call: %+v %v", res, out)
	}
	select {
	case msg := <-progress:
		if !strings.Contains(msg, id) {
			t.Fatalf("progress %q names no approval %s", msg, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification for the held call")
	}
	if _, err := f.ledger.DecideApproval(ctx, id, "bob", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "stub__echo", Arguments: map[string]any{"say": "rm"}})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := res.StructuredContent.(map[string]any); res.IsError || out["status"] != "STATUS_SUCCEEDED" {
		t.Fatalf("approved call: %+v %v", res, out)
	}
}

// The tool list follows the host: a plugin added appears, one that
// fails or is quarantined disappears, a port installed adds methods, and
// every session is told.
func TestListChanged(t *testing.T) {
	f := newFixture(t, allowAll, nil, "agent")
	changed := make(chan struct{}, 64)
	cs := connect(t, f.url, f.tokens["agent"], &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	if res, err := cs.ListTools(context.Background(), nil); err != nil || len(res.Tools) != 0 {
		t.Fatalf("tools of an empty host: %v %v", res, err)
	}
	first, err := addStubRisk(f.h, "one", policy.RiskRead)
	if err != nil {
		t.Fatal(err)
	}
	waitTool(t, cs, changed, "one__echo", true)
	if err := addStub(f.h, "two"); err != nil {
		t.Fatal(err)
	}
	waitTool(t, cs, changed, "two__echo", true)
	first.crash() // its restart is an hour away
	waitTool(t, cs, changed, "one__echo", false)
	if err := f.h.Quarantine(context.Background(), "two", "inv_1", []string{"test"}); err != nil {
		t.Fatal(err)
	}
	waitTool(t, cs, changed, "two__echo", false)
	three, err := addStubRisk(f.h, "three", policy.RiskRead)
	if err != nil {
		t.Fatal(err)
	}
	waitTool(t, cs, changed, "three__echo", true)
	three.port.Store(true)
	f.h.PortsChanged()
	waitTool(t, cs, changed, "three__S.M", true)
}

// A schema the SDK refuses (it panics) leaves that tool off the list
// and the host serving the others.
func TestSchemaRefusedBySDK(t *testing.T) {
	f := newFixture(t, allowAll, func(h *host.Host) error {
		bad := `{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"X-A"}}}`
		if err := h.Add("bad", host.KindExecuta, func(context.Context) (host.Runtime, error) {
			return &stub{exited: make(chan struct{}), schema: bad}, nil
		}); err != nil {
			return err
		}
		return addStub(h, "good")
	}, "agent")
	cs := connect(t, f.url, f.tokens["agent"], nil)
	waitTool(t, cs, nil, "good__echo", true)
	waitTool(t, cs, nil, "bad__echo", false)
}

// A request the control API's authentication did not name a caller for
// is refused, a session is bound to the principal that opened it, and a
// body is bounded as the control API bounds one.
func TestAuthentication(t *testing.T) {
	f := newFixture(t, allowAll, nil, "agent", "other")
	resp := post(t, f.url, "", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	resp = post(t, f.url, f.tokens["agent"], "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",`+
		`"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, session)
	}
	resp = post(t, f.url, f.tokens["other"], session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another principal on the session: %d", resp.StatusCode)
	}
	big := `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", control.MaxBody) + `"}}`
	if resp = post(t, f.url, f.tokens["agent"], session, big); resp.StatusCode < 400 {
		t.Fatalf("a body over the control API's bound: %d", resp.StatusCode)
	}
}

// The handler served without the control API's authentication serves
// no one.
func TestHandlerNeedsAuthentication(t *testing.T) {
	h := host.New(host.Options{Policy: policy.AllowAll()})
	defer h.Shutdown(context.Background())
	s := hostmcp.New(h, hostmcp.Options{})
	defer s.Close()
	srv := newServer(t, s.Handler())
	resp := post(t, srv, "anything", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated handler: %d", resp.StatusCode)
	}
}

// waitTool waits until listing the tools shows name (present) or does
// not, re-listing at each list_changed notification (changed nil: lists
// once), and returns the tool.
func waitTool(t *testing.T, cs *mcp.ClientSession, changed <-chan struct{}, name string, present bool) *mcp.Tool {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(res.Tools, func(x *mcp.Tool) bool { return x.Name == name })
		if (i >= 0) == present {
			if i < 0 {
				return nil
			}
			return res.Tools[i]
		}
		if changed == nil {
			t.Fatalf("tool %s present=%v: listed %d tools", name, !present, len(res.Tools))
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no list_changed made tool %s present=%v", name, present)
		}
	}
}
