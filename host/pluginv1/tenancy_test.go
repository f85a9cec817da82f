package pluginv1

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/internal/testenv"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

// attackResult is what the attacker prints.
type attackResult struct {
	PID   int               `json:"pid"`
	Codes map[string]string `json:"codes"`
}

// attack runs the attacker against p's sockets as uid (-1: the test's
// own) and returns what it saw.
func attack(t *testing.T, p *Plugin, uid int, args ...string) attackResult {
	t.Helper()
	argv := append([]string{attackerBin, "-provider", p.socket, "-host", p.hostSock}, args...)
	if uid >= 0 && uid != os.Getuid() {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Fatal("setpriv is required (util-linux)")
		}
		id := strconv.Itoa(uid)
		argv = append([]string{setpriv, "--reuid=" + id, "--regid=" + id, "--clear-groups", "--inh-caps=-all"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("attacker: %v\n%s", err, stderr.String())
	}
	var r attackResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("attacker printed %q: %v", out, err)
	}
	return r
}

// inFlight returns the id of the one invocation in flight on p.
func inFlight(t *testing.T, p *Plugin) string {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.inflight {
		return id
	}
	t.Fatal("no invocation in flight")
	return ""
}

// countLogged counts the refusals logged for socket with the caller's uid
// and pid.
func countLogged(t *testing.T, logs *testenv.SyncBuffer, socket string, uid, pid int) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l struct {
			Socket    string `json:"socket"`
			CallerUID *int   `json:"caller_uid"`
			CallerPID *int   `json:"caller_pid"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l.Socket == socket && l.CallerUID != nil && *l.CallerUID == uid && l.CallerPID != nil && *l.CallerPID == pid {
			n++
		}
	}
	return n
}

// envValue is name's value in the environment the launch gave p.
func envValue(p *Plugin, name string) string {
	for _, kv := range p.keys.env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

var providerCalls = []string{"Health", "GetManifest", "Invoke", "Shutdown"}
var hostCalls = []string{"Log", "RequestCredential", "EmitEvidence", "ReportProgress"}

// Another process reaches a plugin's two sockets by path — as the
// plugin's own uid (what every plugin of an unprivileged host shares),
// and as root — while one of its invocations is in flight, and calls
// both services with that invocation's id: every call is refused before
// any handler runs, each refusal is logged by the victim's host with the
// caller's uid and pid and counted, and the victim keeps serving its own
// host. A key the plugin holds (its HostService key, leaked) opens
// neither its provider socket nor, from another uid, its HostService. At
// every sandbox level this machine has, and off.
func TestOtherProcessesRefused(t *testing.T) {
	for _, level := range append(sandbox.Detect().Levels(), sandbox.LevelOff) {
		t.Run(string(level), func(t *testing.T) { otherProcessesRefused(t, level) })
	}
}

// The same with the host as an unprivileged user (setpriv to nobody):
// every plugin runs as the host's uid, and so does the attacker.
func TestOtherProcessesRefusedUnprivileged(t *testing.T) {
	// Not parallel: it writes a copy of the test binary and executes it,
	// which fails with ETXTBSY while a parallel test's fork still holds
	// the copy's write descriptor.
	if os.Getuid() != 0 {
		t.Skip("this run is already unprivileged: it is the inner run of TestOtherProcessesRefusedUnprivileged")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv is required (util-linux)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(providerBin) // readable by every uid
	bin := filepath.Join(dir, "pluginv1.test")
	if err := fsutil.CopyFile(self, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
		bin, "-test.run=^TestOtherProcessesRefused$", "-test.v", "-test.count=1")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", binDirEnv + "=" + dir, "GORACE=" + os.Getenv("GORACE")}
	cmd.Dir = wd
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test failed with the host unprivileged: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "sandbox level") {
			t.Log(strings.TrimSpace(line)) // which uid the plugins got
		}
	}
	for _, level := range append(sandbox.Detect().Levels(), sandbox.LevelOff) {
		if want := "--- PASS: TestOtherProcessesRefused/" + string(level); !strings.Contains(string(out), want) {
			t.Errorf("the unprivileged run lacks %q:\n%s", want, out)
		}
	}
}

func otherProcessesRefused(t *testing.T, level sandbox.Level) {
	f := newHostFixture(t)
	logs := &testenv.SyncBuffer{}
	reg := prometheus.NewRegistry()
	opts := f.opts
	opts.Log = slog.New(slog.NewJSONHandler(logs, nil))
	opts.Registerer = reg
	opts.Sandbox = sandbox.Config{Level: level}
	ctx := context.Background()
	// At landlock a root host's plugin reads its package as its own uid.
	for _, d := range []string{filepath.Dir(f.inst.Binary), filepath.Dir(filepath.Dir(f.inst.Binary))} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p, err := Launch(ctx, f.inst, opts)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	defer p.Shutdown(ctx)

	// An invocation in flight: the upstream holds its credentialed POST.
	f.slowPost.Store(true)
	done := make(chan *host.Outcome, 1)
	go func() {
		out, err := p.Invoke(ctx, host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/CreateTicket",
			Input: &ticketsv1.CreateTicketRequest{Project: "core", Title: "x"}, Deadline: time.Now().Add(60 * time.Second)})
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	select {
	case <-f.seenAuth:
	case <-time.After(30 * time.Second):
		t.Fatal("the victim never reached the upstream")
	}
	inv := inFlight(t, p)

	uid, own := p.uid, p.ownUID
	if !own {
		uid = os.Getuid()
	}
	t.Logf("sandbox level %s; the plugin's uid %d (its own: %v)", p.Sandbox(), uid, own)
	refusedCount := func(socket, reason string) float64 {
		return testutil.ToFloat64(p.refused.WithLabelValues(f.inst.Name, socket, reason))
	}

	// As the plugin's uid, with no key: Unauthenticated everywhere.
	r := attack(t, p, uid, "-invocation", inv)
	for _, c := range append(providerCalls, hostCalls...) {
		if r.Codes[c] != "Unauthenticated" {
			t.Errorf("same uid, no key: %s answered %s, want Unauthenticated", c, r.Codes[c])
		}
	}
	if got := refusedCount(socketHostService, reasonNoKey); got != 4 {
		t.Errorf("host_service no_key refusals counted: %v, want 4", got)
	}
	if n := countLogged(t, logs, socketHostService, uid, r.PID); n != 4 {
		t.Errorf("%d HostService refusals logged with the attacker's uid and pid, want 4:\n%s", n, logs.String())
	}
	// The provider refused its four and told its host, which logs and
	// counts them (the reports travel on their own; wait for them).
	for deadline := time.Now().Add(30 * time.Second); refusedCount(socketProvider, reasonNoKey) < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("provider refusals reported: %v, want 4:\n%s", refusedCount(socketProvider, reasonNoKey), logs.String())
		}
	}

	// With the plugin's HostService key as if leaked, and a forged host
	// key: the provider's socket still refuses (the keys differ by
	// direction), and HostService refuses another uid by its uid and, at
	// the plugin's own uid, for want of the invocation's key.
	leaked := envValue(p, plugin.PluginKeyEnv)
	as := []int{uid}
	if os.Getuid() == 0 && uid != 0 {
		as = append(as, 0) // root reaches every socket
	}
	for _, as := range as {
		r := attack(t, p, as, "-invocation", inv, "-host-key", leaked, "-plugin-key", leaked)
		for _, c := range providerCalls {
			if r.Codes[c] != "Unauthenticated" {
				t.Errorf("uid %d, leaked plugin key as the host's: %s answered %s, want Unauthenticated", as, c, r.Codes[c])
			}
		}
		wantHost := "PermissionDenied" // the plugin's key, but no invocation key
		if own && as != uid {
			wantHost = "Unauthenticated" // not the plugin's uid
		}
		for _, c := range hostCalls {
			if r.Codes[c] != wantHost {
				t.Errorf("uid %d, leaked plugin key: %s answered %s, want %s", as, c, r.Codes[c], wantHost)
			}
		}
	}
	if own && refusedCount(socketHostService, reasonPeerUID) != 4 {
		t.Errorf("peer uid refusals counted: %v, want 4", refusedCount(socketHostService, reasonPeerUID))
	}
	if got := refusedCount(socketHostService, reasonNoInvocationKey); got < 4 {
		t.Errorf("no_invocation_key refusals counted: %v, want at least 4", got)
	}
	if strings.Contains(logs.String(), leaked) || strings.Contains(logs.String(), p.keys.hostKey) {
		t.Fatal("a key reached the log")
	}

	// The victim kept serving its own host: the invocation in flight
	// finishes, and the next ones work.
	close(f.block)
	if out := <-done; out == nil || out.Status != host.CallSucceeded {
		t.Fatalf("the invocation in flight: %+v", out)
	}
	if err := p.Health(ctx); err != nil {
		t.Fatalf("health after the attack: %v", err)
	}
	out, err := p.Invoke(ctx, host.InvokeRequest{Method: listTickets, Input: &ticketsv1.ListTicketsRequest{Project: "core"},
		Deadline: time.Now().Add(30 * time.Second)})
	if err != nil || out.Status != host.CallSucceeded {
		t.Fatalf("invoke after the attack: %+v %v", out, err)
	}
	if m, err := reg.Gather(); err != nil || len(m) != 1 || m[0].GetName() != RefusedCallsMetric {
		t.Fatalf("registered metrics: %v %v", m, err)
	}
}

// While invocation A is in flight, invocation B of the same provider (a
// dry run) calls Log, EmitEvidence, RequestCredential (a write intent)
// and ReportProgress with A's id: all four are refused, and A's own four
// succeed.
func TestInvocationKeyBindsHostCalls(t *testing.T) {
	f := newHostFixture(t)
	logs := &testenv.SyncBuffer{}
	opts := f.opts
	opts.Log = slog.New(slog.NewJSONHandler(logs, nil))
	ctx := context.Background()
	p, err := Launch(ctx, f.install(t, badBin, "borrow"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(ctx)
	running := make(chan struct{})
	outA := make(chan *host.Outcome, 1)
	go func() {
		out, err := p.Invoke(ctx, host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/CreateTicket",
			Input: &ticketsv1.CreateTicketRequest{}, Deadline: time.Now().Add(60 * time.Second),
			OnRunning: func(host.Progress) { close(running) }})
		if err != nil {
			t.Error(err)
		}
		outA <- out
	}()
	<-running // A announced its id and waits for B
	b, err := p.Invoke(ctx, host.InvokeRequest{Method: listTickets, Input: &ticketsv1.ListTicketsRequest{}, DryRun: true,
		Deadline: time.Now().Add(60 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	a := <-outA
	codes := func(o *host.Outcome) []string {
		var c []string
		for _, d := range o.Diagnostics {
			c = append(c, d.Code)
		}
		return c
	}
	wantB := []string{"Log:PermissionDenied", "EmitEvidence:PermissionDenied", "RequestCredential:PermissionDenied", "ReportProgress:PermissionDenied"}
	if got := codes(b); strings.Join(got, " ") != strings.Join(wantB, " ") {
		t.Errorf("B with A's id: %v, want %v", got, wantB)
	}
	wantA := []string{"Log:OK", "EmitEvidence:OK", "RequestCredential:OK", "ReportProgress:OK"}
	if a == nil || strings.Join(codes(a), " ") != strings.Join(wantA, " ") {
		t.Errorf("A with its own id: %+v, want %v", a, wantA)
	}
	f.b.mu.Lock()
	issued := len(f.b.handles)
	f.b.mu.Unlock()
	if issued != 1 {
		t.Errorf("%d handles issued, want 1 (A's own)", issued)
	}
	if n := strings.Count(logs.String(), `"reason":"wrong_invocation_key"`); n != 4 {
		t.Errorf("%d refusals logged as wrong_invocation_key, want 4:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"plugin":"example.tickets"`) || !strings.Contains(logs.String(), `"caller_pid":`) {
		t.Errorf("refusals not attributed:\n%s", logs.String())
	}
}

// A provider that calls HostService other than through the SDK's client
// with the Invoke's context is refused: with no key at all
// (Unauthenticated), with the plugin's key but no invocation key, or with
// the SDK's client and a context not derived from the Invoke's
// (PermissionDenied). The same call made properly is answered.
func TestHostCallsOutsideTheInvokeContextRefused(t *testing.T) {
	f := newHostFixture(t)
	ctx := context.Background()
	p, err := Launch(ctx, f.install(t, badBin, "raw-client"), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(ctx)
	out, err := invokeOn(p, listTickets)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"raw:Unauthenticated", "raw-with-plugin-key:PermissionDenied",
		"sdk-background-context:PermissionDenied", "sdk-invoke-context:OK"}
	var got []string
	for _, d := range out.Diagnostics {
		got = append(got, d.Code)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("codes %v, want %v", got, want)
	}
}

func invokeOn(p *Plugin, method string) (*host.Outcome, error) {
	return p.Invoke(context.Background(), host.InvokeRequest{Method: method, Input: &ticketsv1.ListTicketsRequest{},
		Deadline: time.Now().Add(30 * time.Second)})
}

// A provider that answers a call without the host's key (one built on
// an SDK older than launch keys) is refused at launch, with a reason that
// says why and what to do, and a host marks it failed for good.
func TestKeylessProviderRefusedAtLaunch(t *testing.T) {
	f := newHostFixture(t)
	inst := f.install(t, badBin, "old-sdk")
	_, err := Launch(context.Background(), inst, f.opts)
	if !errors.Is(err, ErrKeylessProvider) || !strings.Contains(err.Error(), "rebuild it with the current sdk/plugin") {
		t.Fatalf("launch: %v, want ErrKeylessProvider", err)
	}
	h := newTestHost(t, f, nil)
	if err := AddProvider(h, inst); !errors.Is(err, ErrKeylessProvider) {
		t.Fatalf("add: %v", err)
	}
	s := waitState(t, h, inst.Name, "failed", func(s host.Status) bool { return s.State == host.StateFailed })
	if !strings.Contains(s.LastFailure, plugin.HostKeyMetadata) {
		t.Fatalf("failure reason %q does not say what the provider must check", s.LastFailure)
	}
}

// The provider is given the digest of the host's key, never the key,
// and a HostService key that matches nothing on its own socket.
func TestLaunchKeysPerDirection(t *testing.T) {
	k := newLaunchKeys()
	env := strings.Join(k.env, "\n")
	if strings.Contains(env, k.hostKey) {
		t.Fatal("the provider's environment holds the host's key")
	}
	other := newLaunchKeys()
	if other.hostKey == k.hostKey || len(k.hostKey) < plugin.MinKeyLen {
		t.Fatal("launch keys are not fresh 256-bit secrets")
	}
	for _, kv := range k.env {
		name, v, _ := strings.Cut(kv, "=")
		if name == plugin.PluginKeyEnv && (!k.pluginKey.Match(v) || v == k.hostKey) {
			t.Fatal("the plugin key is not the one HostService checks, or is the host's")
		}
	}
}
