package pluginv1

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/testenv"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

const listTickets = "numinance.ports.tickets.v1.Tickets/ListTickets"

// A plugin of each kind that cannot start sits next to a healthy one of
// each kind: the healthy ones serve, the broken ones are marked failed
// with a reason that names no plugin-supplied value.
func TestFailingPluginIsolated(t *testing.T) {
	t.Parallel() // launches plugins: waits more than it computes
	f := newHostFixture(t)
	h := newTestHost(t, f, nil)
	if err := AddProvider(h, f.inst); err != nil {
		t.Fatal(err)
	}
	broken := f.install(t, badBin, "manifest-differs")
	broken.Name = "broken.v1"
	if err := AddProvider(h, broken); !errors.Is(err, ErrManifestMismatch) {
		t.Fatalf("broken provider: %v", err)
	}
	if err := executa.Add(h, pyPlugin(t, "py-good"), roomy(executa.Options{})); err != nil {
		t.Fatal(err)
	}
	if err := executa.Add(h, pyPlugin(t, "py-broken", "bad-capability"), roomy(executa.Options{})); !errors.Is(err, host.ErrManifestInvalid) {
		t.Fatalf("broken executa plugin: %v", err)
	}

	if out, err := invokeList(h, f.inst.Name); err != nil || out.Status != host.CallSucceeded {
		t.Fatalf("healthy provider: %+v %v", out, err)
	}
	if out, err := invokeTool(h, "py-good", "context"); err != nil || out.Status != host.CallSucceeded {
		t.Fatalf("healthy executa plugin: %+v %v", out, err)
	}
	for _, name := range []string{"broken.v1", "py-broken"} {
		if _, err := invokeTool(h, name, "context"); !errors.Is(err, host.ErrPluginFailed) {
			t.Fatalf("%s: %v", name, err)
		}
	}

	srv := httptest.NewServer(control.NewHandler(h))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/plugins")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Plugins []host.Status }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		kind   host.Kind
		state  host.State
		reason string
	}{
		"example.tickets": {host.KindPluginV1, host.StateRunning, ""},
		"broken.v1":       {host.KindPluginV1, host.StateFailed, "provider manifest differs"},
		"py-good":         {host.KindExecuta, host.StateRunning, ""},
		"py-broken":       {host.KindExecuta, host.StateFailed, "host_capabilities[0]"},
	}
	if len(list.Plugins) != len(want) {
		t.Fatalf("plugins: %+v", list.Plugins)
	}
	for _, p := range list.Plugins {
		w := want[p.Name]
		if p.Kind != w.kind || p.State != w.state || !strings.Contains(p.LastFailure, w.reason) {
			t.Errorf("%s: %+v, want %+v", p.Name, p, w)
		}
		if p.State == host.StateRunning && (p.Protocol == "" || p.Pid == 0 || p.Health != "ok") {
			t.Errorf("%s: running without protocol, pid or health: %+v", p.Name, p)
		}
	}
	if d := h.Degraded(); len(d) != 2 {
		t.Fatalf("degraded: %v", d)
	}
}

// A plugin's children die with it when it crashes and when it is shut
// down, for both kinds; the crash is recorded and the plugin restarted.
func TestChildrenDieWithPlugin(t *testing.T) {
	t.Parallel() // launches plugins: waits more than it computes
	f := newHostFixture(t)
	h := newTestHost(t, f, nil)
	inst := f.install(t, badBin, "spawn-child")
	if err := AddProvider(h, inst); err != nil {
		t.Fatal(err)
	}
	if err := executa.Add(h, pyPlugin(t, "py", "spawn-child"), roomy(executa.Options{})); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{inst.Name, "py"} {
		waitState(t, h, name, "running", func(s host.Status) bool { return s.State == host.StateRunning })
		leader := statusOf(h, name).Pid
		child := testenv.Descendant(t, leader, "sleep")
		killPid(t, leader)
		waitDead(t, child, name+"'s child after a crash")
		s := waitState(t, h, name, "restarted", func(s host.Status) bool { return s.State == host.StateRunning && s.Pid != leader })
		if s.Restarts != 1 || !strings.Contains(s.LastFailure, "signal: killed") {
			t.Fatalf("%s after the crash: %+v", name, s)
		}
	}
	var children []int
	for _, name := range []string{inst.Name, "py"} {
		s := waitState(t, h, name, "running", func(s host.Status) bool { return s.State == host.StateRunning })
		children = append(children, testenv.Descendant(t, s.Pid, "sleep"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h.Shutdown(ctx)
	for _, c := range children {
		waitDead(t, c, "a child after Shutdown")
	}
	b, _ := os.ReadFile(f.evidence)
	if n := strings.Count(string(b), `"type":"lifecycle.crash"`); n != 2 {
		t.Fatalf("%d lifecycle.crash records, want one per kind", n)
	}
}

// probeClock is the host's clock of healthy uptime, advanced by the test.
// After the plugin is running, the supervisor reads it only when a
// health probe passes: the first read after an advance is that probe.
type probeClock struct {
	*testenv.Clock
	mu   sync.Mutex
	read chan struct{} // closed at the next read
}

func (c *probeClock) Now() time.Time {
	c.mu.Lock()
	read := c.read
	c.read = nil
	c.mu.Unlock()
	if read != nil {
		defer close(read)
	}
	return c.Clock.Now()
}

// advance moves the clock by d; the channel closes when a probe has
// passed at the new time.
func (c *probeClock) advance(d time.Duration) <-chan struct{} {
	c.Advance(d)
	read := make(chan struct{})
	c.mu.Lock()
	c.read = read
	c.mu.Unlock()
	return read
}

// The restart budget counts consecutive failures: crashes spaced by more
// than ResetAfter of healthy uptime never exhaust it; quick ones do.
func TestRestartBudgetResets(t *testing.T) {
	t.Parallel() // launches plugins: waits more than it computes
	f := newHostFixture(t)
	clock := &probeClock{Clock: testenv.NewClock()}
	h := newTestHost(t, f, func(o *host.Options) {
		o.Restart = host.RestartPolicy{Base: 20 * time.Millisecond, Max: 50 * time.Millisecond, Budget: 2, ResetAfter: 1500 * time.Millisecond}
		o.HealthInterval = 100 * time.Millisecond // healthy uptime is uptime up to a passed probe
		o.Now = clock.Now
	})
	if err := AddProvider(h, f.inst); err != nil {
		t.Fatal(err)
	}
	crash := func() {
		t.Helper()
		pid := statusOf(h, f.inst.Name).Pid
		killPid(t, pid)
		waitState(t, h, f.inst.Name, "noticed the crash", func(s host.Status) bool { return s.Pid != pid })
	}
	for i := 0; i < 4; i++ {
		waitState(t, h, f.inst.Name, "running", func(s host.Status) bool { return s.State == host.StateRunning })
		<-clock.advance(1700 * time.Millisecond) // healthy uptime past ResetAfter
		crash()
	}
	s := waitState(t, h, f.inst.Name, "running again", func(s host.Status) bool { return s.State == host.StateRunning })
	if s.Restarts != 4 {
		t.Fatalf("after spaced crashes: %+v", s)
	}
	// Two quick crashes after the reset: failures 2 and 3 of a budget of 2.
	for i := 0; i < 2; i++ {
		waitState(t, h, f.inst.Name, "running", func(s host.Status) bool { return s.State == host.StateRunning })
		crash()
	}
	s = waitState(t, h, f.inst.Name, "failed", func(s host.Status) bool { return s.State == host.StateFailed })
	if !strings.Contains(s.LastFailure, "restart budget of 2 exhausted") || s.Health != "unknown" {
		t.Fatalf("after quick crashes (a failed plugin has no health to show): %+v", s)
	}
}

// A plugin whose every launch fails counts each relaunch as a restart
// (four failed launches under a budget of three: three restarts), and,
// never having run, shows no health.
func TestFailedLaunchesAreRestarts(t *testing.T) {
	f := newHostFixture(t)
	h := newTestHost(t, f, nil)
	inst := f.install(t, badBin, "exit-silently")
	if err := AddProvider(h, inst); !errors.Is(err, ErrHandshake) {
		t.Fatalf("first launch: %v", err)
	}
	s := waitState(t, h, inst.Name, "failed", func(s host.Status) bool { return s.State == host.StateFailed })
	if s.Restarts != 3 || s.Health != "unknown" || !strings.Contains(s.LastFailure, "restart budget of 3 exhausted") {
		t.Fatalf("after four failed launches: %+v", s)
	}
}

// A failed health probe restarts the plugin, with the reason recorded.
func TestHealthProbeFailureRestarts(t *testing.T) {
	f := newHostFixture(t)
	h := newTestHost(t, f, func(o *host.Options) { o.HealthInterval = 100 * time.Millisecond })
	inst := f.install(t, badBin, "health-error")
	if err := AddProvider(h, inst); err != nil {
		t.Fatal(err)
	}
	s := waitState(t, h, inst.Name, "restarted", func(s host.Status) bool { return s.Restarts >= 1 })
	if !strings.Contains(s.LastFailure, host.ErrProbeFailed.Error()) {
		t.Fatalf("status: %+v", s)
	}
	b, _ := os.ReadFile(f.evidence)
	if !strings.Contains(string(b), `"reason":"health probe failed"`) {
		t.Fatal("no lifecycle.crash record naming the failed probe")
	}
}

// Calls in a restart window are refused at once with plugin_restarting
// and a Retry-After; nothing is sent to a dead connection.
func TestCallsDuringRestartWindow(t *testing.T) {
	t.Parallel() // launches plugins: waits more than it computes
	f := newHostFixture(t)
	h := newTestHost(t, f, func(o *host.Options) {
		o.Restart = host.RestartPolicy{Base: 3 * time.Second, Max: 3 * time.Second, Budget: 3, ResetAfter: time.Hour}
	})
	if err := AddProvider(h, f.inst); err != nil {
		t.Fatal(err)
	}
	killPid(t, statusOf(h, f.inst.Name).Pid)
	waitState(t, h, f.inst.Name, "restarting", func(s host.Status) bool { return s.State == host.StateRestarting })
	var re *host.RestartingError
	if _, err := invokeList(h, f.inst.Name); !errors.As(err, &re) || re.RetryAfter <= 0 {
		t.Fatalf("call in the restart window: %v", err)
	}
	// The control API runs a call only for a caller its authentication
	// named (control.Authenticate in the daemon).
	ctl := control.NewHandler(h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctl.ServeHTTP(w, r.WithContext(control.WithCaller(r.Context(), host.Principal{ID: "operator", Method: control.MethodToken})))
	}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/invocations", "application/json",
		strings.NewReader(`{"plugin":"example.tickets","method":"`+listTickets+`","input":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusServiceUnavailable || body["error"] != "plugin_restarting" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("control API: %d %v Retry-After=%q", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	waitState(t, h, f.inst.Name, "running again", func(s host.Status) bool { return s.State == host.StateRunning })
	if out, err := invokeList(h, f.inst.Name); err != nil || out.Status != host.CallSucceeded {
		t.Fatalf("after the restart: %+v %v", out, err)
	}
}

// An Executa call goes through the same path as a plugin/v1 one: policy
// decision, start, credential issued, outcome; a policy denial is a
// refusal, recorded; a tool the plugin fails is a FAILED outcome.
func TestExecutaCallPolicyAndEvidence(t *testing.T) {
	f := newHostFixture(t)
	h := newTestHost(t, f, nil)
	if err := executa.Add(h, pyPlugin(t, "py"), roomy(executa.Options{})); err != nil {
		t.Fatal(err)
	}
	out, err := invokeTool(h, "py", "handle")
	if err != nil || out.Status != host.CallSucceeded {
		t.Fatalf("invoke: %+v %v", out, err)
	}
	b, _ := os.ReadFile(f.evidence)
	for _, want := range []string{"policy.decision", "invocation.start", "credential.issued", "invocation.outcome"} {
		if !strings.Contains(string(b), `"type":"`+want+`","plugin":"py","invocation":"`+out.InvocationID) &&
			!(want == "policy.decision" && strings.Contains(string(b), `"type":"policy.decision","plugin":"py"`)) {
			t.Errorf("no %s record for the Executa call", want)
		}
	}
	var data struct{ Handle string }
	_ = json.Unmarshal(out.Data, &data)
	if !strings.HasPrefix(data.Handle, "alh_") || strings.Contains(string(b), data.Handle) {
		t.Fatal("the plugin got no handle, or the evidence holds it")
	}
	// The handle delivered for a credential is dead once the call ends
	// (the invoke path ends the invocation).
	if _, err := f.b.Resolve(context.Background(), data.Handle); !errors.Is(err, broker.ErrHandleRevoked) {
		t.Fatalf("the call's handle after the call: %v, want revoked", err)
	}

	deny := newTestHost(t, f, func(o *host.Options) { o.Policy = &policy.Policy{Version: "v1", Default: "deny"} })
	if err := executa.Add(deny, pyPlugin(t, "py-denied"), roomy(executa.Options{})); err != nil {
		t.Fatal(err)
	}
	if _, err := invokeTool(deny, "py-denied", "context"); !errors.Is(err, host.ErrPolicyDenied) {
		t.Fatalf("denied: %v", err)
	}
	b, _ = os.ReadFile(f.evidence)
	// The decision is recorded under the invocation id it would have had.
	if !regexp.MustCompile(`"type":"policy.decision","plugin":"py-denied","invocation":"[0-9a-f]{32}","data":\{[^}]*"allow":false`).Match(b) {
		t.Fatal("no denial record for the Executa call")
	}

	crash := newTestHost(t, f, nil)
	if err := executa.Add(crash, pyPlugin(t, "py-crash", "crash"), roomy(executa.Options{})); err != nil {
		t.Fatal(err)
	}
	out, err = invokeTool(crash, "py-crash", "context")
	if err != nil || out.Status != host.CallFailed || out.Reason != "the plugin exited during the call" {
		t.Fatalf("a plugin that dies mid-call: %+v %v", out, err)
	}
}

// Shutdown with a call of each kind in flight: both end FAILED with the
// reason "host shutting down", recorded, and their handles revoked.
func TestShutdownCancelsInFlight(t *testing.T) {
	f := newHostFixture(t)
	h := newTestHost(t, f, func(o *host.Options) { o.ShutdownGrace = time.Second })
	if err := AddProvider(h, f.inst); err != nil {
		t.Fatal(err)
	}
	quick := executa.Timeouts{StdinGrace: 500 * time.Millisecond, TermGrace: 500 * time.Millisecond}
	if err := executa.Add(h, pyPlugin(t, "py"), roomy(executa.Options{Timeouts: quick})); err != nil {
		t.Fatal(err)
	}
	f.slowPost.Store(true)
	type result struct {
		out *host.Outcome
		err error
	}
	v1, ex := make(chan result, 1), make(chan result, 1)
	go func() {
		out, err := h.Invoke(context.Background(), f.inst.Name, host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/CreateTicket",
			Input: &ticketsv1.CreateTicketRequest{Project: "core", Title: "x"}, Deadline: time.Now().Add(time.Minute)})
		v1 <- result{out, err}
	}()
	go func() { out, err := invokeTool(h, "py", "hang"); ex <- result{out, err} }()
	<-f.seenAuth // the provider's call is at the upstream
	b, _ := os.ReadFile(f.evidence)
	for deadline := time.Now().Add(10 * time.Second); strings.Count(string(b), `"type":"invocation.start"`) < 2; b, _ = os.ReadFile(f.evidence) {
		if time.Now().After(deadline) {
			t.Fatal("the Executa call never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h.Shutdown(ctx)
	close(f.block) // release the upstream the provider's call waits on
	for name, ch := range map[string]chan result{"plugin/v1": v1, "executa": ex} {
		r := <-ch
		if r.err != nil || r.out.Status != host.CallFailed || r.out.Reason != host.ErrHostShutdown.Error() {
			t.Errorf("%s call at shutdown: %+v %v", name, r.out, r.err)
		}
	}
	if _, err := invokeList(h, f.inst.Name); !errors.Is(err, host.ErrHostShutdown) {
		t.Fatalf("call after shutdown: %v", err)
	}
	b, _ = os.ReadFile(f.evidence)
	if n := strings.Count(string(b), `"reason":"host shutting down"`); n != 2 {
		t.Fatalf("%d outcomes recorded as host shutting down, want 2", n)
	}
	f.b.mu.Lock()
	handles := append([]string(nil), f.b.handles...)
	f.b.mu.Unlock()
	for _, hd := range handles {
		if _, err := f.b.Resolve(context.Background(), hd); err == nil {
			t.Fatal("a handle of a cancelled call still resolves")
		}
	}
}

// An Executa plugin that never answers a call is signalled at the
// deadline, and its exit is a crash: restarted and counted. One whose
// health answer is no known word is restarted too.
func TestExecutaHungAndUnhealthyRestart(t *testing.T) {
	t.Parallel() // launches plugins: waits more than it computes
	f := newHostFixture(t)
	h := newTestHost(t, f, func(o *host.Options) { o.HealthInterval = 100 * time.Millisecond })
	if err := executa.Add(h, pyPlugin(t, "py"), roomy(executa.Options{})); err != nil {
		t.Fatal(err)
	}
	out, err := h.Invoke(context.Background(), "py", host.InvokeRequest{Method: "slow", Deadline: time.Now().Add(20 * time.Second)})
	if err != nil || out.Status != host.CallFailed || !strings.Contains(out.Reason, "deadline passed") {
		t.Fatalf("hung tool: %+v %v", out, err)
	}
	waitState(t, h, "py", "restarted after the hung call", func(s host.Status) bool { return s.Restarts == 1 && s.State == host.StateRunning })

	script, _ := filepath.Abs("../executa/testdata/compat/sdk_style.py")
	sick := pyPlugin(t, "sick")
	sick.Args = []string{script, "on-fire"}
	sick.Credentials = map[string]string{"API_KEY": "tickets.executa"}
	if err := executa.Add(h, sick, roomy(executa.Options{})); err != nil {
		t.Fatal(err)
	}
	s := waitState(t, h, "sick", "restarted", func(s host.Status) bool { return s.Restarts >= 1 })
	if !strings.Contains(s.LastFailure, host.ErrProbeFailed.Error()) || strings.Contains(s.LastFailure, "on-fire") {
		t.Fatalf("status: %+v", s)
	}
}
