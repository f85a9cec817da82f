package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/tokens"
)

type apiFixture struct {
	mem    *memFixture
	ring   *tokens.Ring
	client *Client
}

func startAPI(t *testing.T, allowed []int) *apiFixture {
	t.Helper()
	f := newMemFixture(t)
	ring, err := tokens.NewRing(context.Background(), &tokens.MemorySource{}, tokens.RingOptions{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := serveAPI(t, f.b, ring, allowed)
	return &apiFixture{mem: f, ring: ring, client: c}
}

func TestAPIOverUnixSocket(t *testing.T) {
	ctx := context.Background()
	f := startAPI(t, nil)
	var api broker.API = f.client
	iss, err := api.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "inv", Intent: "example.read",
		Destinations: []broker.Destination{{Host: "api.example.com", PathPrefix: "/v1/", Methods: []string{"GET"}}},
		Deadline:     time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatalf("Issue over gRPC: %v", err)
	}
	g, err := f.mem.b.Resolve(ctx, iss.Handle)
	if err != nil || g.Destinations[0].PathPrefix != "/v1/" || iss.EgressProxy != "127.0.0.1:18899" {
		t.Fatalf("resolve: %+v %v", g, err)
	}
	if n, err := api.RevokeInvocation(ctx, "inv"); err != nil || n != 1 {
		t.Fatalf("revoke: %d %v", n, err)
	}
	if _, err := f.mem.b.Resolve(ctx, iss.Handle); !errors.Is(err, broker.ErrHandleRevoked) {
		t.Fatalf("after revoke over gRPC: %v", err)
	}
	if n, err := api.RevokePlugin(ctx, "p"); err != nil || n != 0 {
		t.Fatalf("revoke plugin: %d %v", n, err)
	}

	// A plugin pass over the API: from an intent's binding, without a
	// deadline (the broker caps it).
	pass, err := api.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "pass-p", Pass: true, PassIntents: []string{"example.bound"}})
	if err != nil {
		t.Fatalf("pass over gRPC: %v", err)
	}
	if g, err := f.mem.b.Resolve(ctx, pass.Handle); err != nil || !g.Pass || g.Destinations[0].Host != "api.example.com" {
		t.Fatalf("pass grant %+v, %v", g, err)
	}
	renew := func(plugin string) (broker.Issued, error) {
		return api.Issue(ctx, broker.IssueRequest{PluginID: plugin, InvocationID: "pass-renew", Pass: true, Renew: pass.Handle})
	}
	if got, err := renew("p"); err != nil || got.Handle != pass.Handle || got.ExpiresAt.Before(pass.ExpiresAt) {
		t.Fatalf("renewal over gRPC: %+v %v", got, err)
	}
	if _, err := renew("q"); !errors.Is(err, broker.ErrHandleUnknown) || strings.Contains(err.Error(), pass.Handle) {
		t.Fatalf("renewing another plugin's pass over gRPC: %v", err)
	}
	if _, err := api.RevokePlugin(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := renew("p"); !errors.Is(err, broker.ErrHandleRevoked) {
		t.Fatalf("renewing a revoked pass over gRPC: %v", err)
	}

	// Errors keep their identity across the socket, without echoing input.
	_, err = api.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "i2", Intent: "secret-sauce",
		Destinations: apiDest, Deadline: time.Now().Add(time.Minute)})
	if !errors.Is(err, broker.ErrIntentUnknown) || strings.Contains(err.Error(), "secret-sauce") {
		t.Fatalf("unknown intent: %v", err)
	}
	_, err = api.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "i2", Intent: "example.write",
		Destinations: apiDest, Deadline: time.Now().Add(time.Minute), DryRun: true})
	if !errors.Is(err, broker.ErrDryRunWrite) {
		t.Fatalf("dry run write: %v", err)
	}
	if _, err := api.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "i2", Intent: "example.read", Destinations: apiDest}); !errors.Is(err, broker.ErrDeadlinePassed) {
		t.Fatalf("no deadline: %v", err)
	}

	// Tokens minted over the API verify with the ring's keys.
	tok, err := f.client.MintToken(ctx, broker.TokenRequest{Audience: tokens.AudienceStorage,
		Binding:  tokens.Binding{UserID: "u", ExecutaToolID: "t", ToolInvokeID: "i"},
		Deadline: time.Now().Add(time.Minute), AppID: "a", AppSlug: "s"})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := tokens.NewVerifier(f.ring, tokens.VerifierOptions{})
	c, err := v.VerifyStorage(ctx, tok.Raw)
	if err != nil || !c.HasScope(tokens.ScopeApp) || c.ID != tok.ID {
		t.Fatalf("minted storage token: %+v %v", c, err)
	}
	if _, err := f.client.MintToken(ctx, broker.TokenRequest{Audience: tokens.AudienceSampling,
		Binding: tokens.Binding{UserID: "u", ExecutaToolID: "t", ToolInvokeID: "i"}, Deadline: time.Now().Add(time.Minute)}); !errors.Is(err, broker.ErrBadRequest) {
		t.Fatalf("sampling token without caps: %v", err)
	}
	st, err := f.client.Status(ctx)
	if err != nil || !st.GetStoreOk() || st.GetSigningKid() != f.ring.Active().ID || len(st.GetIntents()) != 4 {
		t.Fatalf("status: %v %v", st, err)
	}
}

func TestAPIRefusesUnlistedUID(t *testing.T) {
	f := startAPI(t, []int{os.Getuid() + 4242})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := f.client.Status(ctx)
	if !errors.Is(err, broker.ErrBrokerUnavailable) {
		t.Fatalf("unlisted uid: %v, want ErrBrokerUnavailable", err)
	}
}

func TestAPIOverMutualTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ca := testenv.NewCA(t)
	certFile, keyFile := testenv.WriteKeyPair(t, ca.Issue(t, "127.0.0.1"))
	creds, err := TCPCredentials(broker.TCPConfig{CertFile: certFile, KeyFile: keyFile, ClientCAFile: ca.PEMFile})
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), broker.DefaultTokenFile)
	tok, err := peerauth.EnsureToken("broker.api.token_file", tokenFile, peerauth.NoGroup)
	if err != nil {
		t.Fatal(err)
	}
	f := newMemFixture(t)
	g := grpc.NewServer(append([]grpc.ServerOption{grpc.Creds(creds)}, AuthOptions(tok, nil)...)...)
	(&Service{Broker: f.b}).Register(g)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(l)
	defer g.Stop()

	clientCert := ca.Issue(t, "airlock-host")
	good, err := Dial(l.Addr().String(), DialOptions{TokenFile: tokenFile,
		TLS: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS13}})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if _, err := good.Status(ctx); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	noCert, _ := Dial(l.Addr().String(), DialOptions{TokenFile: tokenFile, TLS: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS13}})
	defer noCert.Close()
	if _, err := noCert.Status(ctx); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	// A client certificate is not enough: the token is required on TCP
	// too.
	other := filepath.Join(t.TempDir(), "other.token")
	if _, err := peerauth.EnsureToken("t", other, peerauth.NoGroup); err != nil {
		t.Fatal(err)
	}
	wrongToken, _ := Dial(l.Addr().String(), DialOptions{TokenFile: other,
		TLS: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS13}})
	defer wrongToken.Close()
	if _, err := wrongToken.Status(ctx); !errors.Is(err, broker.ErrUnauthenticated) {
		t.Fatalf("a certificate with another token: %v, want ErrUnauthenticated", err)
	}
	if _, err := Dial(l.Addr().String(), DialOptions{TokenFile: tokenFile}); err == nil {
		t.Fatal("plaintext TCP dial accepted")
	}
}

// serveAPI serves b's API on a unix socket (peers with the allowed uids)
// and returns a client of it; both stop at cleanup.
func serveAPI(t *testing.T, b *broker.Broker, ring *tokens.Ring, allowed []int) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "broker.sock")
	l, err := peerauth.ListenUnix(sock, peerauth.UnixOptions{AllowedUIDs: allowed, GID: peerauth.NoGroup})
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(filepath.Dir(sock), broker.DefaultTokenFile)
	tok, err := peerauth.EnsureToken("broker.api.token_file", tokenFile, peerauth.NoGroup)
	if err != nil {
		t.Fatal(err)
	}
	srv := &Service{Broker: b, Tokens: tokens.NewIssuer(ring, tokens.IssuerOptions{}), Ring: ring, StoreType: "memory", Version: "test"}
	g := grpc.NewServer(append(AuthOptions(tok, nil), srv.ServerOptions()...)...)
	srv.Register(g)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	c, err := Dial("unix://"+sock, DialOptions{TokenFile: tokenFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if st, err := os.Stat(filepath.Dir(sock)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir mode %v %v", st.Mode().Perm(), err)
	}
	return c
}

// A call refused for its token is attributed: the log line names the
// caller's uid and pid (never what it presented), and the refusal is
// counted.
func TestAuthRefusalNamesCaller(t *testing.T) {
	ctx := context.Background()
	sock := filepath.Join(t.TempDir(), "run", "broker.sock")
	l, err := peerauth.ListenUnix(sock, peerauth.UnixOptions{GID: peerauth.NoGroup})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := peerauth.EnsureToken("broker.api.token_file", filepath.Join(filepath.Dir(sock), broker.DefaultTokenFile), peerauth.NoGroup)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	f := newMemFixture(t)
	g := grpc.NewServer(AuthOptions(tok, log)...)
	(&Service{Broker: f.b}).Register(g)
	go g.Serve(l)
	defer g.Stop()
	other := filepath.Join(t.TempDir(), "other.token")
	if _, err := peerauth.EnsureToken("t", other, peerauth.NoGroup); err != nil {
		t.Fatal(err)
	}
	c, err := Dial("unix://"+sock, DialOptions{TokenFile: other})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := prometheus.NewRegistry()
	if err := peerauth.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	before := refusalCount(t, reg, "broker API")
	if _, err := c.Status(ctx); !errors.Is(err, broker.ErrUnauthenticated) {
		t.Fatalf("wrong token: %v, want ErrUnauthenticated", err)
	}
	var line struct {
		Msg     string `json:"msg"`
		PeerUID *int   `json:"peer_uid"`
		PeerPID *int   `json:"peer_pid"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(logs.Bytes()), &line); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if line.PeerUID == nil || *line.PeerUID != os.Getuid() || line.PeerPID == nil || *line.PeerPID != os.Getpid() {
		t.Fatalf("refusal log does not name the caller: %s", logs.String())
	}
	raw, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(logs.Bytes(), bytes.TrimSpace(raw)) {
		t.Fatal("the refusal log carries the presented token")
	}
	if after := refusalCount(t, reg, "broker API"); after != before+1 {
		t.Fatalf("refusals counted %v -> %v, want one more", before, after)
	}
}

func refusalCount(t *testing.T, reg *prometheus.Registry, socket string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "airlock_local_api_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "socket" && lp.GetValue() == socket {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
