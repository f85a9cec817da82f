package lease

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/airlock-dev/airlock/broker"
	brokerapi "github.com/airlock-dev/airlock/broker/api"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// serveLeaseAPI serves b's API to this process on a unix socket and
// returns a client of it; both stop at cleanup.
func serveLeaseAPI(t *testing.T, b *broker.Broker) *brokerapi.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "broker.sock")
	l, err := peerauth.ListenUnix(sock, peerauth.UnixOptions{AllowedUIDs: []int{os.Getuid()}, GID: peerauth.NoGroup})
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(filepath.Dir(sock), broker.DefaultTokenFile)
	tok, err := peerauth.EnsureToken("broker.api.token_file", tokenFile, peerauth.NoGroup)
	if err != nil {
		t.Fatal(err)
	}
	srv := &brokerapi.Service{Broker: b, StoreType: "memory", Version: "test"}
	g := grpc.NewServer(append(brokerapi.AuthOptions(tok, nil), srv.ServerOptions()...)...)
	srv.Register(g)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	c, err := brokerapi.Dial("unix://"+sock, brokerapi.DialOptions{TokenFile: tokenFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Over the broker API (airlock host → airlock serve): the end of an
// invocation names the leases it revoked (for the outcome evidence), and
// inspecting a handle shows its invocation's lease: none before the first
// use, active, then ended, by fingerprint.
func TestLeaseOverAPI(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	mount := newMount(t, v)
	f := newLeaseFixture(t, v.Client(t), mount, nil, broker.LeasesConfig{})
	c := serveLeaseAPI(t, f.b)
	iss, err := c.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "inv-api", Intent: "cert", Destinations: leaseDest,
		Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Inspect(ctx, iss.Fingerprint)
	if err != nil || in.Lease == nil || in.Lease.State != broker.LeaseStateNone {
		t.Fatalf("inspect before the first use: %+v, %v", in.Lease, err)
	}
	g, err := f.b.Resolve(ctx, iss.Handle)
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.b.Secret(ctx, g, false)
	if err != nil {
		t.Fatal(err)
	}
	in, err = c.Inspect(ctx, iss.Fingerprint)
	if err != nil || in.Lease == nil || in.Lease.State != broker.LeaseStateActive || in.Lease.Fingerprint != s.Lease || in.Lease.ExpiresAt.IsZero() {
		t.Fatalf("inspect in use: %+v, %v", in.Lease, err)
	}
	end, err := c.EndInvocation(ctx, "inv-api")
	if err != nil || end.Handles != 1 || len(end.Leases) != 1 {
		t.Fatalf("end: %+v, %v", end, err)
	}
	if l := end.Leases[0]; l.Intent != "cert" || l.Fingerprint != s.Lease || !l.Revoked {
		t.Fatalf("lease end: %+v", l)
	}
	in, err = c.Inspect(ctx, iss.Fingerprint)
	if err != nil || in.Lease == nil || in.Lease.State != broker.LeaseStateEnded || in.Lease.Fingerprint != s.Lease {
		t.Fatalf("inspect after the end: %+v, %v", in.Lease, err)
	}
}
