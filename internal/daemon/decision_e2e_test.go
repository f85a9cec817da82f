package daemon

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hostcontrol "github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/testenv"
)

const (
	listTicketsMethod  = "numinance.ports.tickets.v1.Tickets/ListTickets"
	createTicketMethod = "numinance.ports.tickets.v1.Tickets/CreateTicket"
	e2eTicketsHost     = "tickets.demo.airlock.test"
)

// decisionPolicy: alice (a support agent) may act for users; CreateTicket
// in project OPS needs a second person's approval; alice and bob may call
// everything else.
const decisionPolicy = `version: v1
default: deny
actors:
  - principals: [alice]
    actors: ["user:*"]
rules:
  - name: ops-tickets-need-a-second-person
    effect: require_approval
    methods: ["` + createTicketMethod + `"]
    when: 'input.project == "OPS"'
    approvals: {count: 1, within: 5m}
  - name: support-team
    effect: allow
    when: 'principal.id in ["alice", "bob"]'
`

// replicaPair is one airlock serve and the airlock host beside it; the
// pairs share Redis (the handle store and the ledger).
type replicaPair struct {
	cfg     *config.Config
	control string
	tokens  map[string]string // principal -> token file
}

func (p *replicaPair) client(principal string) (*http.Client, string) {
	tok := p.cfg.Host.ControlTokenFile // the operator: the socket's peer, with the control token
	if principal != "" {
		tok = p.tokens[principal]
	}
	c, base := ControlClient(p.control, ControlClientOptions{TokenFile: tok})
	c.Timeout = 2 * time.Minute
	return c, base
}

func (p *replicaPair) do(t *testing.T, principal, method, path string, body any) (int, []byte) {
	t.Helper()
	c, base := p.client(principal)
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// invoke posts an invocation and returns its status and NDJSON events,
// sending each event to events as it arrives when events is not nil.
func (p *replicaPair) invoke(t *testing.T, principal string, req map[string]any, events chan<- hostcontrol.Event) (int, []hostcontrol.Event) {
	t.Helper()
	c, base := p.client(principal)
	b, _ := json.Marshal(req)
	resp, err := c.Post(base+"/v1/invocations", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		var e hostcontrol.Event
		_ = json.Unmarshal(body, &e)
		return resp.StatusCode, []hostcontrol.Event{e}
	}
	var out []hostcontrol.Event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var e hostcontrol.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Errorf("event line: %v", err)
			continue
		}
		out = append(out, e)
		if events != nil {
			events <- e
		}
	}
	return resp.StatusCode, out
}

func lastEvent(evs []hostcontrol.Event) hostcontrol.Event {
	if len(evs) == 0 {
		return hostcontrol.Event{}
	}
	return evs[len(evs)-1]
}

// e2eUpstream is the tickets API. A list of project SLOW answers only
// once its request is cancelled; started says it arrived.
func e2eUpstream(t *testing.T, ca *testenv.CA, started chan<- struct{}) string {
	t.Helper()
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer decision-secret-5" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]string{"id": "T-9", "title": "created"})
			return
		}
		if r.URL.Query().Get("project") == "SLOW" {
			started <- struct{}{}
			<-r.Context().Done()
			return
		}
		_ = json.NewEncoder(w).Encode([]map[string]string{{"id": "T-1", "title": "rotate the key"}})
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, e2eTicketsHost)}}
	up.StartTLS()
	t.Cleanup(up.Close)
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	return port
}

// startPair starts a serve and a host on their own state directory, on
// the shared Redis, with alice's and bob's token files.
func startPair(t *testing.T, name, redisAddr, upPort string, ca *testenv.CA, shared string) *replicaPair {
	t.Helper()
	state := t.TempDir()
	p := &replicaPair{tokens: map[string]string{}}
	for _, who := range []string{"alice", "bob"} {
		f := filepath.Join(shared, who+".token")
		if _, err := os.Stat(f); err != nil {
			tok := fmt.Sprintf("%s-token-%s-%032x", who, name, time.Now().UnixNano())
			if err := os.WriteFile(f, []byte(tok), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		p.tokens[who] = f
	}
	fixture := filepath.Join(state, "sampling.jsonl")
	os.WriteFile(fixture, []byte(`{"match":"","text":"one ticket","model":"fixture","inputTokens":10,"outputTokens":5}`+"\n"), 0o600)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`version: v1
state_dir: %q
admin: {listen: %q}
broker:
  secrets: {file: %q}
  store: {type: redis, redis: {address: %q}}
  intents:
    tickets.read: {class: read, region: eu, secret: {source: file, path: tickets, field: token}, inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}}
    tickets.write: {class: write, region: eu, secret: {source: file, path: tickets, field: token}, inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}}
    tickets.placeholder:
      class: read
      region: us
      secret: {source: file, path: tickets, field: token}
      inject: {placeholder: {headers: [Authorization]}}
      destinations: [{host: %s, port: %s, path_prefix: /api/, methods: [GET]}]
proxy:
  listen: %q
  allow_cidrs: [127.0.0.0/8]
  upstream_ca_file: %q
  resolve: {%s: [127.0.0.1]}
host:
  admin: %q
  policy: %q
  decision: {require_grant: true, approval_poll: 50ms, watch_interval: 50ms}
  control_principals:
    tokens: [{principal: alice, file: %q}, {principal: bob, file: %q}]
  executa:
    sampling: {fixture: %q}
    plugins:
      - {name: executa-tickets, command: %q, credentials: {TICKETS_API_KEY: tickets.placeholder}}
`, state, testenv.FreeAddr(t), filepath.Join(shared, "secrets.yaml"), redisAddr, e2eTicketsHost, upPort, testenv.FreeAddr(t), ca.PEMFile,
		e2eTicketsHost, testenv.FreeAddr(t), filepath.Join(shared, "policy.yaml"), p.tokens["alice"], p.tokens["bob"], fixture, executaBin)))
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	room := 2 * time.Minute
	cfg.Host.Executa.Timeouts.Initialize, cfg.Host.Executa.Timeouts.Describe, cfg.Host.Executa.Timeouts.Invoke = room, room, room
	pkg := providerPackage(t)
	mf, _ := os.ReadFile(filepath.Join(pkg, "manifest.yaml"))
	os.WriteFile(filepath.Join(pkg, "manifest.yaml"), []byte(strings.ReplaceAll(string(mf), "port: 443", "port: "+upPort)), 0o600)
	installProviderPkg(t, cfg, pkg)
	p.cfg = cfg
	p.control = startServeAndHost(t, cfg)
	return p
}

// evidenceOf is the data of each record of type typ in the pair's
// evidence log.
func evidenceOf(t *testing.T, p *replicaPair, typ string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(p.cfg.Host.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			Type, Invocation string
			Data             map[string]any
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Type == typ {
			if r.Data == nil {
				r.Data = map[string]any{}
			}
			r.Data["_invocation"] = r.Invocation
			out = append(out, r.Data)
		}
	}
	return out
}

// The decision point end to end, over both plugin kinds and two
// replicas (two serve+host pairs on one Redis): two principals, an actor,
// a grant issued on one replica and used on the other, an approval by a
// second principal, an exhausted budget, a residency refusal and a grant
// revoked mid-call — each refusal specific and recorded.
func TestDecisionPointEndToEnd(t *testing.T) {
	rd := testenv.Redis(t)
	ca := testenv.NewCA(t)
	started := make(chan struct{}, 1)
	upPort := e2eUpstream(t, ca, started)
	shared := t.TempDir()
	os.WriteFile(filepath.Join(shared, "secrets.yaml"), []byte("tickets: {token: decision-secret-5}\n"), 0o600)
	os.WriteFile(filepath.Join(shared, "policy.yaml"), []byte(decisionPolicy), 0o600)
	a := startPair(t, "a", rd.Addr, upPort, ca, shared)
	b := startPair(t, "b", rd.Addr, upPort, ca, shared)
	const provider = "example.tickets"
	list := func(project string) map[string]any {
		return map[string]any{"plugin": provider, "method": listTicketsMethod, "input": map[string]string{"project": project},
			"actor": map[string]string{"kind": "user", "id": "u-42"}, "run_id": "run-7"}
	}

	// An operator (the socket's peer) issues alice a grant on replica A:
	// four calls, EU only.
	code, body := a.do(t, "", http.MethodPost, "/v1/grants", map[string]any{"principal": "alice", "plugins": []string{"*"},
		"ttl": "1h", "budget": map[string]int{"calls": 4}, "residency": []string{"eu"}})
	var g1 struct{ ID string }
	if g1.ID = grantID(body); code != http.StatusCreated || g1.ID == "" {
		t.Fatalf("issue grant: %d %s", code, body)
	}
	// bob is no operator.
	if code, body := b.do(t, "bob", http.MethodPost, "/v1/grants", map[string]any{"principal": "bob", "plugins": []string{"*"},
		"ttl": "1h"}); code != http.StatusForbidden || !strings.Contains(string(body), "not_an_operator") {
		t.Fatalf("bob issued a grant: %d %s", code, body)
	}

	// 1. alice, acting for user u-42, lists tickets on A under the grant.
	if code, evs := a.invoke(t, "alice", list("SUP"), nil); code != http.StatusOK || lastEvent(evs).Status != "STATUS_SUCCEEDED" {
		t.Fatalf("alice's list: %d %+v", code, evs)
	}
	// 2. bob has no grant: refused on B before anything ran.
	if code, evs := b.invoke(t, "bob", map[string]any{"plugin": provider, "method": listTicketsMethod, "input": map[string]string{}}, nil); code != http.StatusForbidden || evs[0].Error != "grant_required" {
		t.Fatalf("bob without a grant: %d %+v", code, evs)
	}
	// bob may not act for a user (the policy lets only alice).
	if code, _ := b.invoke(t, "bob", list("SUP"), nil); code != http.StatusForbidden {
		t.Fatalf("bob stated an actor: %d", code)
	}
	// 3. The Executa tool on B, under the grant made on A: its credential's
	// intent lives in the US, the grant allows the EU only.
	code, evs := b.invoke(t, "alice", map[string]any{"plugin": "executa-tickets", "method": "summarize",
		"input": map[string]string{"base_url": "http://" + e2eTicketsHost + ":" + upPort}, "run_id": "run-7"}, nil)
	if out := lastEvent(evs); code != http.StatusOK || out.Status != "STATUS_FAILED" || !strings.Contains(out.Reason, "residency") {
		t.Fatalf("executa call outside its residency: %d %+v", code, evs)
	}
	// 4. A ticket in OPS needs a second person: alice's call on A waits,
	// she cannot approve it herself, bob approves it on B.
	events := make(chan hostcontrol.Event, 8)
	done := make(chan []hostcontrol.Event, 1)
	go func() {
		_, evs := a.invoke(t, "alice", map[string]any{"plugin": provider, "method": createTicketMethod,
			"input": map[string]string{"project": "OPS", "title": "restart the queue"}, "run_id": "run-7"}, events)
		done <- evs
	}()
	pending := <-events
	if pending.Event != "pending" || pending.Approval == "" || pending.Required != 1 {
		t.Fatalf("first event: %+v", pending)
	}
	if code, body := a.do(t, "alice", http.MethodPost, "/v1/approvals/"+pending.Approval+"/approve", map[string]any{}); code != http.StatusForbidden || !strings.Contains(string(body), "self_approval") {
		t.Fatalf("alice approved her own call: %d %s", code, body)
	}
	if code, body := b.do(t, "bob", http.MethodPost, "/v1/approvals/"+pending.Approval+"/approve", map[string]any{}); code != http.StatusOK {
		t.Fatalf("bob's approval: %d %s", code, body)
	}
	if out := lastEvent(<-done); out.Status != "STATUS_SUCCEEDED" {
		t.Fatalf("the approved call: %+v", out)
	}
	// 5. The fourth call under the grant, on B, is its last: the fifth is
	// refused, naming the grant's budget.
	if code, evs := b.invoke(t, "alice", list("SUP"), nil); code != http.StatusOK || lastEvent(evs).Status != "STATUS_SUCCEEDED" {
		t.Fatalf("fourth call: %d %+v", code, evs)
	}
	code, evs = b.invoke(t, "alice", list("SUP"), nil)
	if code != http.StatusTooManyRequests || evs[0].Error != "budget_exhausted" || evs[0].Budget != "grant:"+g1.ID || evs[0].Dimension != "calls" {
		t.Fatalf("fifth call: %d %+v", code, evs)
	}
	// 6. A grant revoked on B ends alice's call in flight on A.
	code, body = b.do(t, "", http.MethodPost, "/v1/grants", map[string]any{"principal": "alice", "plugins": []string{provider}, "ttl": "1h"})
	var g2 struct{ ID string }
	if g2.ID = grantID(body); g2.ID == "" {
		t.Fatalf("issue second grant: %d %s", code, body)
	}
	slow := make(chan []hostcontrol.Event, 1)
	go func() { _, evs := a.invoke(t, "alice", list("SLOW"), nil); slow <- evs }()
	<-started
	if code, body := b.do(t, "", http.MethodPost, "/v1/grants/"+g2.ID+"/revoke", map[string]any{}); code != http.StatusOK {
		t.Fatalf("revoke: %d %s", code, body)
	}
	if out := lastEvent(<-slow); out.Status != "STATUS_FAILED" || !strings.Contains(out.Reason, "revoked") {
		t.Fatalf("the call under the revoked grant: %+v", out)
	}

	// Every step is in the evidence: the decision with who asked, for
	// whom, in which run, under which grant and policy; the refusals.
	var dec map[string]any
	for _, d := range evidenceOf(t, a, "policy.decision") {
		if d["method"] == listTicketsMethod && d["grant_id"] == g1.ID {
			dec = d
			break
		}
	}
	if dec == nil || dec["principal"] != "alice" || dec["actor"] != "user:u-42" || dec["run_id"] != "run-7" ||
		!strings.HasPrefix(fmt.Sprint(dec["profile_digest"]), "sha256:") {
		t.Fatalf("policy.decision on A: %v", dec)
	}
	if n := len(evidenceOf(t, a, "approval.requested")); n != 1 {
		t.Fatalf("%d approval.requested records on A", n)
	}
	if n := len(evidenceOf(t, b, "approval.granted")); n != 1 {
		t.Fatalf("%d approval.granted records on B", n)
	}
	gates := evidenceOf(t, b, "gate.grant")
	if len(gates) == 0 || gates[0]["covered"] != false {
		t.Fatalf("gate.grant on B: %v", gates)
	}
	if bg := evidenceOf(t, b, "gate.budget"); len(bg) != 1 || bg[0]["budget"] != "grant:"+g1.ID {
		t.Fatalf("gate.budget on B: %v", bg)
	}
	var revoked bool
	for _, o := range evidenceOf(t, a, "invocation.outcome") {
		revoked = revoked || strings.Contains(fmt.Sprint(o["reason"]), "revoked") && o["grant_id"] == g2.ID
	}
	if !revoked {
		t.Fatal("no outcome on A records the call ended by the revoked grant")
	}
}

// grantID is the id in a POST /v1/grants answer.
func grantID(body []byte) string {
	var out struct {
		Grant struct{ ID string } `json:"grant"`
	}
	_ = json.Unmarshal(body, &out)
	return out.Grant.ID
}
