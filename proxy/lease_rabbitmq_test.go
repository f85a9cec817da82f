package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/broker/lease"
	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/internal/tracing"
)

// mqHost is the name the RabbitMQ management API is reached by, through
// a TLS front (the proxy only speaks TLS upstream).
const mqHost = "mq.example.org"

// rabbitEnv is a real rabbitmq-server behind a TLS front, and a Vault
// RabbitMQ secrets engine that creates a user per lease.
type rabbitEnv struct {
	v     *testenv.VaultServer
	vc    *vaultapi.Client
	rmq   *testenv.RabbitMQServer
	ca    *testenv.CA
	port  int // the TLS front's
	mount string
	// before are the users RabbitMQ had when the test began (the server
	// is shared by the package's tests).
	before map[string]bool
}

func newRabbitEnv(t testing.TB) *rabbitEnv {
	t.Helper()
	e := &rabbitEnv{v: testenv.Vault(t), rmq: testenv.RabbitMQ(t), ca: testenv.NewCA(t), mount: "rabbitmq-" + rand.Text()[:8]}
	e.vc = e.v.Client(t)
	e.v.MountRabbitMQ(t, e.mount, e.rmq, 10*time.Minute)
	target, _ := url.Parse(e.rmq.APIURL)
	front := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(target))
	front.TLS = tls12Config{}.config(e.ca, t)
	front.StartTLS()
	t.Cleanup(front.Close)
	_, port, _ := net.SplitHostPort(front.Listener.Addr().String())
	e.port, _ = strconv.Atoi(port)
	e.before = map[string]bool{}
	for _, u := range e.users(t) {
		e.before[u] = true
	}
	return e
}

// leaseProxy is one replica: broker with leases, and its proxy.
type leaseProxy struct {
	b      *broker.Broker
	leases *lease.Manager
	addr   string
	audit  *testenv.SyncBuffer
}

// newLeaseProxy starts a replica on store (a memory store when nil) whose
// intent "mq" is a RabbitMQ user per invocation, injected as Basic auth.
func (e *rabbitEnv) newLeaseProxy(t testing.TB, store broker.Store, vc *vaultapi.Client, lc broker.LeasesConfig) *leaseProxy {
	t.Helper()
	// "mq.static" is RabbitMQ's administrator as a static secret, for
	// the benchmarks' comparison.
	secrets := filepath.Join(t.TempDir(), "secrets.yaml")
	if err := os.WriteFile(secrets, []byte("mq/admin: {username: "+e.rmq.Admin+", password: "+e.rmq.AdminPassword+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	basic := broker.Inject{Kind: &broker.BasicInject{UsernameField: "username"}}
	bc := broker.Config{EgressProxy: "127.0.0.1:0", Leases: lc, Secrets: broker.SecretsConfig{File: secrets}, Intents: map[string]broker.Intent{
		"mq": {Class: broker.ClassWrite, Inject: basic,
			Secret: broker.SecretRef{Source: broker.SourceVaultLease, Mount: e.mount, Path: "creds/plugin", Field: "password"}},
		"mq.static": {Class: broker.ClassWrite, Inject: basic,
			Secret: broker.SecretRef{Source: broker.SourceFile, Path: "mq/admin", Field: "password"}},
	}}
	return startLeaseProxy(t, e.ca, bc, store, vc, mqHost)
}

func (e *rabbitEnv) issue(t testing.TB, b *broker.Broker, inv string, deadline time.Time) string {
	t.Helper()
	return e.issueFor(t, b, inv, "mq", deadline)
}

func (e *rabbitEnv) issueFor(t testing.TB, b *broker.Broker, inv, intent string, deadline time.Time) string {
	t.Helper()
	iss, err := b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-mq", InvocationID: inv, Intent: intent,
		Destinations: []broker.Destination{{Host: mqHost, Port: e.port}}, Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	return iss.Handle
}

// whoami asks RabbitMQ, through the proxy with handle, who the injected
// credential is: the status, the user name and the X-Airlock-Error code.
func (e *rabbitEnv) whoami(t *testing.T, p *leaseProxy, handle string) (int, string, string) {
	t.Helper()
	pu := &url.URL{Scheme: "http", Host: p.addr, User: url.User(handle)}
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := c.Get("http://" + mqHost + ":" + strconv.Itoa(e.port) + "/api/whoami")
	if err != nil {
		t.Fatalf("whoami through the proxy: %v", err)
	}
	defer resp.Body.Close()
	var who struct {
		Name string `json:"name"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&who)
	return resp.StatusCode, who.Name, resp.Header.Get("X-Airlock-Error")
}

// users lists the RabbitMQ users made since the test began.
func (e *rabbitEnv) users(t testing.TB) []string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.rmq.APIURL+"/api/users", nil)
	req.SetBasicAuth(e.rmq.Admin, e.rmq.AdminPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var all []struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range all {
		if u.Name != e.rmq.Admin && !e.before[u.Name] {
			out = append(out, u.Name)
		}
	}
	return out
}

// userGone reports whether RabbitMQ no longer knows name.
func (e *rabbitEnv) userGone(t *testing.T, name string) bool {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.rmq.APIURL+"/api/users/"+url.PathEscape(name), nil)
	req.SetBasicAuth(e.rmq.Admin, e.rmq.AdminPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusNotFound
}

// Each invocation gets its own RabbitMQ user, injected as Basic auth; the
// handle works during the invocation; when the invocation ends (the host
// revokes it on success and on failure alike: the broker cannot tell
// them apart, and needs not) the user no longer exists at RabbitMQ by the
// time RevokeInvocation returns, and the handle is refused.
func TestRabbitMQUserPerInvocation(t *testing.T) {
	e := newRabbitEnv(t)
	p := e.newLeaseProxy(t, nil, e.vc, broker.LeasesConfig{})
	deadline := time.Now().Add(time.Hour)
	for _, ending := range []string{"success", "failure"} {
		t.Run(ending, func(t *testing.T) {
			inv := "inv-" + ending
			h1 := e.issue(t, p.b, inv, deadline)
			h2 := e.issue(t, p.b, inv, deadline)
			if n := len(e.users(t)); n != 0 {
				t.Fatalf("%d RabbitMQ users before the first use; issue must create none", n)
			}
			code, user, errCode := e.whoami(t, p, h1)
			if code != http.StatusOK || user == "" || user == e.rmq.Admin {
				t.Fatalf("first use: %d %q %s", code, user, errCode)
			}
			if code, again, _ := e.whoami(t, p, h2); code != http.StatusOK || again != user {
				t.Fatalf("the invocation's second handle: %d as %q, want the same user %q", code, again, user)
			}
			other := e.issue(t, p.b, inv+"-other", deadline)
			if code, o, _ := e.whoami(t, p, other); code != http.StatusOK || o == user {
				t.Fatalf("another invocation: %d as %q; want a user of its own", code, o)
			}
			for _, line := range strings.Split(strings.TrimSpace(p.audit.String()), "\n") {
				var a struct{ Decision, Lease_FP string }
				if err := json.Unmarshal([]byte(line), &a); err != nil {
					t.Fatal(err)
				}
				if a.Decision == "allow" && len(a.Lease_FP) != 16 {
					t.Fatalf("an audit line lacks the lease fingerprint: %s", line)
				}
			}
			if _, err := p.b.RevokeInvocation(context.Background(), inv); err != nil {
				t.Fatal(err)
			}
			if !e.userGone(t, user) {
				t.Fatal("the invocation's RabbitMQ user still exists after its end")
			}
			if code, _, errCode := e.whoami(t, p, h1); code != http.StatusForbidden || errCode != CodeHandleInvalid {
				t.Fatalf("handle after the end: %d %s", code, errCode)
			}
			if _, err := p.b.RevokeInvocation(context.Background(), inv+"-other"); err != nil {
				t.Fatal(err)
			}
		})
	}
	if u := e.users(t); len(u) != 0 {
		t.Fatalf("users left at RabbitMQ: %d", len(u))
	}
}

// An invocation whose deadline passes with no end from the host (a host
// that died) loses its user all the same: the replica that obtained the
// lease revokes it at the deadline.
func TestRabbitMQDeadline(t *testing.T) {
	e := newRabbitEnv(t)
	p := e.newLeaseProxy(t, nil, e.vc, broker.LeasesConfig{CheckInterval: 50 * time.Millisecond})
	h := e.issue(t, p.b, "inv-deadline", time.Now().Add(3*time.Second))
	code, user, errCode := e.whoami(t, p, h)
	if code != http.StatusOK {
		t.Fatalf("use before the deadline: %d %s", code, errCode)
	}
	for limit := time.Now().Add(time.Minute); !e.userGone(t, user); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(limit) {
			t.Fatal("the user outlived the invocation's deadline")
		}
	}
	if p.leases.Outstanding() != 0 {
		t.Fatalf("outstanding leases: %d", p.leases.Outstanding())
	}
}

// Vault unreachable at the first use: 503 lease_unavailable, and nothing
// reaches RabbitMQ (no user is created, no request is sent).
func TestRabbitMQVaultDown(t *testing.T) {
	e := newRabbitEnv(t)
	cfg := vaultapi.DefaultConfig()
	cfg.Address = "http://127.0.0.1:1"
	cfg.MaxRetries = 0
	down, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := e.newLeaseProxy(t, nil, down, broker.LeasesConfig{})
	code, _, errCode := e.whoami(t, p, e.issue(t, p.b, "inv-down", time.Now().Add(time.Hour)))
	if code != http.StatusServiceUnavailable || errCode != CodeLeaseUnavailable {
		t.Fatalf("Vault down: %d %s, want 503 %s", code, errCode, CodeLeaseUnavailable)
	}
	if n := len(e.users(t)); n != 0 {
		t.Fatalf("%d users created", n)
	}
}

// Two replicas (two proxies sharing one Redis store) serve one invocation
// with one RabbitMQ user, whichever replica a request reaches first; the
// end, received by either, removes the user for both.
func TestRabbitMQTwoReplicas(t *testing.T) {
	e := newRabbitEnv(t)
	rs := testenv.Redis(t)
	keyFile := filepath.Join(t.TempDir(), "seal.key")
	key := make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	var ps []*leaseProxy
	for range 2 {
		st, err := broker.NewRedisStore(broker.RedisConfig{Address: rs.Addr, KeyPrefix: "mq:", LocalCache: -1}, time.Minute, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		ps = append(ps, e.newLeaseProxy(t, st, e.vc, broker.LeasesConfig{SealKeyFile: keyFile}))
	}
	h := e.issue(t, ps[0].b, "inv-two", time.Now().Add(time.Hour))
	type answer struct {
		code int
		user string
	}
	got := make(chan answer, 2)
	for _, p := range ps {
		go func() {
			code, user, _ := e.whoami(t, p, h)
			got <- answer{code, user}
		}()
	}
	a, b := <-got, <-got
	if a.code != http.StatusOK || b.code != http.StatusOK || a.user != b.user {
		t.Fatalf("replicas answered %+v and %+v; want one user for the invocation", a, b)
	}
	for limit := time.Now().Add(time.Minute); len(e.users(t)) != 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(limit) {
			t.Fatalf("users at RabbitMQ: %d; the replica that lost the race keeps its own", len(e.users(t)))
		}
	}
	if _, err := ps[1].b.RevokeInvocation(context.Background(), "inv-two"); err != nil {
		t.Fatal(err)
	}
	if !e.userGone(t, a.user) {
		t.Fatal("the user outlived the invocation")
	}
	if code, _, _ := e.whoami(t, ps[0], h); code == http.StatusOK {
		t.Fatal("the other replica still serves the ended invocation")
	}
	if status, err := e.rmq.WhoAmI(a.user, "any"); err != nil || status != http.StatusUnauthorized {
		t.Fatalf("RabbitMQ answered the ended user with %d (%v)", status, err)
	}
}

// An invocation that outlives its lease keeps its user: the lease is
// renewed before it expires (here a 4 s lease renewed 3 s before), and
// the user still works after the lease's first expiry has passed.
func TestRabbitMQRenewal(t *testing.T) {
	e := newRabbitEnv(t)
	short := "rabbitmq-" + rand.Text()[:8]
	e.v.MountRabbitMQ(t, short, e.rmq, 4*time.Second)
	e.mount = short
	p := e.newLeaseProxy(t, nil, e.vc, broker.LeasesConfig{RenewBefore: 3 * time.Second, CheckInterval: 100 * time.Millisecond})
	h := e.issue(t, p.b, "inv-renew", time.Now().Add(time.Hour))
	code, user, errCode := e.whoami(t, p, h)
	if code != http.StatusOK {
		t.Fatalf("first use: %d %s", code, errCode)
	}
	st, err := p.leases.State(context.Background(), "inv-renew", "mq")
	if err != nil || st.State != broker.LeaseStateActive || !st.Renewable {
		t.Fatalf("lease: %+v %v", st, err)
	}
	first := st.ExpiresAt
	for limit := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		now, err := p.leases.State(context.Background(), "inv-renew", "mq")
		if err != nil {
			t.Fatal(err)
		}
		if now.ExpiresAt.After(first) && time.Now().After(first.Add(time.Second)) {
			break
		}
		if time.Now().After(limit) {
			t.Fatal("the lease was never renewed")
		}
	}
	if code, again, _ := e.whoami(t, p, h); code != http.StatusOK || again != user {
		t.Fatalf("after the lease's first expiry: %d as %q, want %q", code, again, user)
	}
	if _, err := p.b.RevokeInvocation(context.Background(), "inv-renew"); err != nil {
		t.Fatal(err)
	}
	if !e.userGone(t, user) {
		t.Fatal("the renewed user outlived the invocation")
	}
}

// startLeaseProxy starts a replica: a broker with leases on store (a
// memory store when nil) reading Vault with vc, and its proxy, which
// resolves host to loopback and trusts ca upstream.
func startLeaseProxy(t testing.TB, ca *testenv.CA, bc broker.Config, store broker.Store, vc *vaultapi.Client, host string) *leaseProxy {
	t.Helper()
	return startLeaseProxyTraced(t, ca, bc, store, vc, host, nil)
}

// startLeaseProxyTraced is startLeaseProxy whose requests tr traces.
func startLeaseProxyTraced(t testing.TB, ca *testenv.CA, bc broker.Config, store broker.Store, vc *vaultapi.Client, host string, tr *tracing.Tracing) *leaseProxy {
	t.Helper()
	if _, ok := store.(*broker.RedisStore); ok {
		bc.Store = broker.StoreConfig{Type: broker.StoreRedis, Redis: broker.RedisConfig{Address: "127.0.0.1:1"}}
	}
	bc = bc.WithDefaults()
	if err := bc.Validate(); err != nil {
		t.Fatal(err)
	}
	if store == nil {
		store = broker.NewMemoryStore(1000, time.Minute, time.Hour, nil)
	}
	leases, err := lease.New(bc, vc, store.(broker.LeaseStore), lease.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leases.Start())
	p := &leaseProxy{leases: leases, audit: &testenv.SyncBuffer{}}
	cache := broker.NewSecretCache(map[string]broker.SecretSource{broker.SourceFile: &broker.FileSource{Path: bc.Secrets.File}}, time.Hour, 0, nil, nil)
	p.b = broker.New(bc, store, cache, broker.Options{Leases: leases})
	res := &staticResolver{}
	res.set(host, "127.0.0.1")
	cfg := Config{AllowCIDRs: []string{"127.0.0.0/8"}, UpstreamCAFile: ca.PEMFile,
		Limits: LimitsConfig{PerHandleRPS: 100000, PerPluginRPS: 100000}}.WithDefaults()
	srv, err := New(cfg, p.b, Options{Resolver: res, Audit: slog.New(slog.NewJSONHandler(p.audit, nil)), Tracing: tr})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("proxy Serve: %v", err)
		}
	})
	return p
}
