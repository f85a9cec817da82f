package lease

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// Leased secrets next to a static KV v2 secret, against a real Vault
// (PKI role with generate_lease, EC P-256 keys): the first use of an
// invocation (Vault issues, the store records), the end (Vault revokes),
// and the steady state (every later request of the invocation).

func BenchmarkLeaseSteadyState(b *testing.B) {
	v := testenv.Vault(b)
	f := newLeaseFixture(b, v.Client(b), newMount(b, v), nil, broker.LeasesConfig{})
	g := &broker.Grant{PluginID: "p", InvocationID: "inv-steady", Intent: "cert", ExpiresAt: time.Now().Add(time.Hour)}
	ctx := context.Background()
	if _, err := f.b.Secret(ctx, g, false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.b.Secret(ctx, g, false); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	f.b.EndInvocation(ctx, "inv-steady")
}

// BenchmarkLeaseFirstUse: each op is a new invocation's first use; its
// end is timed apart (BenchmarkLeaseEnd).
func BenchmarkLeaseFirstUse(b *testing.B) {
	benchLease(b, false)
}

// BenchmarkLeaseEnd: each op ends an invocation whose lease is in use
// (swap for a tombstone, synchronous revocation at Vault).
func BenchmarkLeaseEnd(b *testing.B) {
	benchLease(b, true)
}

func benchLease(b *testing.B, timeEnd bool) {
	v := testenv.Vault(b)
	f := newLeaseFixture(b, v.Client(b), newMount(b, v), nil, broker.LeasesConfig{})
	ctx := context.Background()
	n := 0
	for b.Loop() {
		n++
		inv := "inv-" + strconv.Itoa(n)
		g := &broker.Grant{PluginID: "p", InvocationID: inv, Intent: "cert", ExpiresAt: time.Now().Add(time.Hour)}
		if timeEnd {
			b.StopTimer()
		}
		if _, err := f.b.Secret(ctx, g, false); err != nil {
			b.Fatal(err)
		}
		if timeEnd {
			b.StartTimer()
		} else {
			b.StopTimer()
		}
		if end, err := f.b.EndInvocation(ctx, inv); err != nil || len(end.Leases) != 1 || !end.Leases[0].Revoked {
			b.Fatalf("end: %+v %v", end, err)
		}
		if !timeEnd {
			b.StartTimer()
		}
	}
}
