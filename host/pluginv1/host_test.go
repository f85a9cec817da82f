package pluginv1

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/internal/testenv"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
	"github.com/airlock-dev/airlock/proxy"
)

var providerBin, badBin, attackerBin string

// binDirEnv hands the built binaries to an unprivileged run of a test
// (TestOtherProcessesRefusedUnprivileged).
const binDirEnv = "AIRLOCK_TEST_PLUGINV1_BIN_DIR"

func TestMain(m *testing.M) {
	sandbox.Init() // plugins start through a re-executed test binary
	if d := os.Getenv(binDirEnv); d != "" {
		providerBin, badBin, attackerBin = filepath.Join(d, "tickets-provider"), filepath.Join(d, "badprovider"), filepath.Join(d, "attacker")
		os.Exit(testenv.MainNoLeaks(m))
	}
	dir := testenv.Binaries("airlock-host-test-",
		testenv.Binary{Path: &providerBin, Pkg: "../../examples/tickets-provider"},
		testenv.Binary{Path: &badBin, Pkg: "./testdata/badprovider"},
		testenv.Binary{Path: &attackerBin, Pkg: "./testdata/attacker"})
	code := testenv.MainNoLeaks(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// recordingBroker passes calls to the real broker and remembers handles.
type recordingBroker struct {
	*broker.Broker
	mu      sync.Mutex
	handles []string
}

func (r *recordingBroker) Issue(ctx context.Context, req broker.IssueRequest) (broker.Issued, error) {
	iss, err := r.Broker.Issue(ctx, req)
	if err == nil {
		r.mu.Lock()
		r.handles = append(r.handles, iss.Handle)
		r.mu.Unlock()
	}
	return iss, err
}

type hostFixture struct {
	px       *proxy.Server // the real egress proxy, for listeners handed over
	inst     Installed
	opts     host.Options
	b        *recordingBroker
	evidence string
	seenAuth chan string
	block    chan struct{}
	slowPost atomic.Bool
	upPort   string
}

// install lays out a provider package (binary, manifest naming the
// upstream, optional behavior file) and returns it as installed.
func (f *hostFixture) install(t testing.TB, binary, behavior string) Installed {
	t.Helper()
	pkg := t.TempDir()
	bin := filepath.Join(pkg, filepath.Base(binary))
	data, _ := os.ReadFile(binary)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	mf, _ := os.ReadFile("../../examples/tickets-provider/manifest.yaml")
	mf = []byte(replaceAll(string(mf), "port: 443", "port: "+f.upPort))
	if err := os.WriteFile(filepath.Join(pkg, "manifest.yaml"), mf, 0o644); err != nil {
		t.Fatal(err)
	}
	if behavior != "" {
		os.WriteFile(filepath.Join(pkg, "behavior"), []byte(behavior), 0o644)
	}
	m, err := LoadManifest(filepath.Join(pkg, "manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := BinaryDigest(bin)
	return Installed{Name: "example.tickets", Binary: bin, BinarySHA256: digest, Manifest: m, ProtocolVersion: 1}
}

const upstreamSecret = "tk-live-7c1d2e3f4a5b6c7d"

func newHostFixture(t testing.TB) *hostFixture {
	t.Helper()
	return newHostFixtureWith(t, 0)
}

// newHostFixtureWith, given a pass TTL, also turns on the proxy's CONNECT
// interception (a CA created on the spot) and hands its certificate to
// the plugins, whose passes live passTTL between renewals.
func newHostFixtureWith(t testing.TB, passTTL time.Duration) *hostFixture {
	t.Helper()
	return newHostFixtureBroker(t, passTTL, nil)
}

// brokerHook changes the fixture's broker config (its intents) and
// returns the broker's options, given the fixture's handle store.
type brokerHook func(bc *broker.Config, store broker.Store) broker.Options

// newHostFixtureBroker is newHostFixtureWith whose broker hook, when set,
// rebinds the intents (leased secrets).
func newHostFixtureBroker(t testing.TB, passTTL time.Duration, hook brokerHook) *hostFixture {
	t.Helper()
	f := &hostFixture{seenAuth: make(chan string, 16), block: make(chan struct{})}
	ca := testenv.NewCA(t)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.seenAuth <- r.Header.Get("Authorization")
		switch {
		case r.Method == "GET" && r.URL.Path == "/api/tickets":
			json.NewEncoder(w).Encode([]map[string]string{{"id": "T-1", "title": "first", "state": "open"}})
		case r.Method == "POST" && r.URL.Path == "/api/tickets":
			if f.slowPost.Load() {
				<-f.block
			}
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]string{"id": "T-2", "title": "new", "state": "open"})
		default:
			http.NotFound(w, r)
		}
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "tickets.demo.airlock.test")}}
	up.StartTLS()
	t.Cleanup(func() {
		select {
		case <-f.block:
		default:
			close(f.block)
		}
		up.Close()
	})
	_, upPort, _ := net.SplitHostPort(up.Listener.Addr().String())

	f.upPort = upPort
	f.inst = f.install(t, providerBin, "")

	secrets := filepath.Join(t.TempDir(), "secrets.yaml")
	os.WriteFile(secrets, []byte("tickets/api: {token: "+upstreamSecret+"}\n"), 0o600)
	ref := broker.SecretRef{Source: broker.SourceFile, Path: "tickets/api", Field: "token"}
	inj := broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}
	// Listen first: the broker hands plugins the proxy's address.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bc := broker.Config{EgressProxy: l.Addr().String(), Secrets: broker.SecretsConfig{File: secrets}, Intents: map[string]broker.Intent{
		"tickets.read": {Class: broker.ClassRead, Secret: ref, Inject: inj}, "tickets.write": {Class: broker.ClassWrite, Secret: ref, Inject: inj},
		// For Executa plugins, which name no destinations themselves.
		"tickets.executa": {Class: broker.ClassRead, Secret: ref, Inject: inj,
			Destinations: []broker.Destination{{Host: "tickets.demo.airlock.test", Port: mustAtoi(upPort), PathPrefix: "/api/"}}},
	}, PassTTL: passTTL}.WithDefaults()
	cache := broker.NewSecretCache(map[string]broker.SecretSource{broker.SourceFile: &broker.FileSource{Path: secrets}}, time.Minute, 0, nil, nil)
	store := broker.NewMemoryStore(100, time.Minute, time.Hour, nil)
	var bopts broker.Options
	if hook != nil {
		bopts = hook(&bc, store)
	}
	f.b = &recordingBroker{Broker: broker.New(bc, store, cache, bopts)}
	pc := proxy.Config{AllowCIDRs: []string{"127.0.0.0/8"}, UpstreamCAFile: ca.PEMFile,
		Resolve: map[string][]string{"tickets.demo.airlock.test": {"127.0.0.1"}}}
	if passTTL > 0 {
		dir := t.TempDir()
		pc.Intercept = proxy.InterceptConfig{CAFile: filepath.Join(dir, "ca.pem"), CAKeyFile: filepath.Join(dir, "ca.key")}
	}
	pc = pc.WithDefaults()
	px, err := proxy.New(pc, f.b.Broker, proxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.px = px
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { px.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	f.evidence = filepath.Join(t.TempDir(), "evidence.jsonl")
	ev, err := evidence.Open(f.evidence)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	f.opts = host.Options{Broker: f.b, Evidence: ev, EgressProxy: bc.EgressProxy, InterceptCAFile: pc.Intercept.CAFile, Policy: policy.AllowAll(),
		Ports: host.NewPortSet(ticketsv1.File_numinance_ports_tickets_v1_tickets_proto),
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil))}
	return f
}

func replaceAll(s, old, new string) string {
	out := ""
	for {
		i := indexOf(s, old)
		if i < 0 {
			return out + s
		}
		out += s[:i] + new
		s = s[i+len(old):]
	}
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestInvokeEndToEnd(t *testing.T) {
	f := newHostFixture(t)
	ctx := context.Background()
	p, err := Launch(ctx, f.inst, f.opts)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	defer p.Shutdown(ctx)
	if err := p.Health(ctx); err != nil {
		t.Fatal(err)
	}

	out, err := p.Invoke(ctx, host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/ListTickets",
		Input: &ticketsv1.ListTicketsRequest{Project: "core"}, Deadline: time.Now().Add(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != host.CallSucceeded {
		t.Fatalf("ListTickets: %v %s %v", out.Status, out.Reason, out.Diagnostics)
	}
	var list ticketsv1.ListTicketsResponse
	if err := protojson.Unmarshal(out.Data, &list); err != nil || len(list.Tickets) != 1 || list.Tickets[0].Id != "T-1" {
		t.Fatalf("result %v %v", &list, err)
	}
	if got := <-f.seenAuth; got != "Bearer "+upstreamSecret {
		t.Fatalf("upstream saw %q", got)
	}
	// The handle died with the invocation.
	f.b.mu.Lock()
	handle := f.b.handles[0]
	f.b.mu.Unlock()
	if _, err := f.b.Resolve(ctx, handle); !errors.Is(err, broker.ErrHandleRevoked) {
		t.Fatalf("handle after the invocation: %v", err)
	}

	out, err = p.Invoke(ctx, host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/CreateTicket",
		Input: &ticketsv1.CreateTicketRequest{Project: "core", Title: "new"}, Deadline: time.Now().Add(30 * time.Second)})
	if err != nil || out.Status != host.CallSucceeded || len(out.EvidenceIDs) != 1 {
		t.Fatalf("CreateTicket: %+v %v", out, err)
	}

	// Dry run on a method that does not support it is refused before
	// anything reaches the provider.
	if _, err := p.Invoke(ctx, host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/CreateTicket",
		Input: &ticketsv1.CreateTicketRequest{}, DryRun: true, Deadline: time.Now().Add(time.Minute)}); !errors.Is(err, host.ErrDryRunUnsupported) {
		t.Fatalf("dry run: %v", err)
	}
	if _, err := p.Invoke(ctx, host.InvokeRequest{Method: "numinance.plugin.v1.PluginService/Shutdown",
		Input: &ticketsv1.ListTicketsRequest{}, Deadline: time.Now().Add(time.Minute)}); !errors.Is(err, host.ErrMethodNotDispatchable) {
		t.Fatalf("non-port method: %v", err)
	}
	// A policy denial never reaches the provider and is recorded.
	p.opts.Policy = &policy.Policy{Version: "v1", Default: "deny"}
	n0 := len(f.seenAuth)
	if _, err := p.Invoke(ctx, host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/ListTickets",
		Input: &ticketsv1.ListTicketsRequest{}, Deadline: time.Now().Add(time.Minute)}); !errors.Is(err, host.ErrPolicyDenied) {
		t.Fatalf("policy deny: %v", err)
	}
	if len(f.seenAuth) != n0 {
		t.Fatal("a denied action reached the upstream")
	}
	p.Shutdown(ctx)

	fh, _ := os.Open(f.evidence)
	defer fh.Close()
	n, _, err := evidence.Verify(fh)
	if err != nil || n < 8 {
		t.Fatalf("evidence: %d records, %v", n, err)
	}
	b, _ := os.ReadFile(f.evidence)
	if indexOf(string(b), `"allow":false`) < 0 {
		t.Error("no policy denial record")
	}
	for _, want := range []string{"lifecycle.launch", "policy.decision", "invocation.start", "credential.issued", "plugin.tickets.created", "invocation.outcome", "lifecycle.shutdown"} {
		if indexOf(string(b), `"type":"`+want+`"`) < 0 {
			t.Errorf("no %s record", want)
		}
	}
	if indexOf(string(b), handle) >= 0 || indexOf(string(b), upstreamSecret) >= 0 {
		t.Fatal("evidence holds a handle or the secret")
	}
	// The provider's spec_version is in the lifecycle evidence (the
	// sample provider answers 1.0), beside the host's.
	if indexOf(string(b), `"host_spec_version":"1.0"`) < 0 || indexOf(string(b), `"spec_version":"1.0"`) < 0 {
		t.Error("lifecycle.launch does not record the spec_version of the handshake")
	}
}

func TestLaunchRefusals(t *testing.T) {
	f := newHostFixture(t)
	ctx := context.Background()
	bad := f.inst
	bad.BinarySHA256 = flipHexDigit(bad.BinarySHA256, 0)
	if _, err := Launch(ctx, bad, f.opts); !errors.Is(err, ErrBinaryDigest) {
		t.Fatalf("digest mismatch: %v", err)
	}
	other := f.inst
	m := proto.Clone(f.inst.Manifest).(*pb.Manifest)
	m.Version = "9.9.9"
	other.Manifest = m
	if _, err := Launch(ctx, other, f.opts); !errors.Is(err, ErrManifestMismatch) {
		t.Fatalf("manifest mismatch: %v", err)
	}
	noPort := f.opts
	noPort.Ports = host.NewPortSet()
	if _, err := Launch(ctx, f.inst, noPort); !errors.Is(err, ErrHandshake) {
		t.Fatalf("port the host does not serve: %v", err)
	}
	v2 := f.inst
	v2.ProtocolVersion = 2
	if _, err := Launch(ctx, v2, f.opts); !errors.Is(err, ErrHandshake) {
		t.Fatalf("no common version: %v", err)
	}
}

// The provider dies mid-invoke: the invocation ends FAILED and its handles
// no longer resolve.
func TestProviderKilledMidInvoke(t *testing.T) {
	f := newHostFixture(t)
	ctx := context.Background()
	p, err := Launch(ctx, f.inst, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(ctx)
	f.slowPost.Store(true) // the upstream holds the provider's POST
	done := make(chan *host.Outcome, 1)
	go func() {
		out, err := p.Invoke(ctx, host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/CreateTicket",
			Input: &ticketsv1.CreateTicketRequest{Project: "core", Title: "x"}, Deadline: time.Now().Add(30 * time.Second)})
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	select {
	case <-f.seenAuth: // the credentialed request is at the upstream
	case <-time.After(20 * time.Second):
		t.Fatal("the provider never reached the upstream")
	}
	p.Kill()
	out := <-done
	if out == nil || out.Status != host.CallFailed {
		t.Fatalf("outcome after the provider died: %+v", out)
	}
	f.b.mu.Lock()
	handle := f.b.handles[len(f.b.handles)-1]
	f.b.mu.Unlock()
	if _, err := f.b.Resolve(ctx, handle); !errors.Is(err, broker.ErrHandleRevoked) {
		t.Fatalf("handle after the provider died: %v", err)
	}
}

// flipHexDigit flips the low bit of the hex digit at i: the result always
// differs from the input, whatever the digest is.
func flipHexDigit(s string, i int) string {
	b := []byte(s)
	v, _ := strconv.ParseUint(string(b[i]), 16, 8)
	b[i] = strconv.FormatUint(v^1, 16)[0]
	return string(b)
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}
